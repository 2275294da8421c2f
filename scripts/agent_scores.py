"""One policy against every other on a leaderboard's output: its rank and, per scenario, the
paired difference to the best other policy that meets the SLO target (the model card's table).

    python scripts/agent_scores.py runs/standard --policy ppo
    python scripts/agent_scores.py runs/lb-a runs/lb-b --policy ppo --markdown

Reads each directory's ``leaderboard.csv`` (``gsg leaderboard``'s cells: one row per policy,
scenario and seed) and ``summary.csv`` (its ranks). Per scenario it prints the policy's mean
``jct_mean_s`` and ``slo_attainment``, its rank among the policies run there, the best *other*
policy meeting the scenario's SLO target (the leaderboard's rule), and the mean paired
difference of ``jct_mean_s`` to it over the seeds both ran, with its 95 % CI (Student t,
n - 1 dof: :func:`gpu_sharing_gym.ci.mean_ci95`) and the count of seeds where the policy is
better. Only cells with status ``ok`` count.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from gpu_sharing_gym.ci import fmt_num, mean_ci95


def scores(out_dirs: list[Path], policy: str) -> pd.DataFrame:
    """One row per scenario where ``policy`` ran (module doc)."""
    rows = []
    for d in out_dirs:
        try:
            cells = pd.read_csv(d / "leaderboard.csv")
            summary = pd.read_csv(d / "summary.csv")
        except (OSError, pd.errors.ParserError) as e:
            raise SystemExit(f"agent_scores: {d}: {e}") from None
        cells = cells[cells["status"] == "ok"]
        for scen, summ in summary.groupby("scenario", sort=False):
            mine = summ[summ["policy"] == policy]
            if mine.empty:
                continue
            me = mine.iloc[0]
            others = summ[(summ["policy"] != policy) & summ["meets_slo"].astype(bool)]
            row = {
                "scenario": scen,
                "seeds": int(me["n"]),
                "policies": len(summ),
                "jct_mean_s": float(me["jct_mean_s_mean"]),
                "slo": float(me["slo_attainment_mean"]),
                "slo_target": float(me["slo_target"]),
                "rank": int(me["rank"]),
                "best_other": None,
            }
            if not others.empty:
                best = others.sort_values("jct_mean_s_mean").iloc[0]
                c = cells[cells["scenario"] == scen]
                a = c[c["policy"] == policy].set_index("seed")["jct_mean_s"]
                b = c[c["policy"] == best["policy"]].set_index("seed")["jct_mean_s"]
                diff = (a - b).dropna()
                mean, half, n = mean_ci95(diff.tolist())
                row.update(
                    best_other=str(best["policy"]),
                    best_jct=float(best["jct_mean_s_mean"]),
                    diff=mean,
                    diff_ci=half,
                    diff_pct=100.0 * mean / float(b.loc[diff.index].mean()),
                    better=int((diff < 0).sum()),
                    paired_n=n,
                )
            rows.append(row)
    return pd.DataFrame(rows)


def markdown(df: pd.DataFrame, policy: str) -> str:
    head = (
        f"| scenario | seeds | {policy}: JCT (s) | SLO (target) | rank | best other meeting the SLO "
        f"| its JCT (s) | paired difference (s) | % | seeds better |\n"
        "|---|---:|---:|---:|---:|---|---:|---:|---:|---:|\n"
    )
    lines = []
    for r in df.to_dict("records"):
        other = r.get("best_other")
        tail = (
            f"{other} | {fmt_num(r['best_jct'])} | {r['diff']:+,.0f} ± {r['diff_ci']:,.0f} | "
            f"{r['diff_pct']:+.1f} % | {r['better']}/{r['paired_n']}"
            if other
            else "– | – | – | – | –"
        )
        lines.append(
            f"| `{r['scenario']}` | {r['seeds']} | {fmt_num(r['jct_mean_s'])} | "
            f"{r['slo']:.3f} ({r['slo_target']:g}) | {r['rank']} of {r['policies']} | {tail} |"
        )
    return head + "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dirs", nargs="+", type=Path, help="gsg leaderboard --out directories")
    ap.add_argument("--policy", required=True, help="the policy's name as in leaderboard.csv")
    args = ap.parse_args(argv)
    df = scores(args.out_dirs, args.policy)
    if df.empty:
        print(f"agent_scores: {args.policy!r} is in none of the leaderboards", file=sys.stderr)
        return 2
    print(markdown(df, args.policy), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
