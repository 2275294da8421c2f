"""Why spatio-temporal gpulets serve less than whole GPUs in time in ``gsg reproduce
--experiment gpulet`` (issue 52).

Prints, for GLET's ``scen3`` mix on the experiment's GPU (``fidelity/gpulet.yaml``):

* the saturating throughput of one gpulet per partition size (req/s within the SLO, the
  planner's estimate, ``Profile.saturate``) and what two gpulets of a split GPU serve together
  over one whole GPU (the most spatial partitioning can gain before interference);
* per scheme, the peak rate each model is planned at (``feasible``) and whether the simulator
  serves that plan within the SLO target on ``--seeds`` seeds (``served``), with the gpulets of
  the plan; the schemes are the experiment's three and two what-ifs: GLET's ``gpulet-noint``
  (its planner without the interference between a GPU's gpulets) and spatio-temporal with a
  saturated gpulet allowed to be a whole GPU (``Scheme.whole``).

    .venv/bin/python scripts/gpulet_probe.py --seeds 3
"""

from __future__ import annotations

import argparse
from dataclasses import replace

from gpu_sharing_gym.fidelity.common import scenario
from gpu_sharing_gym.fidelity.gpulet import (
    SCEN3,
    SCHEMES,
    ST_PARTS,
    Plan,
    Profile,
    Scheme,
    arm_cfg,
    feasible,
    plan,
    served,
)

#: The experiment's schemes and the what-ifs (label -> (scheme, the scenario's scheme)).
WHAT_IFS: dict[str, tuple[Scheme, str]] = {
    **{k: (v, k) for k, v in SCHEMES.items()},
    "st_noint": (replace(SCHEMES["spatio_temporal"], interference=False), "spatio_temporal"),
    "st_whole": (replace(SCHEMES["spatio_temporal"], whole=True), "spatio_temporal"),
}


def saturation(prof: Profile) -> dict[str, dict[int, float]]:
    """Per model of the mix, the saturating throughput of one gpulet per partition size."""
    return {m: {p: prof.saturate(m, slo, p) for p in sorted(ST_PARTS)} for m, slo in SCEN3}


def describe(p: Plan) -> str:
    rows = [f"gpu{g}/{pct}%: {m.model} {m.rps:.0f} req/s b{m.batch}" for g, _, pct, m in p.shares()]
    return "; ".join(rows)


def probe(label: str, seeds: list[int], quick: bool = False) -> dict[str, object]:
    """The peak rate per model a scheme plans and the SLO attainment of that plan per seed."""
    scheme, arm = WHAT_IFS[label]
    cfg = arm_cfg(arm, quick)
    prof = Profile(cfg)
    rates = feasible(prof, scheme, SCEN3)
    top = rates[0] if rates else 0
    best = plan(prof, scheme, SCEN3, top) if top else None
    att = [served(cfg, best, s) for s in seeds]
    return {"rate": top, "attainment": att, "plan": describe(best) if best else "-"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="serve each plan half an hour")
    args = ap.parse_args()
    seeds = list(range(args.seeds))
    prof = Profile(arm_cfg("spatio_temporal", args.quick))
    target = scenario("gpulet").slo_target
    print("saturating throughput of one gpulet, req/s (two halves over one whole GPU):")
    for model, trp in saturation(prof).items():
        pairs = {p: (trp[p] + trp[100 - p]) / trp[100] for p in (50, 60, 80)}
        cells = ", ".join(f"{p}%: {v:.0f}" for p, v in trp.items())
        gains = ", ".join(f"{p}/{100 - p}: {g:.2f}x" for p, g in pairs.items())
        print(f"  {model}: {cells}  ({gains})")
    print(f"peak rate per model (x{len(SCEN3)} = peak throughput), served >= {target}:")
    for label in WHAT_IFS:
        row = probe(label, seeds, args.quick)
        att = row["attainment"]
        assert isinstance(att, list)
        ok = sum(a >= target for a in att)
        low = min(att) if att else float("nan")
        print(f"  {label}: {row['rate']} req/s, served on {ok}/{len(att)} seeds (min {low:.4f})")
        print(f"    {row['plan']}")


if __name__ == "__main__":
    main()
