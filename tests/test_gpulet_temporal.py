"""Temporal sharing inside an MPS partition (GPULet's gpulets, ``sharing.gpulets``, opt-in):
which placements are legal, the residents' rates (the time-sharing model on the partition's
capacity) and the invariant that a partition's time slices sum to at most 1."""

from __future__ import annotations

import random

import pytest

from gpu_sharing_env.config import SharingConfig
from gpu_sharing_env.fleet.cluster import Cluster
from gpu_sharing_env.physics.interference import AnalyticSpeedModel, Resident
from gpu_sharing_env.physics.modes import SharingMode
from gpu_sharing_env.sim.build import make_simulator
from gpu_sharing_env.sim.engine import Decision, Simulator
from gpu_sharing_gym.baselines.gpulet import GPULet
from gpu_sharing_gym.fidelity.common import episode, scenario
from tests.helpers import job, nodes
from tests.helpers import scenario as base_scenario
from tests.test_baselines_muxflow import run_policy, svc

V100 = "V100-16GB"
PCTS = [20, 40, 50, 60, 80, 100]


def cluster(gpulets: int = 2, modes: tuple[str, ...] = ("exclusive", "time_sharing", "mps")):
    sharing = SharingConfig(modes=modes, mps_sm_pcts=tuple(PCTS), gpulets=gpulets)  # type: ignore[arg-type]
    return Cluster(nodes(gpus=2), sharing)


def opt(c: Cluster, label: str) -> int:
    return [o.label for o in c.options].index(label)


def place(c: Cluster, spec, gpu: int, label: str) -> None:
    assert c.check(spec, gpu, opt(c, label)) is None, c.check(spec, gpu, opt(c, label))
    c.add(spec, gpu, c.options[opt(c, label)])
    c.check_invariants()


# ------------------------------------------------------------------ legality
def test_join_options_are_opt_in_and_need_mps() -> None:
    assert not any(o.gpulet for o in cluster(gpulets=0).options)
    assert not any(o.gpulet for o in cluster(modes=("exclusive", "time_sharing")).options)
    labels = [o.label for o in cluster().options]
    assert labels[-2:] == ["gpulet1", "gpulet2"]  # after the MPS percentages, grouped by mode


def test_join_needs_an_existing_partition_and_a_gpu_splits_in_at_most_two() -> None:
    c = cluster()
    a, b, d, e = (job(i, 1e4, mem_gb=2.0) for i in range(4))
    assert "no gpulet 1" in (c.check(a, 0, opt(c, "gpulet1")) or "")
    place(c, a, 0, "mps20")
    assert c.check(b, 0, opt(c, "gpulet2")) is not None  # only one partition so far
    place(c, b, 0, "gpulet1")  # time-shares a's 20 % partition: no SM share of its own
    assert c.sm_used[0] == 20 and c.n_parts[0] == 1
    place(c, d, 0, "mps20")  # the second gpulet
    # 40 % of the SMs are used, but the GPU holds its two gpulets: no third partition
    why = c.check(e, 0, opt(c, "mps20"))
    assert why is not None and "2 gpulets" in why
    place(c, e, 0, "gpulet2")
    assert c.gpulet_of(0) == {0: (0, 20), 1: (0, 20), 2: (1, 20), 3: (1, 20)}


def test_join_counts_memory_and_the_resident_limit() -> None:
    c = cluster()
    place(c, job(0, 1e4, mem_gb=7.0), 0, "mps50")
    place(c, job(1, 1e4, mem_gb=7.0), 0, "gpulet1")
    why = c.check(job(2, 1e4, mem_gb=4.0), 0, opt(c, "gpulet1"))  # 14 + 4 > 16 GB
    assert why is not None and "GB" in why
    assert c.check(job(3, 1e4, mem_gb=2.0), 0, opt(c, "gpulet1")) is None
    place(c, job(3, 1e4, mem_gb=0.5), 0, "gpulet1")
    place(c, job(4, 1e4, mem_gb=0.5), 0, "gpulet1")  # 4 residents: the scenario's maximum
    assert c.check(job(5, 1e4, mem_gb=0.1), 0, opt(c, "gpulet1")) is not None


