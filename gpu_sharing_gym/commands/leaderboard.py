"""Run the leaderboard: every policy × scenario × seed cell through the one evaluation loop.

gsg leaderboard --scenarios default --policies all --seeds 3 --out runs/demo
gsg leaderboard --suite standard --out runs/standard     (configs/leaderboards/standard.yaml)
gsg leaderboard --policies first_fit,time_sharing --seed-list 0,1,2,3 --out runs/lb
gsg leaderboard --scenarios heldout --backend ray --ray-address auto --out runs/lb
gsg leaderboard --policies all,my_pkg.sched:MyPolicy --scenarios default --out runs/mine

Seeds are fixed and published: --seeds N means seeds 0..N-1; --seeds 0,1,2 (or --seed-list)
gives them explicitly. Without torch (the rl extra) the agents that need it (ppo, the planner)
are skipped with one warning line; asked for alone, they are an error.
--scenarios takes names, YAML paths, `heldout` (the held-out set, configs/scenarios/heldout/,
the default) or `all` (the shipped scenarios). --suite NAME (or a YAML path) takes scenarios,
policies and seeds from a leaderboard suite (configs/leaderboards/; --list-suites lists them);
--scenarios, --policies and --seeds/--seed-list given beside it override the suite's. A rerun with the same --out computes only the
cells that are missing or failed. Writes DIR/leaderboard.csv, summary.csv, LEADERBOARD.md,
index.html, plots/, tb/ (tensorboard --logdir DIR/tb) and cells/.
Exit status: 0 all cells ok, 1 some cells failed (recorded; rerun to retry), 2 bad input,
130 Ctrl-C, 143 SIGTERM (finished cells are saved and the workers stopped; rerun to resume).
Off a terminal, progress is a plain line every 30 s (GSG_PROGRESS_INTERVAL); --quiet: none.
"""

from __future__ import annotations

import argparse
import glob
import os
import shlex
import sys
from pathlib import Path

from gpu_sharing_env.config import SCENARIO_DIR, ConfigError, load_scenario, scenario_names
from gpu_sharing_env.registry import UnknownPolicyError, make_policy, policy_names
from gpu_sharing_gym.backends import BackendError, add_backend_args, check_backend_args
from gpu_sharing_gym.cells import plan_cells
from gpu_sharing_gym.ci import CI_NOTE
from gpu_sharing_gym.commands import seed_spec
from gpu_sharing_gym.leaderboard import run_leaderboard, write_outputs
from gpu_sharing_gym.plumbing import cli_args
from gpu_sharing_gym.plumbing.cli_args import RL_INSTALL, Parser, fail, rl_missing
from gpu_sharing_gym.plumbing.fileio import atomic_write_text
from gpu_sharing_gym.plumbing.interrupt import exit_code, stopped_by
from gpu_sharing_gym.report import text_table
from gpu_sharing_gym.suites import load_suite, suite_names

PROG = "gsg leaderboard"
HELDOUT_DIR = SCENARIO_DIR / "heldout"


class InputError(ValueError):
    """Bad command-line input; the message is one line."""


def parse_policies(text: str) -> list[str]:
    names: list[str] = []
    heuristics = policy_names("policy")
    for n in (t.strip() for t in text.split(",")):
        if n == "all":  # every registered heuristic
            names += heuristics
        elif any(c in n for c in "*?["):  # a glob (runs/ft/models/*.zip): its files, sorted
            found = sorted(glob.glob(n))
            if not found:
                raise InputError(f"--policies: no file matches {n!r}")
            names += found
        else:
            names.append(n)
    if not names or any(not n for n in names):
        raise InputError(f"--policies: empty name in {text!r}")
    for n in names:
        if n not in heuristics:
            make_policy(n)  # raises UnknownPolicyError listing the known names
    if len(set(names)) != len(names):
        raise InputError(f"--policies: duplicate name in {text!r}")
    return names


def without_rl_agents(text: str) -> tuple[str, list[str]]:
    """``--policies`` without the agents (learned ones, the planner) that cannot load here
    because the ``rl`` extra (torch) is missing, and those agents: ``(text, [])`` where it is
    installed. An agent is a name of the ``gpu_sharing_gym.agents`` entry points that does not
    load, or a path to a ``.zip`` checkpoint; the heuristics never need torch."""
    if rl_missing() is None:
        return text, []
    agents = set(policy_names("agent"))
    keep: list[str] = []
    skipped: list[str] = []
    for n in (t.strip() for t in text.split(",")):
        if n in agents or n.endswith(".zip"):
            try:
                make_policy(n)
            except UnknownPolicyError:
                skipped.append(n)
                continue
        keep.append(n)
    return ",".join(keep), skipped


def parse_scenarios(text: str) -> dict[str, tuple[str, float]]:
    """Scenario name -> (absolute YAML path, slo_target), validated by loading each."""
    tokens: list[str] = []
    for tok in (t.strip() for t in text.split(",")):
        if not tok:
            raise InputError(f"--scenarios: empty name in {text!r}")
        if tok == "heldout":
            tokens += [str(p) for p in sorted(HELDOUT_DIR.glob("*.yaml"))]
        elif tok == "all":
            tokens += scenario_names()
        else:
            tokens.append(tok)
    out: dict[str, tuple[str, float]] = {}
    for tok in tokens:
        cfg = load_scenario(tok)
        if cfg.name in out:
            raise InputError(f"--scenarios: scenario {cfg.name!r} given twice")
        out[cfg.name] = (str(Path(cfg.source_path).resolve()), cfg.slo_target)
    if not out:
        raise InputError(f"--scenarios: no scenario in {text!r}")
    return out


