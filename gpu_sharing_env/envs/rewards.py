"""Rewards, selectable by name: ``REWARDS[name](**kwargs)``.

A reward is an object with ``reset(sim)`` (called after every episode reset) and
``__call__(sim) -> float`` (called after every step; it sees the change since the previous call).

``jct`` (the default) makes the episode return track the leaderboard's primary objective,
the lowest ``jct_mean_s`` among policies whose ``slo_attainment`` meets the scenario's target
(DESIGN.md). Per step::

    r_t = -(I_t - I_{t-1}) / (3600 · N)  -  λ · (Φ_t - Φ_{t-1})
    I_t = ∫ (offline jobs in the system) dt      (sim.acc.in_system_s, job-seconds)
    N   = offline jobs in the episode's workload (at least 1)
    Φ_t = max(0, slo_target - A_t),  A_t = requests_ok / requests so far (1 before any request)

so the return telescopes to ``-(I_T / N) / 3600 - λ · max(0, slo_target - slo_attainment)``: the
mean hours each offline job spent in the system (queued or running, Decima's reward; equal to
``jct_mean_s / 3600`` when every job completes, and counting the unfinished ones up to the end
otherwise, so starving a job is not rewarded), minus λ (default 100, i.e. one hour of mean JCT
per percentage point) for every unit of SLO shortfall. The SLO term is a potential difference:
a step's penalty is proportional to the requests it saw violate the SLO beyond the budget
``1 - slo_target`` leaves, normalised by the requests so far; it may be positive when
attainment recovers, and only its end value counts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from gpu_sharing_env.sim.engine import Simulator

SECONDS_PER_HOUR = 3600.0
#: Default λ: return units (hours of mean JCT) per unit of SLO-attainment shortfall.
SLO_WEIGHT = 100.0


class Reward(Protocol):
    """A reward function of the simulator's running accounts."""

    def reset(self, sim: Simulator) -> None:
        """Start an episode (``sim`` has just been reset)."""
        ...

    def __call__(self, sim: Simulator) -> float:
        """Reward for everything that happened since the previous call (or reset)."""
        ...


#: Forms of the SLO term (``reward_kwargs.slo_form``).
SLO_FORMS = ("hinge", "linear")


def _slo_shortfall(sim: Simulator, linear: bool = False) -> float:
    acc = sim.acc
    att = acc.requests_ok / acc.requests if acc.requests > 0 else 1.0
    gap = sim.cfg.slo_target - att
    return gap if linear else max(0.0, gap)


class SloReward:
    """The SLO term alone: ``-λ · ΔΦ`` with Φ = max(0, slo_target - attainment so far)
    (``slo_form="hinge"``, the default: each episode must meet the target on its own), or
    Φ = slo_target - attainment (``"linear"``: every request counts at the same price, above
    the target too; what a Lagrange multiplier on the *mean* attainment over episodes prices,
    ``gpu_sharing_gym.agents.callbacks.SloMultiplier``). ``slo_weight`` may be changed
    between steps (:meth:`GpuSharingEnv.set_slo_weight`)."""

    def __init__(self, slo_weight: float = SLO_WEIGHT, slo_form: str = "hinge") -> None:
        if not slo_weight >= 0:
            raise ValueError(f"reward_kwargs.slo_weight: must be >= 0 (got {slo_weight!r})")
        if slo_form not in SLO_FORMS:
            raise ValueError(
                f"reward_kwargs.slo_form: one of {', '.join(SLO_FORMS)} (got {slo_form!r})"
            )
        self.slo_weight = float(slo_weight)
        self.linear = slo_form == "linear"
        self._phi = 0.0

    def reset(self, sim: Simulator) -> None:
        self._phi = _slo_shortfall(sim, self.linear)

    def __call__(self, sim: Simulator) -> float:
        phi = _slo_shortfall(sim, self.linear)
        r = -self.slo_weight * (phi - self._phi)
        self._phi = phi
        return r


class JctReward:
    """Minus job-hours in the system per offline job, minus the SLO term (module docstring)."""

    def __init__(self, slo_weight: float = SLO_WEIGHT, slo_form: str = "hinge") -> None:
        self.slo = SloReward(slo_weight, slo_form)
        self._in_system_s = 0.0
        self._scale = SECONDS_PER_HOUR

    def reset(self, sim: Simulator) -> None:
        n = sim.offline_jobs[0]  # (the episode's offline jobs, counted at the reset)
        self._scale = SECONDS_PER_HOUR * max(1, n)
        self._in_system_s = sim.acc.in_system_s
        self.slo.reset(sim)

    def __call__(self, sim: Simulator) -> float:
        cur = sim.acc.in_system_s
        r = -(cur - self._in_system_s) / self._scale
        self._in_system_s = cur
        return r + self.slo(sim)


class ThroughputReward:
    """Normalised progress: the increase of ∫ Σ_GPUs Σ_residents (shared / solo speed) dt
    (GPUPool's system throughput, ``sim.acc.stp_s``) per GPU-hour. An idle cluster earns 0,
    every GPU running one job at full speed earns 1 per simulated hour."""

    def __init__(self) -> None:
        self._stp_s = 0.0
        self._scale = SECONDS_PER_HOUR

    def reset(self, sim: Simulator) -> None:
        self._stp_s = sim.acc.stp_s
        self._scale = SECONDS_PER_HOUR * sim.n_gpus

    def __call__(self, sim: Simulator) -> float:
        cur = sim.acc.stp_s
        r = (cur - self._stp_s) / self._scale
        self._stp_s = cur
        return r


#: Name → reward class (constructed with the env's ``reward_kwargs``).
REWARDS: dict[str, Callable[..., Reward]] = {
    "jct": JctReward,
    "throughput": ThroughputReward,
    "slo": SloReward,
}
