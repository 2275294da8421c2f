"""Rendering: a text view (``"ansi"``) and an image (``"rgb_array"``) of the cluster.

The image is drawn with numpy alone (no plotting library on the hot path): one cell per
(padded) GPU, coloured by sharing mode, filled from the bottom in proportion to declared memory,
with one tick per resident along the top, an orange border on a GPU hosting an online service,
a red one on an unhealthy GPU (SysMonitor) and a yellow one while a GPU is being reconfigured.
Above the grid, a bar shows simulated time over the horizon and one square per queue-window
slot shows the waiting jobs (blue offline, orange online), darker the longer they waited.
"""

from __future__ import annotations

import math

import numpy as np

from gpu_sharing_env.fleet.cluster import MODE_NONE
from gpu_sharing_env.physics.modes import SharingMode
from gpu_sharing_env.sim.engine import Simulator

CELL_PX = 24
TIME_BAR_PX = 6
MAX_COLS = 16

#: Cell colours by mode (RGB): row 0 is an unconfigured GPU, then SharingMode order; the
#: last row is padding (a GPU slot beyond the cluster's size).
MODE_RGB = np.array(
    [
        [90, 90, 90],  # unset
        [52, 101, 164],  # exclusive
        [196, 160, 0],  # time-sharing
        [78, 154, 6],  # MPS
        [117, 80, 123],  # MIG
        [0, 0, 0],  # padding
    ],
    dtype=np.uint8,
)
BACKGROUND = np.array([20, 20, 20], dtype=np.uint8)
RED = np.array([239, 41, 41], dtype=np.uint8)
YELLOW = np.array([252, 233, 79], dtype=np.uint8)
ORANGE = np.array([245, 121, 0], dtype=np.uint8)
WHITE = np.array([238, 238, 236], dtype=np.uint8)
BLUE = np.array([114, 159, 207], dtype=np.uint8)


def image_shape(max_gpus: int) -> tuple[int, int, int]:
    """(height, width, 3) of the ``rgb_array`` image for a padded GPU count."""
    cols = min(MAX_COLS, max_gpus)
    rows = math.ceil(max_gpus / cols)
    return (TIME_BAR_PX + CELL_PX + rows * CELL_PX, cols * CELL_PX, 3)


