"""Scenario loading: validation errors are one line naming file, key and rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_sharing_env.config import ConfigError, load_scenario, scenario_names


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "s.yaml"
    p.write_text(text)
    return p


BASE = "cluster:\n  nodes:\n    - {gpu_type: T4, count: 1, gpus_per_node: 2}\n"


def test_shipped_scenarios_load():
    names = scenario_names()
    assert "default" in names
    for n in names:
        assert load_scenario(n).name == n


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        (BASE + "horizon: 3\n", r"s\.yaml: horizon: unknown key \(allowed: .*horizon_h"),
        (BASE + "horizon_h: -1\n", r"s\.yaml: horizon_h: must be > 0 \(got -1\)"),
        (BASE + "slo_target: 1.5\n", r"s\.yaml: slo_target: must be in \[0, 1\]"),
        (BASE + "sharing: {mps_sm_pcts: [50, 120]}\n", r"sharing\.mps_sm_pcts: non-empty, each"),
        (BASE + "sharing: {modes: [exclusive, magic]}\n", r"sharing\.modes\[1\]: must be one of"),
        (BASE + "faults: {rate_per_gpu_h: {cosmic: 1.0}}\n", r"faults\.rate_per_gpu_h: keys among"),
        (BASE + "faults: {mixed_handling: maybe}\n", r"faults\.mixed_handling: must be true or"),
        (
            "cluster:\n  nodes:\n    - {count: 1}\n",
            r"cluster\.nodes\[0\]\.gpu_type: required key is missing",
        ),
        (BASE + "horizon_h: [1\n", r"s\.yaml: line \d+: invalid YAML"),
        ("- a\n- b\n", r"s\.yaml: <top>: must be a mapping"),
    ],
)
def test_bad_scenarios_name_file_key_rule(tmp_path, text, pattern):
    with pytest.raises(ConfigError, match=pattern) as e:
        load_scenario(_write(tmp_path, text))
    assert "\n" not in str(e.value)


def test_unknown_scenario_lists_known():
    with pytest.raises(ConfigError, match=r"scenario 'nope': not found \(known: .*default"):
        load_scenario("nope")
