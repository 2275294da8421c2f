"""Who ran where, when: a placement log of one episode and its GPUs x time chart.

:class:`PlacementRecorder` notes every placement segment of every job (the engine keeps only a
job's current GPUs); :func:`plot_occupancy` draws them, coloured by sharing mode. The leaderboard
report and the training callbacks (TensorBoard ``eval/occupancy``) both use it.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpu_sharing_env.sim.engine import Simulator

MODE_COLOURS = {"excl": "#4c72b0", "ts": "#dd8452", "mps": "#55a868", "mig": "#8172b3"}
MODE_NAMES = {"excl": "exclusive", "ts": "time-sharing", "mps": "MPS", "mig": "MIG"}


def _finite(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


class PlacementRecorder:
    """Records every placement segment of every job during one episode.

    The engine keeps only a job's *current* GPUs (they are cleared when it stops), so the
    occupancy chart needs this log: it wraps the simulator's start/remove steps on the instance
    (the engine itself is untouched) and notes ``[t_start, t_end, gpus, option]`` per run.
    """

    def __init__(self, sim: Simulator) -> None:
        self.sim = sim
        self.segments: dict[int, list[list[Any]]] = {}
        self._open: dict[int, tuple[float, list[int], int]] = {}
        self.active = hasattr(sim, "_start") and hasattr(sim, "_remove")
        if not self.active:
            return
        start, remove = sim._start, sim._remove

        def _start(st: Any, *args: Any, **kwargs: Any) -> Any:
            out = start(st, *args, **kwargs)
            self._open[st.spec.job_id] = (sim.now, [int(g) for g in st.gpus], int(st.option))
            return out

        def _remove(st: Any, *args: Any, **kwargs: Any) -> Any:
            self._close(st.spec.job_id)
            return remove(st, *args, **kwargs)

        setattr(sim, "_start", _start)  # noqa: B010  (instance attribute shadows the method)
        setattr(sim, "_remove", _remove)  # noqa: B010

    def detach(self) -> None:
        """Unhook from the simulator (later episodes run on the plain methods)."""
        for attr in ("_start", "_remove"):
            self.sim.__dict__.pop(attr, None)

    def _close(self, job_id: int) -> None:
        seg = self._open.pop(job_id, None)
        if seg is not None:
            t0, gpus, opt = seg
            self.segments.setdefault(job_id, []).append([t0, self.sim.now, gpus, opt])

    def jobs(self) -> list[dict[str, Any]]:
        """Compact per-job record (times in seconds; ``segs``: [t0, t1, gpus, option index])."""
        for jid in list(self._open):  # still running at the end of the episode
            self._close(jid)
        out = []
        for jid, st in sorted(self.sim.jobs.items()):
            spec = st.spec
            out.append(
                {
                    "id": int(jid),
                    "online": bool(spec.online),
                    "model": spec.model,
                    "num_gpus": int(spec.num_gpus),
                    "submit_s": float(spec.submit_s),
                    "start_s": _finite(st.first_start_t),
                    "finish_s": _finite(st.finish_t),
                    "status": st.status.name.lower(),
                    "segs": self.segments.get(jid, []),
                }
            )
        return out


def _lanes(segs: list[tuple[float, float, int, bool, str]]) -> tuple[list[int], int]:
    """Greedy interval colouring: a lane per segment so co-located segments do not overlap."""
    order = sorted(range(len(segs)), key=lambda i: (segs[i][0], segs[i][1]))
    lane_end: list[float] = []
    lane = [0] * len(segs)
    for i in order:
        t0, t1 = segs[i][0], segs[i][1]
        free = next((k for k, end in enumerate(lane_end) if end <= t0 + 1e-9), None)
        if free is None:
            lane_end.append(t1)
            free = len(lane_end) - 1
        else:
            lane_end[free] = t1
        lane[i] = free
    return lane, max(1, len(lane_end))


def _mode(label: str) -> str:
    return next((m for m in ("excl", "ts", "mps", "mig") if label.startswith(m)), "excl")


def fig_png(fig: Any) -> bytes:
    """A matplotlib figure as PNG bytes (the figure is closed)."""
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def empty_axes(ax: Any, text: str) -> None:
    """Grey centred ``text`` on an axes with nothing to show."""
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="grey")
    ax.set_xticks([])
    ax.set_yticks([])


def plot_occupancy(scenario: str, policy: str, result: Mapping[str, Any] | None) -> bytes:
    """GPUs x time for one episode's placement record (:meth:`PlacementRecorder.jobs` plus
    ``gpu_types``, ``options`` and ``record``), coloured by sharing mode, as PNG bytes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    types: list[str] = list(result.get("gpu_types", [])) if result else []
    labels: list[str] = list(result.get("options", [])) if result else []
    per_gpu: dict[int, list[tuple[float, float, int, bool, str]]] = {}
    for j in result.get("jobs", []) if result else []:
        for t0, t1, gpus, opt in j["segs"]:
            label = labels[opt] if 0 <= opt < len(labels) else "excl"
            for g in gpus:
                per_gpu.setdefault(g, []).append((t0, t1, j["id"], j["online"], label))
    n_gpus = max(len(types), max(per_gpu, default=-1) + 1)
    fig, ax = plt.subplots(figsize=(11, max(3.0, 0.32 * n_gpus + 1.2)))
    if not per_gpu:
        empty_axes(ax, "no placement record")
    for g, segs in per_gpu.items():
        lane, n_lanes = _lanes(segs)
        h = 0.8 / n_lanes
        for (t0, t1, _jid, online, label), k in zip(segs, lane):
            ax.broken_barh(
                [(t0 / 3600.0, max(t1 - t0, 1.0) / 3600.0)],
                (g - 0.4 + k * h, h * 0.92),
                facecolors=MODE_COLOURS[_mode(label)],
                edgecolors="black" if online else "white",  # white: a job boundary
                linewidth=0.5 if online else 0.4,
                hatch="////" if online else None,
                alpha=0.85,
            )
    ax.set_yticks(
        range(n_gpus), [f"{g} {types[g]}" if g < len(types) else str(g) for g in range(n_gpus)]
    )
    ax.tick_params(axis="y", labelsize=7)
    ax.set_ylim(n_gpus - 0.5, -0.5)
    ax.set_xlabel("simulated time (h)")
    ax.set_ylabel("GPU")
    ax.grid(alpha=0.3, axis="x")
    handles = [Patch(facecolor=c, label=MODE_NAMES[m]) for m, c in MODE_COLOURS.items()]
    handles.append(Patch(facecolor="white", edgecolor="black", hatch="////", label="online"))
    ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    seed = result["record"]["seed"] if result else "-"
    ax.set_title(f"{scenario}: placements of {policy} (seed {seed}), one lane per co-located job")
    return fig_png(fig)
