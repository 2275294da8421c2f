"""Who ran where, when: a placement log of one episode and its GPUs x time chart.

:class:`PlacementRecorder` notes every placement segment of every job (the engine keeps only a
job's current GPUs); :func:`plot_occupancy` draws them, a colour per job (or per sharing mode),
the time axis limited to the activity. The leaderboard report and the training callbacks
(TensorBoard ``eval/occupancy``) both use it.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from gpu_sharing_env.sim.observe import SimObserver

if TYPE_CHECKING:
    from gpu_sharing_env.sim.engine import Simulator

MODE_COLOURS = {"excl": "#4c72b0", "ts": "#dd8452", "mps": "#55a868", "mig": "#8172b3"}
MODE_NAMES = {"excl": "exclusive", "ts": "time-sharing", "mps": "MPS", "mig": "MIG"}


def _finite(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


class PlacementRecorder(SimObserver):
    """Records every placement segment of every job during one episode.

    The engine keeps only a job's *current* GPUs (they are cleared when it stops), so the
    occupancy chart needs this log: it observes the simulator's starts and stops
    (:mod:`gpu_sharing_env.sim.observe`) and notes ``[t_start, t_end, gpus, option]`` per run.
    """

    def __init__(self, sim: Simulator) -> None:
        self.sim = sim
        self.segments: dict[int, list[list[Any]]] = {}
        self._open: dict[int, tuple[float, list[int], int]] = {}
        self.active = True
        sim.add_observer(self)

    def on_start(self, sim: Simulator, job_id: int, gpus: list[int], option: int) -> None:
        self._open[job_id] = (sim.now, [int(g) for g in gpus], int(option))

    def on_stop(self, sim: Simulator, job_id: int) -> None:
        self._close(job_id)

    def detach(self) -> None:
        """Stop observing the simulator (later episodes are not recorded)."""
        self.sim.remove_observer(self)

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
                    "start_s": _finite(st.ledger.first_start_t),
                    "finish_s": _finite(st.ledger.finish_t),
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


#: Hatches that tell apart jobs sharing a colour once there are more jobs than colours: the
#: first :data:`N_COLOURS` jobs are plain, the next ones ``////``, and so on.
HATCHES: tuple[str, ...] = ("", "////", "\\\\\\\\", "xxx", "...", "++", "oo", "--", "||", "**")
#: tab20 in an order where neighbours differ in hue (its dark/light pairs are 10 apart).
_TAB20_ORDER = tuple(range(0, 20, 2)) + tuple(range(1, 20, 2))
N_COLOURS = len(_TAB20_ORDER)
#: Per-job legend entries up to this many jobs (beyond, a single "colour = job" entry).
MAX_JOB_LEGEND = 24


def job_style(index: int) -> tuple[tuple[float, float, float, float], str]:
    """(face colour, hatch) of the ``index``-th job: tab20 (neighbours in distinct hues),
    cycling, each further cycle hatched differently so no two of the first
    ``N_COLOURS * len(HATCHES)`` jobs look alike."""
    import matplotlib

    cmap = matplotlib.colormaps["tab20"]
    cycle, k = divmod(index, N_COLOURS)
    return cmap(_TAB20_ORDER[k]), HATCHES[cycle % len(HATCHES)]


def activity_span(jobs: Any) -> tuple[float, float] | None:
    """(first placement, last completion) in seconds of the placement record ``jobs``
    (:meth:`PlacementRecorder.jobs`); None when nothing was ever placed.

    The end is the last offline job's last segment (a job still running when the episode
    ended counts until then): online services run to the end of the episode whatever happens,
    so they end the span only when there is no offline work at all.
    """
    segs = [seg for j in jobs for seg in j["segs"]]
    if not segs:
        return None
    ends = [seg[1] for j in jobs if not j["online"] for seg in j["segs"]]
    ends += [j["finish_s"] for j in jobs if not j["online"] and j["segs"] and j.get("finish_s")]
    end = max(ends) if ends else max(seg[1] for seg in segs)
    return float(min(seg[0] for seg in segs)), float(end)


def time_unit(span_s: float) -> tuple[str, float]:
    """(unit, seconds per unit) for a time axis covering ``span_s``: hours above 2 h, minutes
    above 2 min, else seconds."""
    if span_s > 2 * 3600.0:
        return "h", 3600.0
    if span_s > 120.0:
        return "min", 60.0
    return "s", 1.0


def time_limits(span: tuple[float, float], margin: float = 0.02) -> tuple[float, float]:
    """The x range (seconds) of a chart of activity ``span``: the span plus ``margin`` of it on
    each side (at least a second), never before t = 0."""
    lo, hi = span
    pad = max((hi - lo) * margin, 1.0)
    return max(0.0, lo - pad), hi + pad


def occupancy_figure(
    scenario: str, policy: str, result: Mapping[str, Any] | None, colour_by: str = "job"
) -> Any:
    """The GPUs x time chart of one episode's placement record (:meth:`PlacementRecorder.jobs`
    plus ``gpu_types``, ``options`` and ``record``) as a matplotlib figure.

    ``colour_by="job"`` (default): a colour per job (tab20, cycling; hatched once there are more
    jobs than colours), online services outlined in black, the sharing modes' share of GPU time
    in the legend. ``colour_by="mode"``: a colour per sharing mode, online services hatched.
    The x axis covers the activity (first placement to last completion, 2 % margin) in hours,
    minutes or seconds as the span asks; the legend sits right of the axes.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    if colour_by not in ("job", "mode"):
        raise ValueError(f"colour_by: 'job' or 'mode', not {colour_by!r}")
    types: list[str] = list(result.get("gpu_types", [])) if result else []
    labels: list[str] = list(result.get("options", [])) if result else []
    jobs: list[Mapping[str, Any]] = list(result.get("jobs", [])) if result else []
    placed = sorted((j for j in jobs if j["segs"]), key=lambda j: (j["segs"][0][0], j["id"]))
    style = {j["id"]: job_style(i) for i, j in enumerate(placed)}
    per_gpu: dict[int, list[tuple[float, float, int, bool, str]]] = {}
    mode_gpu_s: dict[str, float] = {}
    for j in placed:
        for t0, t1, gpus, opt in j["segs"]:
            label = labels[opt] if 0 <= opt < len(labels) else "excl"
            mode = _mode(label)
            mode_gpu_s[mode] = mode_gpu_s.get(mode, 0.0) + max(t1 - t0, 0.0) * len(gpus)
            for g in gpus:
                per_gpu.setdefault(g, []).append((t0, t1, j["id"], j["online"], label))
    n_gpus = max(len(types), max(per_gpu, default=-1) + 1)
    fig, ax = plt.subplots(figsize=(11, max(3.0, 0.32 * n_gpus + 1.2)))
    span = activity_span(placed)
    unit, per = time_unit(span[1] - span[0]) if span else ("h", 3600.0)
    if span is None:
        empty_axes(ax, "no placement record")
    else:
        lo, hi = time_limits(span)
        ax.set_xlim(lo / per, hi / per)
    min_label_w = (span[1] - span[0]) * 0.035 if span else math.inf
    for g, segs in per_gpu.items():
        lane, n_lanes = _lanes(segs)
        h = 0.8 / n_lanes
        for (t0, t1, jid, online, label), k in zip(segs, lane):
            face: Any
            if colour_by == "job":
                face, hatch = style[jid]
                edge, lw = ("black", 1.2) if online else ("white", 0.5)
            else:
                face, hatch = MODE_COLOURS[_mode(label)], "////" if online else ""
                edge, lw = ("black", 0.5) if online else ("white", 0.4)
            ax.broken_barh(
                [(t0 / per, max(t1 - t0, 1.0) / per)],
                (g - 0.4 + k * h, h * 0.92),
                facecolors=face,
                edgecolors=edge,  # white: a job boundary
                linewidth=lw,
                hatch=hatch or None,
                alpha=0.9,
            )
            if colour_by == "job" and n_lanes <= 3 and t1 - t0 >= min_label_w:
                ax.text(
                    (t0 + t1) / 2 / per,
                    g - 0.4 + (k + 0.46) * h,
                    str(jid),
                    ha="center",
                    va="center",
                    fontsize=6,
                    clip_on=True,
                )
    ax.set_yticks(
        range(n_gpus), [f"{g} {types[g]}" if g < len(types) else str(g) for g in range(n_gpus)]
    )
    ax.tick_params(axis="y", labelsize=7)
    ax.set_ylim(n_gpus - 0.5, -0.5)
    ax.set_xlabel(f"simulated time ({unit})")
    ax.set_ylabel("GPU (index, type)")
    ax.grid(alpha=0.3, axis="x")
    handles: list[Any] = []
    if colour_by == "mode":
        handles += [Patch(facecolor=c, label=MODE_NAMES[m]) for m, c in MODE_COLOURS.items()]
        handles.append(Patch(facecolor="white", edgecolor="black", hatch="////", label="online"))
        title = "sharing mode"
    else:
        total = sum(mode_gpu_s.values()) or 1.0
        shares = ", ".join(
            f"{MODE_NAMES[m]} {100.0 * v / total:.0f} %"
            for m, v in sorted(mode_gpu_s.items(), key=lambda kv: -kv[1])
        )
        title = f"GPU time: {shares}" if shares else "job (id)"
        if len(placed) <= MAX_JOB_LEGEND:
            for j in placed:
                face, hatch = style[j["id"]]
                kind = "service" if j["online"] else f"{j['num_gpus']} GPU"
                handles.append(
                    Patch(
                        facecolor=face,
                        hatch=hatch or None,
                        edgecolor="black" if j["online"] else "white",
                        label=f"{j['id']} {j.get('model', '')} ({kind})",
                    )
                )
        else:
            text = f"colour = job ({len(placed)} jobs,\nhatched past {N_COLOURS});\nid on wide bars"
            handles.append(Patch(facecolor="lightgrey", edgecolor="white", label=text))
            if any(j["online"] for j in placed):
                handles.append(
                    Patch(
                        facecolor="white", edgecolor="black", linewidth=1.2, label="online service"
                    )
                )
    ax.legend(
        handles=handles,
        title=title,
        title_fontsize=8,
        fontsize=7,
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        borderaxespad=0.0,
        ncol=2 if len(handles) > 14 else 1,
        frameon=False,
    )
    seed = result["record"]["seed"] if result else "-"
    ax.set_title(f"{scenario}: placements of {policy} (seed {seed}), one lane per co-located job")
    return fig


def plot_occupancy(
    scenario: str, policy: str, result: Mapping[str, Any] | None, colour_by: str = "job"
) -> bytes:
    """:func:`occupancy_figure` as PNG bytes."""
    return fig_png(occupancy_figure(scenario, policy, result, colour_by))
