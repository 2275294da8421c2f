"""The HTML leaderboard report reads in a 1,100 px wide window without horizontal scrolling, in a
real headless browser (Debian's ``chromium``, driven by Playwright): the page does not overflow,
and every table and plot image fits. The screenshot is kept as a test artefact in
``runs/test-artifacts/report-1100px.png`` (and in the test's tmp directory).

``make test`` installs chromium (``make browser``) and, as root (CI), sets
``GSG_REQUIRE_BROWSER=1``, so there a missing browser fails the test; elsewhere (e.g. a developer
without root and without chromium) it is skipped, saying why. ``GSG_CHROMIUM=/path`` picks
another Chromium binary.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import tiny_scenario_yaml

ROOT = Path(__file__).resolve().parent.parent
ARTEFACT = ROOT / "runs" / "test-artifacts" / "report-1100px.png"
WIDTH = 1100

TINY = tiny_scenario_yaml(max_jobs=4, name="tiny_browser")

#: Flags that work headless as root, in a container, without a network.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
MEASURE = """() => {
  const box = (e) => { const r = e.getBoundingClientRect(); return [r.left, r.right]; };
  return {
    scrollWidth: document.documentElement.scrollWidth,
    innerWidth: window.innerWidth,
    tables: [...document.querySelectorAll("table")].map(box),
    images: [...document.images].map((i) => [...box(i), i.complete, i.naturalWidth, i.alt]),
  };
}"""


def _unavailable(reason: str) -> None:
    if os.environ.get("GSG_REQUIRE_BROWSER") == "1":
        pytest.fail(f"{reason} (GSG_REQUIRE_BROWSER=1: `make browser` should have installed it)")
    pytest.skip(reason)


def _chromium() -> str:
    override = os.environ.get("GSG_CHROMIUM")
    if override:
        return override
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    _unavailable("no chromium binary on PATH (as root: apt-get install -y chromium)")
    raise AssertionError("unreachable")


def _report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A small real report: `gsg leaderboard` on a tiny scenario, 3 policies × 2 seeds."""
    from gpu_sharing_gym.commands import leaderboard as cli
    from gpu_sharing_gym.leaderboard import write_outputs

    def no_tb(*args: Any, **kwargs: Any) -> Any:  # TensorBoard logs are not under test here
        return write_outputs(*args, **{**kwargs, "tensorboard": False})

    monkeypatch.setattr(cli, "write_outputs", no_tb)
    scen = tmp_path / "tiny_browser.yaml"
    scen.write_text(TINY)
    out = tmp_path / "report"
    argv = ["--scenarios", str(scen), "--policies", "first_fit,fifo_exclusive,time_sharing"]
    assert cli.main([*argv, "--seeds", "2", "--out", str(out), "--workers", "1", "--quiet"]) == 0
    return out / "index.html"


def test_report_reads_in_a_1100px_window(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    binary = _chromium()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("the playwright package is not installed (pip install -e '.[dev]')")
    page_path = _report(tmp_path, monkeypatch)
    shot = tmp_path / "report-1100px.png"
    with tempfile.TemporaryDirectory() as profile, sync_playwright() as pw:
        ctx = pw.chromium.launch_persistent_context(
            profile,  # a fresh user-data-dir
            executable_path=binary,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": WIDTH, "height": 900},
            timeout=120_000,
        )
        try:
            page = ctx.new_page()
            page.goto(page_path.as_uri(), wait_until="load", timeout=120_000)
            m = page.evaluate(MEASURE)
            page.screenshot(path=str(shot), full_page=True)
        finally:
            ctx.close()
    ARTEFACT.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(shot, ARTEFACT)

    assert m["innerWidth"] == WIDTH
    assert m["scrollWidth"] <= m["innerWidth"], f"page overflows sideways: {m}"
    assert len(m["tables"]) == 1
    for left, right in m["tables"]:
        assert left >= 0 and right <= WIDTH, f"table [{left}, {right}] wider than the window"
    assert len(m["images"]) == 4  # jct_cdf, latency_slo, utilization, occupancy
    for left, right, complete, natural, alt in m["images"]:
        assert complete and natural > 0, f"plot {alt!r} did not load"
        assert left >= 0 and right <= WIDTH, f"plot {alt!r} [{left}, {right}] does not fit"
    # at least one plot is wider than the window at its natural size: scaling is exercised
    assert any(natural > WIDTH for *_, natural, _ in m["images"])
    from PIL import Image

    with Image.open(shot) as im:
        assert im.width == WIDTH and im.height > 900
