"""Leaderboard suites (configs/leaderboards/): every shipped suite loads and names only known
scenarios and policies; bad suites are one-line errors; flags override a suite."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_sharing_env.config import ConfigError, load_scenario
from gpu_sharing_gym.commands import leaderboard as lb
from gpu_sharing_gym.suites import load_suite, suite_names


@pytest.mark.parametrize("name", suite_names())
def test_shipped_suite_names_known_scenarios_and_policies(name: str) -> None:
    suite = load_suite(name)
    assert suite.description
    for s in suite.scenarios:
        load_scenario(s)
    assert lb.parse_policies(",".join(suite.policies))


def test_suites_ship_demo_and_standard() -> None:
    assert {"demo", "standard", "heldout"} <= set(suite_names())


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("scenarios: []\n", "scenarios: must be a non-empty list"),
        ("scenarios: [default]\nseeds: 0\n", "seeds: must be >= 1"),
        ("scenarios: [default]\nseed: 3\n", "seed: unknown key"),
        ("policies: [all]\n", "scenarios: required"),
        ("scenarios: [default]\nseeds: 2\nseed_list: [1]\n", "not both"),
    ],
)
def test_bad_suite_is_one_line_naming_file_and_key(tmp_path: Path, text: str, needle: str) -> None:
    p = tmp_path / "bad.yaml"
    p.write_text(text)
    with pytest.raises(ConfigError) as e:
        load_suite(str(p))
    msg = str(e.value)
    assert "\n" not in msg and str(p) in msg and needle in msg, msg


def test_unknown_suite_lists_the_known_ones(capsys: pytest.CaptureFixture[str]) -> None:
    assert lb.main(["--suite", "nope", "--out", "unused"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "'nope'" in err and "standard" in err


def test_flags_override_the_suite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "lb"
    code = lb.main(["--suite", "demo", "--policies", "first_fit", "--seed-list", "4",
                    "--workers", "1", "--quiet", "--out", str(out)])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    rows = (out / "leaderboard.csv").read_text().splitlines()[1:]
    assert len(rows) == 1 and rows[0].startswith("first_fit,default,4,")