def test_no_join_outside_mps_or_for_a_gang() -> None:
    c = cluster()
    place(c, job(0, 1e4), 0, "ts")
    assert c.check(job(1, 1e4), 0, opt(c, "gpulet1")) is not None  # time-sharing GPU
    gang = job(2, 1e4, num_gpus=2)
    assert not c.placement_mask(gang)[:, opt(c, "gpulet1")].any()
    assert not c.placement_mask(gang)[:, opt(c, "gpulet2")].any()


def test_a_partition_lives_while_it_has_a_resident() -> None:
    c = cluster()
    a, b, d = job(0, 1e4), job(1, 1e4), job(2, 1e4)
    place(c, a, 0, "mps40")
    place(c, b, 0, "gpulet1")
    place(c, d, 0, "mps60")
    c.remove(a, 0, c.options[opt(c, "mps40")])  # the opener leaves, b keeps the partition
    c.check_invariants()
    assert c.sm_used[0] == 100 and c.gpulet_of(0) == {1: (0, 40), 2: (1, 60)}
    c.remove(b, 0, c.options[opt(c, "gpulet1")])  # now it is freed, with its SM share
    c.check_invariants()
    assert c.sm_used[0] == 60 and c.gpulet_of(0) == {2: (0, 60)}
    assert c.placement_mask(job(3, 1e4))[0, opt(c, "mps40")]


# ------------------------------------------------------------------ rates
def test_partition_mates_share_the_partition_by_the_time_sharing_model() -> None:
    sp = AnalyticSpeedModel()
    x = Resident("resnet50", 0.5, duty=0.3, online=True, batch=4, gpulet=0)
    y = Resident("bert", 0.5, duty=0.2, online=True, batch=2, gpulet=0)
    z = Resident("vgg16", 0.5, duty=0.6, gpulet=1)
    rates = sp.rates(V100, SharingMode.MPS, [x, y, z])
    plain = [
        Resident(r.model, r.sm_frac, duty=r.duty, online=r.online, batch=r.batch) for r in (x, y, z)
    ]
    # the space part: each as its partition's only client beside the other partition
    a_x = sp.rates(V100, SharingMode.MPS, [plain[0], plain[2]])[0]
    a_y = sp.rates(V100, SharingMode.MPS, [plain[1], plain[2]])[0]
    # the time part: the time-sharing formula at the residents' occupancies of the partition
    occ = [AnalyticSpeedModel.gpulet_occupancy(x, a_x), AnalyticSpeedModel.gpulet_occupancy(y, a_y)]
    assert occ == [pytest.approx(0.3 / a_x), pytest.approx(0.2 / a_y)]
    ts = sp.rates(
        V100,
        SharingMode.TIME_SHARING,
        [Resident(x.model, duty=occ[0], online=True), Resident(y.model, duty=occ[1], online=True)],
    )
    assert rates[0] == a_x * ts[0] and rates[1] == a_y * ts[1]
    # z is alone in its partition: the plain MPS rate beside x and y (their kernels, in time)
    assert rates[2] == sp.rates(V100, SharingMode.MPS, [plain[2], plain[0], plain[1]])[0]
    assert rates[0] < a_x and rates[1] < a_y


def test_two_saturating_jobs_halve_their_partition() -> None:
    sp = AnalyticSpeedModel()
    p = Resident("resnet50", 0.4, duty=1.0, gpulet=0)
    alone = sp.rates(V100, SharingMode.MPS, [Resident("resnet50", 0.4, duty=1.0)])[0]
    both = sp.rates(V100, SharingMode.MPS, [p, p])
    keep = 1.0 - sp.context_switch_overhead
    assert both == [pytest.approx(alone * keep / 2.0)] * 2


def test_without_shared_partitions_the_mps_model_is_unchanged() -> None:
    sp = AnalyticSpeedModel()
    res = [
        Resident("resnet50", 0.4, duty=0.5, gpulet=0),
        Resident("bert", 0.6, duty=0.7, online=True, batch=8, gpulet=1),
    ]
    plain = [Resident(r.model, r.sm_frac, duty=r.duty, online=r.online, batch=r.batch) for r in res]
    assert sp.rates(V100, SharingMode.MPS, res) == sp.rates(V100, SharingMode.MPS, plain)
    assert sp.latency_terms(V100, SharingMode.MPS, res) == sp.latency_terms(
        V100, SharingMode.MPS, plain
    )


