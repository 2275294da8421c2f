"""The ``sbs`` section of the suite: our trace replay beside Alibaba's PAI v2020 simulator.

It runs ``side_by_side.sh`` (the project's shared bench script, ``../shared/bench/`` from the
checkout, or ``SBS_SCRIPT``) once per arrival setting, the trace's own submit times
(``SBS_ARRIVAL_RATE=-1``) and the peer README's 1,000 jobs per minute, and reads back the
per-run files it leaves (``/usr/bin/time -v`` of every whole process, our JSON records). The
section runs only when ``SBS_PEER_GIT`` names a local git dir of ``alibaba/clusterdata``
(nothing of the peer is fetched or kept in the project); every other ``SBS_*`` knob of the
script passes through (``SBS_JOBS``, ``SBS_GPUS``, ``SBS_RUNS``, ...).

Per setting: each side's policies with every run's wall time, the best, peak RSS; and per our
policy ``x_best_peer`` = the peer's best wall time over its policies / ours (> 1: ours faster),
the issue's measure (runs alternate peer, ours, peer, ours on one machine, so the ratio holds
where absolute times drift with the load).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

#: Arrival settings: -1 the trace's own submit times; R > 0: R jobs per 60 s (the peer's -r).
RATES = (-1, 1000)
#: The issue's target (issue 24): ours >= this many times faster than the peer's best policy.
TARGET_X = 10.0
#: ... with our peak resident set at most this (MB).
TARGET_RSS_MB = 150.0
_WALL = re.compile(r"Elapsed \(wall clock\) time.*: (\S+)")
_RSS = re.compile(r"Maximum resident set size \(kbytes\): (\d+)")
_CPU = re.compile(r"(?:User|System) time \(seconds\): ([\d.]+)")


def script_path(root: Path | None = None) -> Path:
    """``SBS_SCRIPT``, else ``../shared/bench/side_by_side.sh`` beside the checkout."""
    env = os.environ.get("SBS_SCRIPT")
    if env:
        return Path(env)
    root = root or Path(__file__).resolve().parents[2]
    return root.parent / "shared" / "bench" / "side_by_side.sh"


def enabled() -> bool:
    """Whether the section runs: ``SBS_PEER_GIT`` is set."""
    return bool(os.environ.get("SBS_PEER_GIT"))


def read_time_v(path: Path) -> tuple[float, float, float]:
    """(wall seconds, peak RSS MB, CPU seconds: user + system) from a ``/usr/bin/time -v``
    report."""
    text = path.read_text()
    m = _WALL.search(text)
    r = _RSS.search(text)
    if m is None or r is None:
        raise ValueError(f"{path}: not a /usr/bin/time -v report")
    wall = sum(float(x) * 60**i for i, x in enumerate(reversed(m.group(1).split(":"))))
    cpu = sum(float(x) for x in _CPU.findall(text))
    return wall, int(r.group(1)) / 1024.0, cpu


def collect(run_dir: Path) -> dict[str, Any]:
    """One setting's results from the script's run directory (``runs-<tag>``)."""
    rows: dict[str, dict[str, Any]] = {}
    for f in sorted(run_dir.glob("*.time")):
        side, policy, _round = f.stem.split("-", 2)
        wall, rss, cpu = read_time_v(f)
        r = rows.setdefault(
            f"{side}:{policy}", {"side": side, "policy": policy, "walls": [], "cpus": []}
        )
        r["walls"].append(round(wall, 2))
        r["cpus"].append(round(cpu, 2))
        r["rss_mb"] = round(max(r.get("rss_mb", 0.0), rss), 1)
        if side == "ours":
            rec_path = f.with_suffix(".json")
            if rec_path.is_file():
                rec = json.loads(rec_path.read_text())[0]
                r["in_proc_s"] = round(float(rec.get("x_wall_s", float("nan"))), 2)
                r["jobs_completed"] = rec.get("jobs_completed")
    for r in rows.values():
        r["best_s"] = min(r["walls"])
        r["best_cpu_s"] = min(r["cpus"])
    peer = [r for r in rows.values() if r["side"] == "peer"]
    best_peer = min((r["best_s"] for r in peer), default=None)
    best_peer_cpu = min((r["best_cpu_s"] for r in peer), default=None)
    for r in rows.values():
        if r["side"] == "ours" and best_peer:
            r["x_best_peer"] = round(best_peer / r["best_s"], 2)
        if r["side"] == "ours" and best_peer_cpu and r["best_cpu_s"] > 0:
            r["x_best_peer_cpu"] = round(best_peer_cpu / r["best_cpu_s"], 2)
    machine = {}
    mt = run_dir / "machine.txt"
    if mt.is_file():
        for line in mt.read_text().splitlines():
            k, _, v = line.partition(" ")
            machine[k] = v
    return {"rows": list(rows.values()), "best_peer_s": best_peer, "load": machine}


def run(root: Path | None = None, rates: tuple[int, ...] = RATES) -> dict[str, Any]:
    """Run the script for each arrival setting; the section's JSON."""
    script = script_path(root)
    if not script.is_file():
        return {"skipped": f"{script} not found (set SBS_SCRIPT)"}
    cwd = root or Path(__file__).resolve().parents[2]
    out: dict[str, Any] = {"script": str(script), "settings": {}}
    sbs_dir = Path(os.environ.get("SBS_DIR", "/tmp/sbs"))
    for rate in rates:
        env = {**os.environ, "SBS_ARRIVAL_RATE": str(rate)}
        proc = subprocess.run(
            ["bash", str(script)], cwd=cwd, env=env, capture_output=True, text=True, check=False
        )
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            out["settings"][str(rate)] = {"error": " | ".join(tail)}
            continue
        m = re.search(r"runs (\S+)\s*$", proc.stdout.strip())
        run_dir = Path(m.group(1)) if m else None
        if run_dir is None or not run_dir.is_dir():
            cands = sorted(sbs_dir.glob("runs-*"), key=lambda p: p.stat().st_mtime)
            run_dir = cands[-1] if cands else None
        if run_dir is None:
            out["settings"][str(rate)] = {"error": "no run directory found"}
            continue
        res = collect(run_dir)
        res["table"] = proc.stdout
        out["settings"][str(rate)] = res
    commit = Path(os.environ.get("SBS_PEER", "/tmp/peer")) / "sim" / ".sbs_commit"
    out["peer_commit"] = commit.read_text().strip() if commit.is_file() else None
    out["jobs"] = int(os.environ.get("SBS_JOBS", "20000"))
    out["gpus"] = int(os.environ.get("SBS_GPUS", "6500"))
    return out


