"""Tests for the GPU catalogue and MIG geometry (``gpu_sharing_env.physics.hardware``)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_sharing_env.physics.hardware import (
    GPU_ALIASES,
    GPU_TYPE_NAMES,
    GPU_TYPES,
    MIG_COMPUTE_SLICES,
    GpuType,
    UnknownGpuTypeError,
    UnknownMigProfileError,
    enumerate_max_layouts,
    get_gpu_type,
    mig_creatable,
    mig_creatable_table,
    mig_free_starts,
    mig_layout_legal,
    mig_occupancy,
)

A100 = GPU_TYPES["A100-40GB"]
MIG_GPUS = [g for g in GPU_TYPES.values() if g.supports_mig]
# The five A100-40GB profiles of NVIDIA's "MIG Profiles on A100" figure (1g.10gb came later, R470).
A100_FIGURE_PROFILES = ["1g.5gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"]


def test_catalogue_matches_node_names() -> None:
    assert tuple(GPU_TYPES) == GPU_TYPE_NAMES
    assert {g.name for g in MIG_GPUS} == {"A100-40GB", "A100-80GB", "H100-80GB"}
    for g in GPU_TYPES.values():
        assert g.arch in {"pascal", "volta", "turing", "ampere", "hopper"}
        assert min(g.sms, g.mem_gb, g.mem_bw_gbps, g.fp32_tflops, g.tdp_w) > 0


def test_mps_capabilities() -> None:
    p100 = get_gpu_type("P100")
    assert p100.mps_sm_limit is False and p100.mps_max_clients == 16
    for name in GPU_TYPE_NAMES:
        if name != "P100":
            assert GPU_TYPES[name].mps_sm_limit and GPU_TYPES[name].mps_max_clients == 48


def test_a100_profile_table() -> None:
    got = {
        p.name: (p.profile_id, p.compute_slices, p.mem_slices, p.sms, p.starts)
        for p in A100.mig_profiles
    }
    assert got == {
        "1g.5gb": (19, 1, 1, 14, (0, 1, 2, 3, 4, 5, 6)),
        "1g.10gb": (15, 1, 2, 14, (0, 2, 4, 6)),
        "2g.10gb": (14, 2, 2, 28, (0, 2, 4)),
        "3g.20gb": (9, 3, 4, 42, (0, 4)),
        "4g.20gb": (5, 4, 4, 56, (0,)),
        "7g.40gb": (0, 7, 8, 98, (0,)),
    }
    assert A100.mig_profile("7g.40gb").sms == 7 * 14 < A100.sms
    assert [p.name for p in GPU_TYPES["A100-80GB"].mig_profiles] == [
        "1g.10gb",
        "1g.20gb",
        "2g.20gb",
        "3g.40gb",
        "4g.40gb",
        "7g.80gb",
    ]
    h100 = GPU_TYPES["H100-80GB"]
    assert [p.name for p in h100.mig_profiles] == [
        p.name for p in GPU_TYPES["A100-80GB"].mig_profiles
    ]
    assert h100.mig_profile("7g.80gb").sms <= h100.sms
    assert A100.mig_profile("3g.20gb").slice_mask(4) == 0b11110000
    with pytest.raises(ValueError):
        A100.mig_profile("2g.10gb").slice_mask(1)


def test_max_instances_implied_by_geometry() -> None:
    # mig_free_starts / mig_creatable ignore instance counts; exact only if this holds.
    for g in MIG_GPUS:
        for p in g.mig_profiles:
            masks = [p.slice_mask(s) for s in p.starts]
            most = max(
                k
                for k in range(len(masks) + 1)
                for combo in itertools.combinations(masks, k)
                if sum(combo) == _or(combo) and k * p.compute_slices <= MIG_COMPUTE_SLICES
            )
            assert most == p.max_instances, (g.name, p.name)


def _or(masks: tuple[int, ...]) -> int:
    out = 0
    for m in masks:
        out |= m
    return out


@pytest.mark.parametrize(
    ("layout", "legal"),
    [
        ([("4g.20gb", 0), ("3g.20gb", 4)], True),
        ([("3g.20gb", 0), ("3g.20gb", 4)], True),
        ([("7g.40gb", 0)], True),
        ([], True),
        ([("1g.5gb", s) for s in range(7)], True),
        ([("2g.10gb", 0), ("2g.10gb", 2), ("2g.10gb", 4), ("1g.5gb", 6)], True),
        ([("3g.20gb", 4), ("1g.5gb", 0), ("1g.5gb", 1), ("2g.10gb", 2)], True),  # guide example 2
        ([("1g.10gb", 6), ("3g.20gb", 0), ("2g.10gb", 4)], True),
        ([("4g.20gb", 0), ("4g.20gb", 4)], False),  # bad start and overlap
        ([("2g.10gb", 1)], False),  # bad start
        ([("1g.5gb", 7)], False),  # bad start
        ([("1g.5gb", s) for s in range(7)] + [("1g.5gb", 0)], False),  # 8 x 1g.5gb
        ([("3g.20gb", 0), ("1g.5gb", 3)], False),  # overlap
        ([("7g.40gb", 0), ("1g.5gb", 0)], False),
        ([("1g.5gb", 0), ("2g.20gb", 2)], False),  # not an A100-40GB profile
    ],
)
def test_a100_hand_checked_layouts(layout: list[tuple[str, int]], legal: bool) -> None:
    assert mig_layout_legal(A100, layout) is legal


def test_no_mig_on_non_mig_gpus() -> None:
    for name in ("T4", "P100", "V100-16GB", "V100-32GB", "A10"):
        g = GPU_TYPES[name]
        assert not g.supports_mig
        assert not mig_layout_legal(g, [("1g.5gb", 0)])
        assert not mig_layout_legal(g, [])
        assert mig_creatable(g, 0, 0) == ()
        assert enumerate_max_layouts(g) == []
        with pytest.raises(UnknownMigProfileError, match="no MIG support"):
            g.mig_profile("1g.5gb")


def test_compute_budget_counts() -> None:
    # 3g.20gb at 0 holds memory 0-3; with 7 compute slices already claimed nothing fits.
    assert mig_free_starts(A100, 0b00001111, 3, "3g.20gb") == (4,)
    assert mig_free_starts(A100, 0b00001111, 5, "3g.20gb") == ()
    assert mig_free_starts(A100, 0, 0, "1g.10gb") == (0, 2, 4, 6)
    with pytest.raises(ValueError):
        mig_free_starts(A100, 256, 0, "1g.5gb")
    with pytest.raises(ValueError):
        mig_creatable(A100, 0, 8)


def test_a100_maximal_layout_count() -> None:
    # NVIDIA's "MIG Profiles on A100" figure (MIG User Guide, Concepts) is built from the five
    # original profiles; our rules give 19 maximal layouts for them (18 under pre-R510 drivers,
    # which refused 4g + 3g). With 1g.10gb included, 78 (pinned here; not an NVIDIA figure).
    figure = enumerate_max_layouts(A100, A100_FIGURE_PROFILES)
    assert len(figure) == 19
    assert ((("4g.20gb", 0), ("3g.20gb", 4))) in figure
    assert len([lay for lay in figure if {"4g.20gb", "3g.20gb"} <= {n for n, _ in lay}]) == 1
    assert len(enumerate_max_layouts(A100)) == 78
    assert enumerate_max_layouts(A100) == enumerate_max_layouts(A100)  # deterministic


@pytest.mark.parametrize("gpu", MIG_GPUS, ids=lambda g: g.name)
def test_maximal_layouts_are_legal_and_full(gpu: GpuType) -> None:
    layouts = enumerate_max_layouts(gpu)
    assert len(layouts) == 78 and len(set(layouts)) == 78
    for lay in layouts:
        assert mig_layout_legal(gpu, lay)
        assert mig_creatable(gpu, *mig_occupancy(gpu, lay)) == ()


def _all_legal_layouts(gpu: GpuType) -> set[tuple[tuple[str, int], ...]]:
    out: set[tuple[tuple[str, int], ...]] = set()
    for lay in enumerate_max_layouts(gpu):
        for k in range(len(lay) + 1):
            out.update(itertools.combinations(lay, k))
    return out


@pytest.mark.parametrize("gpu", MIG_GPUS, ids=lambda g: g.name)
def test_fast_lookup_agrees_with_slow_rule(gpu: GpuType) -> None:
    table = mig_creatable_table(gpu)
    assert table.shape == (256, 8, len(gpu.mig_profiles)) and not table.flags.writeable
    for occ in range(256):
        for used in range(MIG_COMPUTE_SLICES + 1):
            slow = tuple(
                (p.name, s)
                for p in gpu.mig_profiles
                for s in mig_free_starts(gpu, occ, used, p.name)
            )
            assert mig_creatable(gpu, occ, used) == slow
            for i, p in enumerate(gpu.mig_profiles):
                assert table[occ, used, i] == any(n == p.name for n, _ in slow)
    # On every reachable state, the lookup is exactly "what mig_layout_legal would accept next".
    for lay in _all_legal_layouts(gpu):
        fast = set(mig_creatable(gpu, *mig_occupancy(gpu, lay)))
        every = {(p.name, s) for p in gpu.mig_profiles for s in p.starts}
        assert fast == {c for c in every if mig_layout_legal(gpu, [*lay, c])}


@settings(max_examples=150, deadline=None)
@given(gpu=st.sampled_from(MIG_GPUS), data=st.data())
def test_random_create_destroy_stays_legal(gpu: GpuType, data: st.DataObject) -> None:
    layout: list[tuple[str, int]] = []
    for _ in range(data.draw(st.integers(1, 25), label="steps")):
        occ, used = mig_occupancy(gpu, layout)
        if layout and data.draw(st.booleans(), label="destroy"):
            layout.pop(data.draw(st.integers(0, len(layout) - 1), label="victim"))
            continue
        prof = data.draw(st.sampled_from(gpu.mig_profiles), label="profile")
        starts = mig_free_starts(gpu, occ, used, prof.name)
        if not starts:
            assert not any(mig_layout_legal(gpu, [*layout, (prof.name, s)]) for s in prof.starts)
            continue
        layout.append((prof.name, data.draw(st.sampled_from(starts), label="start")))
        assert mig_layout_legal(gpu, layout)


def test_aliases_resolve() -> None:
    expected = {
        "V100M16": "V100-16GB",
        "V100M32": "V100-32GB",
        "V100": "V100-16GB",
        "A100-SXM4-80GB": "A100-80GB",
        "A800-SXM4-80GB": "A100-80GB",
        "H800": "H100-80GB",
        "A100": "A100-40GB",
        "H100": "H100-80GB",
    }
    for alias, canonical in expected.items():
        assert get_gpu_type(alias).name == canonical
    for alias, canonical in GPU_ALIASES.items():
        assert canonical in GPU_TYPES and get_gpu_type(alias) is GPU_TYPES[canonical]
    for name in GPU_TYPE_NAMES:
        assert get_gpu_type(name) is GPU_TYPES[name]
    assert get_gpu_type("v100m32").name == "V100-32GB"
    assert get_gpu_type(" t4 ").name == "T4"


def test_unknown_names_raise_clear_errors() -> None:
    with pytest.raises(UnknownGpuTypeError) as err:
        get_gpu_type("K80")
    msg = str(err.value)
    assert isinstance(err.value, ValueError) and "\n" not in msg
    assert "'K80'" in msg and all(n in msg for n in GPU_TYPE_NAMES)
    with pytest.raises(UnknownMigProfileError) as kerr:
        A100.mig_profile("1g.5gb+me")
    assert isinstance(kerr.value, KeyError)
    assert "1g.5gb+me" in str(kerr.value) and "3g.20gb" in str(kerr.value)