def test_simulator_rates_follow_the_speed_model_with_partitions() -> None:
    jobs = [
        svc(0, "resnet50", 200.0, slo_ms=60.0, life_s=3600.0),
        svc(1, "ncf", 100.0, slo_ms=20.0, life_s=3600.0),
        svc(2, "bert", 50.0, slo_ms=150.0, life_s=3600.0),
    ]
    cfg = base_scenario(sharing={"mps_start_s": 0.0, "mps_sm_pcts": PCTS, "gpulets": 2})
    sim = Simulator(cfg, nodes(gpus=1), lambda rng: list(jobs))
    sim.reset(0)
    while not sim.needs_decision():
        sim.advance()
    label = [o.label for o in sim.options]
    for j, lab in ((0, "mps50"), (1, "gpulet1"), (2, "mps50")):
        sim.apply(Decision(j, 0, label.index(lab)))
    sim.cluster.check_invariants()
    res = [sim.jobs[j] for j in sim.cluster.residents[0]]
    expect = sim.speed.rates(
        V100,
        SharingMode.MPS,
        [
            Resident(
                r.spec.model,
                0.5,
                duty=r.serving.duty,
                online=True,
                batch=r.effective_batch_size,
                gpulet=k,
            )
            for r, k in zip(res, (0, 0, 1), strict=True)
        ],
    )
    assert [r.frac[0] for r in res] == expect


# ------------------------------------------------------------------ invariant
def test_time_slices_of_a_partition_sum_to_at_most_one() -> None:
    sp = AnalyticSpeedModel()
    rng = random.Random(7)
    models = ["resnet50", "bert", "ncf", "vgg16"]
    for _ in range(300):
        n = rng.randint(1, 4)
        res = []
        for _ in range(n):
            online = rng.random() < 0.6
            res.append(
                Resident(
                    rng.choice(models),
                    rng.choice(PCTS) / 100.0,
                    duty=rng.random(),
                    online=online,
                    batch=rng.choice([1, 4, 16]) if online else 0,
                    gpulet=rng.randint(0, 1),
                )
            )
        slices = sp.gpulet_slices(V100, res)
        for group in sp.gpulet_groups(res):
            assert sum(slices[i] for i in group) <= 1.0 + 1e-12
        assert all(0.0 <= s <= 1.0 for s in slices)


def test_gpulet_plans_keep_the_invariants_and_are_deterministic() -> None:
    cfg = scenario(
        "gpulet", horizon_h=2.0, **{"sharing.gpulets": 2, "workload.online.num_services": 24}
    )
    sim = make_simulator(cfg)
    seen: list[int] = []

    def check(view, d) -> None:
        seen.append(d.option)

    run_policy(GPULet(), sim, on_decision=check)
    c = sim.cluster
    c.check_invariants()
    assert any(c.options[o].gpulet for o in seen)  # it does share partitions in time
    for g in range(c.n_gpus):
        assert c.n_parts[g] <= 2
        if c.mode[g] == SharingMode.MPS and c.n_res[g]:
            where = c.gpulet_of(g)
            res = [sim.jobs[j] for j in c.residents[g]]
            slices = sim.speed.gpulet_slices(
                V100,
                [
                    Resident(
                        r.spec.model,
                        where[r.spec.job_id][1] / 100.0,
                        duty=r.serving.duty,
                        online=r.online,
                        batch=r.effective_batch_size,
                        gpulet=where[r.spec.job_id][0],
                    )
                    for r in res
                ],
            )
            for k in range(c.n_parts[g]):
                assert sum(s for r, s in zip(res, slices) if where[r.spec.job_id][0] == k) <= 1.0
    a = episode(GPULet(), cfg, 3)
    b = episode(GPULet(), cfg, 3)
    assert a == b  # same seed, same episode, bit for bit