def render_rgb(sim: Simulator, max_gpus: int) -> np.ndarray:
    """The cluster as an RGB image (uint8, shape :func:`image_shape`)."""
    h, w, _ = image_shape(max_gpus)
    img = np.empty((h, w, 3), dtype=np.uint8)
    img[:] = BACKGROUND
    c = sim.cluster
    g = c.n_gpus
    cols = w // CELL_PX
    rows = (h - TIME_BAR_PX - CELL_PX) // CELL_PX
    # -- time bar
    frac = min(1.0, sim.now / sim.horizon_s) if sim.horizon_s > 0 else 0.0
    img[1 : TIME_BAR_PX - 1, : max(1, int(frac * w))] = WHITE
    # -- queue window
    window = sim.window_jobs()
    slot_w = max(1, w // max(1, sim.window))
    top = TIME_BAR_PX
    for k, spec in enumerate(window):
        wait = sim.now - sim.jobs[spec.job_id].ledger.enqueue_t
        shade = 1.0 - 0.6 * min(1.0, math.log10(1.0 + max(0.0, wait)) / 5.0)
        img[top + 3 : top + CELL_PX - 3, k * slot_w + 2 : (k + 1) * slot_w - 2] = (
            ORANGE if spec.online else BLUE
        ) * shade
    # -- GPU grid, drawn on a (rows, CELL, cols, CELL, 3) view of the grid area
    n = rows * cols
    mode_row = np.full(n, len(MODE_RGB) - 1, dtype=np.int64)
    mode_row[:g] = np.where(c.mode == MODE_NONE, 0, c.mode + 1)
    base = MODE_RGB[mode_row].astype(np.int16)  # (n, 3)
    mem = np.zeros(n)
    mem[:g] = np.clip(c.mem_decl / c.mem_cap, 0.0, 1.0)
    inner = CELL_PX - 4
    fill_h = np.rint(mem * inner).astype(np.int64)  # pixels of memory fill
    y = np.arange(CELL_PX)
    # inside the cell (2-px margin) and within the memory fill (from the bottom)
    in_y = (y >= 2) & (y < CELL_PX - 2)
    filled = (y[None, :] >= (CELL_PX - 2 - fill_h)[:, None]) & in_y[None, :]  # (n, CELL)
    cell = np.empty((n, CELL_PX, CELL_PX, 3), dtype=np.int16)
    dim = base // 2
    cell[:] = np.where(filled[:, :, None, None], base[:, None, None, :], dim[:, None, None, :])
    cell[:, ~in_y] = BACKGROUND
    cell[:, :, ~in_y] = BACKGROUND
    # resident ticks along the top of the cell
    n_res = np.zeros(n, dtype=np.int64)
    n_res[:g] = c.n_res
    tick_x = 3 + 3 * np.arange(max(1, c.sharing.max_residents))
    tick_x = tick_x[tick_x < CELL_PX - 3]
    ticks = tick_x[None, :] < (3 + 3 * n_res)[:, None]  # (n, k)
    for j, x in enumerate(tick_x):
        cell[ticks[:, j], 3:6, x : x + 2] = WHITE
    # borders: online host (orange), unhealthy (red), reconfiguring (yellow; wins)
    border = np.zeros(n, dtype=np.int64)
    border[:g][c.online_count > 0] = 1
    border[:g][~c.healthy] = 2
    border[:g][~c.ready] = 3
    for code, colour in ((1, ORANGE), (2, RED), (3, YELLOW)):
        sel = border == code
        if sel.any():
            cell[sel, 0, :] = colour
            cell[sel, -1, :] = colour
            cell[sel, :, 0] = colour
            cell[sel, :, -1] = colour
    grid = cell.reshape(rows, cols, CELL_PX, CELL_PX, 3).transpose(0, 2, 1, 3, 4)
    img[TIME_BAR_PX + CELL_PX :] = grid.reshape(rows * CELL_PX, cols * CELL_PX, 3)
    return img


def _hms(t_s: float) -> str:
    t = int(t_s)
    return f"{t // 3600:02d}:{t % 3600 // 60:02d}:{t % 60:02d}"


def _dur(t_s: float) -> str:
    if t_s < 120:
        return f"{t_s:.0f}s"
    if t_s < 7200:
        return f"{t_s / 60:.0f}m"
    return f"{t_s / 3600:.1f}h"


def render_ansi(sim: Simulator) -> str:
    """A readable text view: time, nodes, GPUs (type, mode, memory, residents), queue."""
    c = sim.cluster
    acc = sim.acc
    att = f"{acc.requests_ok / acc.requests:.3f}" if acc.requests > 0 else "n/a"
    lines = [
        f"t={_hms(sim.now)} ({100 * sim.now / sim.horizon_s:.1f}% of {sim.horizon_s / 3600:g}h)"
        f"  queued {len(sim.queue)}  offline in system {sim.offline_in_system}"
        f"  SLO attainment {att} (target {sim.cfg.slo_target:g})" + ("  [done]" if sim.done else "")
    ]
    opts = sim.options
    for ni, node in enumerate(c.nodes):
        first = int(c.node_first_gpu[ni])
        lines.append(
            f"node {node.name} [{node.interconnect.value}, "
            f"cpu {c.node_cpu_used[ni]:g}/{c.node_vcpus[ni]:g}]"
        )
        for gi in range(first, first + node.num_gpus):
            m = int(c.mode[gi])
            mode = "-" if m == MODE_NONE else SharingMode(m).name.lower()
            flags = ("" if c.healthy[gi] else " UNHEALTHY") + ("" if c.ready[gi] else " SETUP")
            res = " ".join(
                f"j{j}({opts[sim.jobs[j].option].label}{'*' if sim.jobs[j].spec.online else ''})"
                for j in c.residents[gi]
            )
            lines.append(
                f"  gpu {gi:4d} {c.type_names[int(c.type_idx[gi])]:<10} {mode:<12}"
                f" mem {c.mem_decl[gi]:5.1f}/{c.mem_cap[gi]:<4g}GB"
                f" util {sim.gpu_util[gi]:.2f}{flags}  {res or 'idle'}"
            )
    window = sim.window_jobs()
    lines.append(f"queue window ({len(window)}/{sim.window}, {len(sim.queue)} queued):")
    for k, s in enumerate(window):
        wait = sim.now - sim.jobs[s.job_id].ledger.enqueue_t
        kind = "online " if s.online else "offline"
        lines.append(
            f"  [{k}] j{s.job_id} {kind} {s.model:<11} {s.num_gpus}x{s.gpu_frac:g} GPU"
            f" {s.mem_gb:g}GB est {_dur(s.est_work_s)} waited {_dur(wait)}"
        )
    lines.append("(* online service)")
    return "\n".join(lines) + "\n"
