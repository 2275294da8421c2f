"""Does the training reward rank policies as the leaderboard does? (``agents/reward_ranking.py``)

    python scripts/reward_ranking.py --scenario default --policy speed_sjf,gandiva,runs/x/best_model.zip
    python scripts/reward_ranking.py --policy speed_sjf,time_sharing --seeds 40 --slo-weight 100,50 \
        --json out.json

Runs each policy over the first N seeds of the training pool (``--seed-set pool``, the episodes
an agent trained with ``train_seed_pool: 512`` sees; the default) or over the evaluation seeds
0..N-1 (``--seed-set eval``), and prints, per policy, the leaderboard's view (mean JCT, mean SLO
attainment, episodes below the target, rank) beside the ``jct`` reward's mean episode return and
rank at each SLO weight λ. ``--json`` writes one record per episode. Exit status 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

from gpu_sharing_env.config import ConfigError, load_scenario
from gpu_sharing_env.registry import UnknownPolicyError
from gpu_sharing_gym.agents.reward_ranking import (
    DEFAULT_SLO_WEIGHTS,
    episode_returns,
    pool_seeds,
    rank_table,
)


def _weights(text: str) -> list[float]:
    try:
        ws = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma list of numbers: {text!r}") from None
    if not ws or any(not w >= 0 for w in ws):
        raise argparse.ArgumentTypeError(f"need one or more weights >= 0 (got {text!r})")
    return ws


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenario", default="default", help="scenario name or YAML path")
    ap.add_argument("--policy", required=True, help="comma list of policies or checkpoint paths")
    ap.add_argument("--seeds", type=int, default=40, help="how many seeds (default 40)")
    ap.add_argument("--seed-set", choices=("pool", "eval"), default="pool")
    ap.add_argument(
        "--slo-weight",
        type=_weights,
        default=list(DEFAULT_SLO_WEIGHTS),
        help="comma list of λ (default 100,50,25)",
    )
    ap.add_argument("--json", type=Path, default=None, help="write one record per episode here")
    args = ap.parse_args(argv)
    policies = [p.strip() for p in args.policy.split(",") if p.strip()]
    try:
        scenario = load_scenario(args.scenario)
        seeds = pool_seeds(args.seeds) if args.seed_set == "pool" else list(range(args.seeds))
        if not seeds:
            raise ValueError(f"--seeds: must be >= 1 (got {args.seeds})")
        returns = episode_returns(policies, scenario, seeds, args.slo_weight)
    except (ConfigError, UnknownPolicyError, ValueError, OSError) as e:
        print(f"reward_ranking: {e}", file=sys.stderr)
        return 2
    table = rank_table(returns, scenario.slo_target)
    with pd.option_context("display.width", 200, "display.max_columns", 50):
        print(table.to_string(index=False, float_format=lambda x: f"{x:.4g}"))
    print(
        f"{scenario.name}: SLO target {scenario.slo_target}; {len(seeds)} {args.seed_set} seeds;"
        " return = the jct reward's episode return (minus mean hours in system, minus λ x the"
        " episode's SLO shortfall)"
    )
    if args.json is not None:
        args.json.write_text(json.dumps(returns.to_dict(orient="records"), indent=1))
        print(f"wrote {len(returns)} records to {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
