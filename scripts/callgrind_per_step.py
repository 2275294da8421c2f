"""Instructions a step by function: two callgrind runs of ``scripts/callgrind_steps.py`` and
their difference (issue 51's per-function tables, 2026-12-01 notes).

Runs ``scripts/callgrind_steps.py`` under ``valgrind --tool=callgrind`` with ``N`` counted steps
and with ``BASE`` (0; at 1,024 GPUs take 10, as that script's docstring says), the two at once,
then prints per function the difference over ``N - BASE``: inclusive (the compiled
functions, ``__pyx_``) and self (every function). Settings pass through to that script
(``ENV``, ``W``, ``SIZE``, ``SCOPE``, ``GC=off``, ``PYTHONPATH`` selects the tree)::

    ENV=GpuSharing-v3 W=200 python scripts/callgrind_per_step.py OUT_DIR           # N=300
    ENV=GpuSharing-v3 SIZE=1024 SCOPE=window W=20 N=30 BASE=10 python scripts/callgrind_per_step.py OUT
    TOGGLE=__pyx_pw_15gpu_sharing_env_3sim_6engine_9Simulator_83apply,...  # count inside these only

``TOGGLE`` (comma-separated symbols) is callgrind's ``--toggle-collect``: only the
instructions inside those functions are counted. Needs ``valgrind`` and ``callgrind_annotate``
(a developer's tool, not installed by ``make setup``); the runs take 1-2 min on ``default``.
``PYTHONHASHSEED=0`` and ``OPENBLAS_NUM_THREADS=1`` are set for both runs.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
TOP = int(os.environ.get("TOP", "45"))


def _run(out: Path, n: int) -> subprocess.Popen[bytes]:
    env = dict(os.environ, N=str(n), PYTHONHASHSEED="0", OPENBLAS_NUM_THREADS="1")
    env.setdefault("ENV", "GpuSharing-v3")
    env.setdefault("W", "200")
    toggles = [t for t in os.environ.get("TOGGLE", "").split(",") if t]
    cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out / f'cg-{n}.out'}"]
    cmd += [f"--toggle-collect={t}" for t in toggles]
    cmd += [sys.executable, str(HERE / "callgrind_steps.py")]
    log = open(out / f"cg-{n}.log", "wb")  # noqa: SIM115 (closed with the process)
    return subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)


def _load(path: Path, inclusive: bool) -> dict[str, int]:
    """Per function (its name, without file or object), the most callgrind_annotate gives."""
    text = subprocess.run(
        ["callgrind_annotate", f"--inclusive={'yes' if inclusive else 'no'}", "--threshold=100",
         str(path)],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    out: dict[str, int] = {}
    for line in text.splitlines():
        m = re.match(r"\s*([\d,]+)\s+\([^)]*\)\s+(.*)", line)
        if not m:
            continue
        key = m.group(2).strip()
        if key.startswith(("=>", "<")):
            continue
        key = re.sub(r"\s*\[.*\]$", "", key)
        key = re.sub(r"'\d+$", "", key).split(":")[-1]
        out[key] = max(out.get(key, 0), int(m.group(1).replace(",", "")))
    return out


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit("usage: python scripts/callgrind_per_step.py OUT_DIR")
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    n, base = int(os.environ.get("N", "300")), int(os.environ.get("BASE", "0"))
    if n <= base:
        sys.exit(f"N: must be > BASE (got N={n}, BASE={base})")
    procs = [_run(out, n), _run(out, base)]
    if any(p.wait() for p in procs):
        sys.exit(f"callgrind failed: see {out}/cg-{n}.log and cg-{base}.log")
    for inclusive in (True, False):
        a, b = _load(out / f"cg-{base}.out", inclusive), _load(out / f"cg-{n}.out", inclusive)
        rows = sorted(((b.get(k, 0) - a.get(k, 0)) / (n - base), k) for k in a.keys() | b.keys())
        print("===== inclusive" if inclusive else "===== self", "(k instructions a step)")
        shown = 0
        for v, k in reversed(rows):
            if (inclusive and "pyx" not in k and "TOTALS" not in k) or "annotated" in k:
                continue
            print(f"{v / 1000:9.1f}k {k[:140]}")
            shown += 1
            if shown > TOP:
                break


if __name__ == "__main__":
    main()