def parse_seeds(n: int | list[int] | None, seed_list: str | None) -> list[int]:
    if seed_list is None:
        if isinstance(n, list):
            return n
        if n is None or n < 1:
            raise InputError(f"--seeds: must be >= 1 (got {n})")
        return list(range(n))
    try:
        return seed_spec(seed_list)
    except ValueError as e:
        raise InputError(f"--seed-list: {e} (got {seed_list!r})") from None


def prepare_out(out: Path) -> None:
    """Create ``out`` and prove it writable (nothing in it is touched)."""
    if out.exists() and not out.is_dir():
        raise InputError(f"--out: {out} exists and is not a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / f".write-test.{os.getpid()}"
        atomic_write_text(probe, "")
        probe.unlink()
    except OSError as e:
        raise InputError(f"--out: {out}: not writable ({e.strerror or e})") from None


def build_parser() -> argparse.ArgumentParser:
    ap = Parser(prog=PROG, description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--suite", default=None, help=f"a suite ({', '.join(suite_names())}) or YAML")
    ap.add_argument("--list-suites", action="store_true", help="list the shipped suites, exit")
    ap.add_argument("--scenarios", default=None, help="comma list (default: heldout)")
    ap.add_argument(
        "--policies",
        default=None,
        help="comma list of 'all' (the heuristic policies), registered names "
        f"({', '.join(policy_names())}), module:Class, a model.zip path, or a glob of them "
        "(runs/x/models/*.zip)",
    )
    seeds = ap.add_mutually_exclusive_group()
    seeds.add_argument(
        "--seeds",
        type=cli_args.seeds,
        default=None,
        metavar="N|LIST",
        help="N: seeds 0..N-1 (default 3); or a list: 0,1,2 or 800-859",
    )
    seeds.add_argument("--seed-list", default=None, help="explicit seeds: 1,2,3 or 800-859 or both")
    ap.add_argument(
        "--out", type=cli_args.output_dir, default=Path("runs/leaderboard"), help="output directory"
    )
    ap.add_argument(
        "--workers",
        type=cli_args.positive_int,
        default=os.cpu_count() or 1,
        help="parallel cells (default: the CPU count)",
    )
    add_backend_args(ap)
    ap.add_argument("--occupancy-policy", default=None, help="policy of the placement chart")
    ap.add_argument("--quiet", action="store_true", help="no progress bar")
    return ap


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    if args.list_suites:
        for name in suite_names():
            print(f"{name:<10}  {load_suite(name).description}")
        return 0
    try:
        if args.suite is not None:
            suite = load_suite(args.suite)
            if args.scenarios is None:
                args.scenarios = ",".join(suite.scenarios)
            if args.policies is None:
                args.policies = ",".join(suite.policies)
            if args.seeds is None and args.seed_list is None:
                args.seeds = suite.seeds
                if suite.seed_list is not None:
                    args.seed_list = ",".join(map(str, suite.seed_list))
        args.scenarios = "heldout" if args.scenarios is None else args.scenarios
        args.policies = "all" if args.policies is None else args.policies
        args.policies, skipped = without_rl_agents(args.policies)
        if skipped and not args.policies:
            raise InputError(
                f"--policies: {', '.join(skipped)} need torch, which is not installed: {RL_INSTALL}"
            )
        if skipped:
            print(
                f"{PROG}: warning: skipping {', '.join(skipped)} (these agents need torch, "
                f"which is not installed: {RL_INSTALL}); running the rest",
                file=sys.stderr,
            )
        policies = parse_policies(args.policies)
        scenarios = parse_scenarios(args.scenarios)
        seeds = parse_seeds(
            3 if args.seeds is None and args.seed_list is None else args.seeds, args.seed_list
        )
        if args.workers < 1:
            raise InputError(f"--workers: must be >= 1 (got {args.workers})")
        if args.occupancy_policy is not None and args.occupancy_policy not in policies:
            raise InputError(f"--occupancy-policy: {args.occupancy_policy!r} is not run")
        check_backend_args(args)
        prepare_out(args.out)
    except (InputError, ConfigError, UnknownPolicyError, BackendError) as e:
        return fail(PROG, str(e))
    cells = plan_cells(policies, {n: p for n, (p, _) in scenarios.items()}, seeds)
    try:
        results = run_leaderboard(
            args.out, cells, args.backend, args.workers, args.ray_address, not args.quiet
        )
        command = "gsg leaderboard " + shlex.join(argv)
        summary = write_outputs(
            args.out,
            results,
            {n: t for n, (_, t) in scenarios.items()},
            command,
            seeds,
            args.occupancy_policy,
        )
    except BackendError as e:
        return fail(PROG, str(e))
    except KeyboardInterrupt as e:  # Ctrl-C or SIGTERM; the workers are stopped by now
        print(
            f"\n{PROG}: {stopped_by(e)}; finished cells are saved, rerun to resume",
            file=sys.stderr,
        )
        return exit_code(e)
    for name, (_, target) in scenarios.items():
        print(f"\n{name}: mean over seeds {','.join(map(str, seeds))} (SLO target {target:g})")
        print(text_table(summary, name))
    print(f"\n{CI_NOTE}")
    failed = sum(r["record"]["status"] != "ok" for r in results)
    out = args.out
    print(f"\ntables: {out / 'leaderboard.csv'}, {out / 'summary.csv'}, {out / 'LEADERBOARD.md'}")
    print(f"HTML report: {out / 'index.html'}")
    if (out / "tb").is_dir():
        print(f"TensorBoard: tensorboard --logdir {out / 'tb'}")
    if failed:
        print(f"{failed} of {len(results)} cells failed (see LEADERBOARD.md); rerun to retry them")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
