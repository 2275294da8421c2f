"""The ``gsg`` command: one entry point for every tool.

    gsg evaluate --policy first_fit,antman --scenario default --seeds 3
    gsg leaderboard --scenarios default --policies all --seeds 3 --out runs/lb
    gsg train --algo maskable_ppo --scenario default --out runs/ppo      # needs the [rl] extra
    gsg calibrate --data ../shared/data
    gsg reproduce --experiment all
    gsg bench [--quick] | gsg bench replay ... | gsg bench markdown out/bench.json
    gsg trace stats PODS.csv --format openb
    gsg headroom --scenarios default --seeds 7101-7110 --out runs/headroom

``gsg COMMAND --help`` shows a command's options; a bad option or value is one line,
``gsg COMMAND: error: ...``, exit status 2. Ctrl-C exits with status 130 and SIGTERM with 143,
after the command has saved what it can (each command's help says what it keeps). The
``scripts/*.py`` files are the same commands for a source checkout.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable

from gpu_sharing_gym.plumbing import collector
from gpu_sharing_gym.plumbing.cli_args import RL_INSTALL, fail, missing_rl
from gpu_sharing_gym.plumbing.interrupt import exit_code, exit_process, sigterm_raises, stopped_by

#: command -> (module with ``main(argv) -> int``, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "evaluate": (
        "gpu_sharing_gym.commands.evaluate",
        "policies on a scenario over seeds -> metric records",
    ),
    "leaderboard": (
        "gpu_sharing_gym.commands.leaderboard",
        "policies x scenarios x seeds -> tables, plots",
    ),
    "train": (
        "gpu_sharing_gym.agents.train",
        "train an RL agent (MaskablePPO, PPO, A2C, DQN); needs [rl]",
    ),
    "calibrate": (
        "gpu_sharing_gym.commands.calibrate",
        "fit the speed model to measurements, print errors",
    ),
    "reproduce": (
        "gpu_sharing_gym.commands.reproduce",
        "the seed papers' findings, claim by claim",
    ),
    "bench": (
        "gpu_sharing_gym.bench.suite",
        "benchmark suite (also: bench replay, bench markdown)",
    ),
    "trace": ("gpu_sharing_gym.commands.trace", "workload statistics of a trace or the generator"),
    "headroom": (
        "gpu_sharing_gym.headroom",
        "how much lookahead gains over the best heuristic (planner bar)",
    ),
    "workload-report": (
        "gpu_sharing_gym.workload_report",
        "the duration predictor's error by input set; SJF on predictions",
    ),
}
#: ``gsg bench <sub>``: the other benchmark tools.
BENCH_SUBCOMMANDS = {
    "replay": "gpu_sharing_gym.bench.replay",
    "markdown": "gpu_sharing_gym.bench.markdown",
}


def _usage() -> str:
    width = max(map(len, COMMANDS))
    lines = ["usage: gsg COMMAND [options]   (gsg COMMAND --help for a command's options)", ""]
    lines += [f"  {name:<{width}}  {text}" for name, (_, text) in COMMANDS.items()]
    return "\n".join(lines)


def _load(module: str) -> Callable[[list[str] | None], int]:
    return importlib.import_module(module).main  # type: ignore[no-any-return]


def main(argv: list[str] | None = None) -> int:
    """Dispatch ``gsg COMMAND ...`` to the command's ``main``; returns its exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(_usage())
        return 0 if args else 2
    if args[0] in ("-V", "--version"):
        from gpu_sharing_env import __version__

        print(f"gsg (gpu-sharing-gym) {__version__}")
        return 0
    command, rest = args[0], args[1:]
    if command not in COMMANDS:
        known = ", ".join(COMMANDS)
        return fail("gsg", f"unknown command {command!r} (known: {known}; gsg --help)")
    module = COMMANDS[command][0]
    if command == "bench" and rest and rest[0] in BENCH_SUBCOMMANDS:
        module, rest = BENCH_SUBCOMMANDS[rest[0]], rest[1:]
    try:
        with sigterm_raises():
            with collector.deferred():  # the command's modules live to the end of the process
                run = _load(module)
            return int(run(rest) or 0)
    except BrokenPipeError:  # the reader went away (gsg ... | head): not an error of ours
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # Python's own flush at exit must not fail too
        return 0
    except KeyboardInterrupt as e:  # Ctrl-C or SIGTERM that the command did not handle itself
        print(f"\ngsg {command}: {stopped_by(e)}", file=sys.stderr)
        return exit_code(e)
    except ModuleNotFoundError as e:
        missing = missing_rl(e)
        if missing is None:
            raise
        print(
            f"gsg {command}: needs the RL extra ({missing} is not installed): {RL_INSTALL}",
            file=sys.stderr,
        )
        return 2


def entry(argv: list[str] | None = None) -> None:
    """The ``gsg`` console script and ``scripts/*.py``: :func:`main`, then :func:`exit_process`
    (an interrupted command ends even if a thread of a process pool is stuck)."""
    exit_process(main(argv))


if __name__ == "__main__":
    entry()
