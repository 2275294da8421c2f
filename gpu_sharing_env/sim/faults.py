"""Failure causes and how they propagate.

Causes (DESIGN.md): user signals (SIGINT/SIGTERM), application errors (e.g. illegal memory
access), OOM (follows from memory over-commit, never drawn at random) and hardware Xid errors.

Propagation: under MPS every client shares one server, so a fatal client error takes the server
and every co-located client down. MuxFlow (EuroSys'24 / arXiv 2303.13803, Sec. 4.3) found that
~99% of such errors came from SIGINT/SIGTERM and made clients exit gracefully on them (xCUDA
freezes kernel launches and releases the context); with that *mixed handling* user signals stop
propagating, and the remaining errors are caught by a detector that resets the MPS server (which
still restarts the co-located clients). Time-sharing and MIG isolate clients.

An OOM is an allocation failure returned to the one client that asked: it does not take down the
MPS server (it is not a sticky CUDA error), so it never propagates.
"""

from __future__ import annotations

import enum

from gpu_sharing_env.physics.modes import SharingMode


class FaultCause(enum.Enum):
    USER_SIGNAL = "user_signal"
    APP_ERROR = "app_error"
    XID = "xid"
    OOM = "oom"


#: Causes drawn at random (OOM is not: it follows from over-commit).
RANDOM_CAUSES: tuple[FaultCause, ...] = (
    FaultCause.USER_SIGNAL,
    FaultCause.APP_ERROR,
    FaultCause.XID,
)


def propagates(cause: FaultCause, mode: SharingMode, mixed_handling: bool) -> bool:
    """Whether a fatal error of one client takes down the other clients of its GPU."""
    if mode is not SharingMode.MPS or cause is FaultCause.OOM:
        return False
    return not (mixed_handling and cause is FaultCause.USER_SIGNAL)