def checks(sbs: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Issue 24's targets: per setting and our policy, x the peer's best >= 10; our RSS."""
    res: dict[str, dict[str, Any]] = {}
    for rate, s in sbs.get("settings", {}).items():
        where = "own arrivals" if rate == "-1" else f"{rate} jobs/min"
        for r in s.get("rows", []):
            if r["side"] != "ours" or "x_best_peer" not in r:
                continue
            res[f"side-by-side {r['policy']} ({where}) x peer's best >= {TARGET_X:g}"] = {
                "value": r["x_best_peer"],
                "target": TARGET_X,
            }
        ours = [r["rss_mb"] for r in s.get("rows", []) if r["side"] == "ours"]
        if ours:
            res[f"side-by-side peak RSS of ours ({where}) MB <= {TARGET_RSS_MB:g}"] = {
                "value": max(ours),
                "target": TARGET_RSS_MB,
                "lower_is_better": True,
            }
    return res


def render(sbs: dict[str, Any]) -> list[str]:
    """The BENCHMARKS.md section."""
    if "skipped" in sbs:
        return [
            "## Side by side with Alibaba's PAI simulator",
            "",
            f"Skipped: {sbs['skipped']}.",
            "",
        ]
    commit = (sbs.get("peer_commit") or "?")[:10]
    lines = [
        "## Side by side with Alibaba's PAI simulator",
        "",
        f"`side_by_side.sh`: one synthetic {sbs.get('jobs', 0):,}-job PAI trace, "
        f"{sbs.get('gpus', 0):,} GPUs; the peer is alibaba/clusterdata@{commit} "
        "`cluster-trace-gpu-v2020/simulator` (one node of that many GPUs), ours is `gsg evaluate` "
        "on the same jobs in PAI task-table format and PAI's machine mix scaled to that many "
        "GPUs. Whole process each (`/usr/bin/time -v`: interpreter, imports, trace loading "
        "included), runs alternating peer and ours; x = the peer's best wall time over its "
        "policies / ours (> 1: ours faster); x CPU: the same with CPU seconds (user + system:"
        " less sensitive to other load on a shared machine).",
        "",
        "| arrivals | side | policy | wall s (runs) | best s | CPU s | peak MB | in-process s "
        "| x peer's best | x CPU |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for rate, s in sbs.get("settings", {}).items():
        where = "trace's own" if rate == "-1" else f"{rate} jobs/min"
        if "error" in s:
            lines.append(f"| {where} | – | – | error: {s['error']} | | | | | | |")
            continue
        for r in s["rows"]:
            lines.append(
                f"| {where} | {r['side']} | {r['policy']} | "
                f"{' / '.join(f'{w:.1f}' for w in r['walls'])} | {r['best_s']:.1f} | "
                f"{r['best_cpu_s']:.1f} | {r['rss_mb']:.0f} | {r.get('in_proc_s', '–')} | "
                f"{r.get('x_best_peer', '–')} | {r.get('x_best_peer_cpu', '–')} |"
            )
    lines.append("")
    return lines
