"""The progress ETA per kind of task (a leaderboard's planner cells cost 100x a heuristic's):
estimated from the finished tasks of the same kind, counting down while tasks run, and '?'
where no task of a kind has finished. Timings and clocks are fed in; nothing here reads the
wall clock."""

from __future__ import annotations

import functools
import io
from pathlib import Path
from typing import Any

import pytest

from gpu_sharing_gym.plumbing.progress import KindETA, PlainProgress, progress


class _Clock:
    """A clock that moves only when a test moves it."""

    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_eta_is_per_kind_not_the_run_rate() -> None:
    """54 of 57 demo cells done in 10 s (heuristics, 0.05 s each); the 3 planner cells left
    take 20 s each. The rate-based ETA said 0:00:01; per kind it is unknown until a planner
    cell finishes, then 20 s (2 cells left at 20 s on 2 workers)."""
    kinds = ["h"] * 54 + ["planner"] * 3
    eta = KindETA(kinds, workers=2, clock=_Clock())
    assert eta.text() == "? (not yet timed: h, planner)"
    for _ in range(54):
        eta.finished("h", 0.05)
    assert eta.untimed() == ["planner"]
    assert eta.seconds() is None  # only planner cells are left, and none is timed
    assert eta.text() == "? (not yet timed: planner)"  # nothing known: no confident number
    eta.finished("planner", 20.0)
    assert eta.seconds() == pytest.approx(20.0)  # 2 x 20 s on 2 workers
    assert eta.text() == "0:00:20"
    eta.finished("planner", 22.0)
    assert eta.text() == "0:00:21"  # the dearest pending cell: the mean of 20 and 22
    eta.finished("planner", 18.0)
    assert eta.text() == "0:00:00" and eta.seconds() == 0.0


def test_known_kinds_give_a_lower_bound_beside_the_unknown() -> None:
    eta = KindETA(["a"] * 10 + ["b"] * 2 + ["c", "d"], workers=1, clock=_Clock())
    eta.finished("a", 3.0)
    assert eta.seconds() == pytest.approx(27.0)  # 9 a's left at 3 s; b, c, d unknown
    assert eta.text() == "> 0:00:27 (not yet timed: b, c and 1 more)"


def test_work_is_shared_by_the_workers_but_never_below_one_task() -> None:
    eta = KindETA(["x"] * 9, workers=4, clock=_Clock())
    eta.finished("x", 8.0)
    assert eta.seconds() == pytest.approx(16.0)  # 8 x 8 s on 4 workers
    for _ in range(6):
        eta.finished("x", 8.0)
    assert eta.seconds() == pytest.approx(8.0)  # 2 left on 4 workers: one cell's time


def test_resumed_timings_inform_the_estimate_and_bad_ones_are_ignored() -> None:
    eta = KindETA(["planner"] * 2, 1, [("planner", 30.0), ("h", None)], clock=_Clock())
    assert eta.text() == "0:01:00"
    eta.finished("planner", None)  # an old record without wall_s: counted, not timed
    eta.finished("planner", float("nan"))
    assert eta.cost("planner") == 30.0 and eta.seconds() == 0.0


def test_eta_counts_down_while_tasks_run() -> None:
    """Two workers, three 20 s planner cells after two cheap ones: the estimate at a completion
    counts down with the clock; a cell that started earlier has less left."""
    clock = _Clock()
    eta = KindETA(["h", "h", "p", "p", "p"], workers=2, clock=clock)
    eta.finished("h", 0.1)  # the first p starts now (t = 100)
    eta.finished("h", 0.1)  # the second p starts now
    clock.t += 20.0
    eta.finished("p", 20.0)  # the first p took 20 s; the third starts (t = 120)
    # the second p ran 20 s of its 20; the third has 20 left: max(20 / 2, 20)
    assert eta.seconds() == pytest.approx(20.0)
    clock.t += 15.0
    assert eta.text() == "0:00:05"
    clock.t += 10.0
    assert eta.text() == "? (running past the estimate)"  # no confident 0:00:00


def test_start_order_follows_the_pool() -> None:
    """One worker: the second task starts only when the first finishes."""
    clock = _Clock()
    eta = KindETA(["a", "a", "a"], workers=1, clock=clock)
    clock.t += 10.0
    eta.finished("a", 10.0)  # the second starts at t = 110
    clock.t += 4.0
    assert eta.seconds() == pytest.approx(6.0 + 10.0)  # 6 s left of the second, the third


def test_plain_progress_line_shows_the_given_eta() -> None:
    clock = _Clock()
    eta = KindETA(["h"] * 3 + ["planner"], workers=1, clock=clock)
    bar = PlainProgress(4, "cells", "cell", clock=clock, start=False, eta=eta.text)
    for _ in range(3):
        eta.finished("h", 0.1)
        bar.update(1)
    clock.t += 40.0
    assert bar.line() == ("cells: 3/4 cells (75%), elapsed 0:00:40, ETA ? (not yet timed: planner)")
    rate = PlainProgress(4, "cells", "cell", clock=clock, start=False)
    rate.update(3)
    clock.t += 30.0
    assert rate.line().endswith("ETA 0:00:10")  # without eta: the run's rate, as before


def test_terminal_bar_shows_the_given_eta(monkeypatch: pytest.MonkeyPatch) -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    out = Tty()
    eta = KindETA(["h", "planner"], workers=1, clock=_Clock())
    bar = progress(2, "cells", "cell", file=out, eta=eta.text)
    eta.finished("h", 0.1)
    bar.update(1)
    bar.refresh()
    bar.close()
    text = out.getvalue()
    assert "ETA ? (not yet timed: planner)" in text
    assert "<" not in text  # tqdm's own remaining time (elapsed<remaining) is not shown


def test_leaderboard_feeds_each_cell_s_run_time_to_the_eta(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """run_leaderboard counts every cell under its policy with the cell's own wall_s."""
    from gpu_sharing_gym import leaderboard
    from gpu_sharing_gym.cells import plan_cells

    cells = plan_cells(["h", "planner"], {"s": str(tmp_path / "s.yaml")}, [0, 1])
    wall = {"h": 0.05, "planner": 20.0}

    def fake_run_cells(todo: Any, *args: Any) -> Any:
        for c in todo:
            rec = {"status": "ok", "wall_s": wall[c.policy]}
            yield c, {"record": rec, "cell": {"policy": c.policy}}

    seen: list[str] = []

    def fake_bar(*args: Any, eta: Any = None, **kwargs: Any) -> Any:
        class Bar:
            def __enter__(self) -> Any:
                return self

            def __exit__(self, *exc: Any) -> None:
                pass

            def update(self, n: int = 1) -> None:
                seen.append(eta())

        return Bar()

    monkeypatch.setattr(leaderboard, "run_cells", fake_run_cells)
    monkeypatch.setattr(leaderboard, "progress_bar", fake_bar)
    monkeypatch.setattr(leaderboard, "save_cell", lambda *a: None)
    monkeypatch.setattr(leaderboard, "pending_cells", lambda out, cs: (list(cs), {}))
    monkeypatch.setattr(leaderboard, "KindETA", functools.partial(KindETA, clock=_Clock()))
    leaderboard.run_leaderboard(tmp_path, cells, workers=1, progress=True)
    assert seen == [
        "? (not yet timed: planner)",
        "? (not yet timed: planner)",
        "0:00:20",
        "0:00:00",
    ]
