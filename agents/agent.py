"""Trained agents behind the baselines' Policy protocol, and safe checkpoint loading.

A checkpoint is SB3's ``model.zip`` plus a small ``gpu_sharing_agent.json`` member that
:func:`write_metadata` adds (algorithm, policy class, its keyword arguments, the training
scenario's placement options). :func:`load_agent` reads only that JSON and the weights
(``policy.pth``, loaded with ``torch.load(weights_only=True)``): nothing is unpickled. The
set-structured policies are rebuilt for whatever cluster the agent is asked to schedule, so one
checkpoint runs on clusters of any size with the same placement options.

Names: ``load_agent("ppo_default")`` loads ``agents/pretrained/ppo_default.zip``; anything with
a path separator or ending in ``.zip`` is a path. Nothing is loaded unless named.
"""

from __future__ import annotations

import io
import json
import os
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces

from agents.envs import make_expert
from agents.policy import HINT, SetActorCriticPolicy, SetPPOPolicy
from gpu_sharing_env.envs.observation import (
    GPU_FEATURES,
    JOB_FEATURES,
    ObservationEncoder,
    observation_space,
)
from gpu_sharing_env.sim.codec import WAIT
from gpu_sharing_env.sim.engine import Simulator
from gpu_sharing_env.sim.view import ClusterView

PRETRAINED_DIR = Path(__file__).resolve().parent / "pretrained"
META_NAME = "gpu_sharing_agent.json"
META_FORMAT = 1
#: Set-structured policy classes a checkpoint may name (nothing else is instantiated).
POLICY_CLASSES: dict[str, type[Any]] = {
    "SetActorCriticPolicy": SetActorCriticPolicy,
    "SetPPOPolicy": SetPPOPolicy,
}


class AgentLoadError(ValueError):
    """A checkpoint is missing, unreadable or incompatible (one-line message naming the file)."""


def pretrained_names() -> list[str]:
    """Names of the checkpoints shipped in ``agents/pretrained/``."""
    return sorted(p.stem for p in PRETRAINED_DIR.glob("*.zip"))


def is_agent_ref(name: str) -> bool:
    """Whether ``name`` refers to a checkpoint (a shipped name or a ``.zip`` path)."""
    return name in pretrained_names() or name.endswith(".zip") or os.sep in name


def resolve(name_or_path: str | os.PathLike[str]) -> Path:
    """The checkpoint file a name or path stands for; AgentLoadError if it does not exist."""
    s = os.fspath(name_or_path)
    if s in pretrained_names():
        return PRETRAINED_DIR / f"{s}.zip"
    p = Path(s)
    if not p.is_file():
        known = ", ".join(pretrained_names()) or "none shipped"
        raise AgentLoadError(
            f"{s}: no such checkpoint file (give a path to a model.zip, or a shipped name: {known})"
        )
    return p


def write_metadata(path: str | os.PathLike[str], meta: Mapping[str, Any]) -> None:
    """Add (or replace) the agent metadata member of an SB3 checkpoint zip."""
    p = Path(path)
    with zipfile.ZipFile(p) as z:
        members = {n: z.read(n) for n in z.namelist() if n != META_NAME}
    tmp = p.with_name(p.name + ".tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for n, data in members.items():
            z.writestr(n, data)
        z.writestr(META_NAME, json.dumps({"format": META_FORMAT, **meta}, indent=1))
    os.replace(tmp, p)


def read_checkpoint(path: Path) -> tuple[dict[str, Any], dict[str, th.Tensor]]:
    """(metadata, policy state dict) of a checkpoint, without unpickling anything."""
    try:
        with zipfile.ZipFile(path) as z:
            names = set(z.namelist())
            if META_NAME not in names or "policy.pth" not in names:
                missing = META_NAME if META_NAME not in names else "policy.pth"
                raise AgentLoadError(
                    f"{path}: not a gpu-sharing-gym agent checkpoint (no {missing} inside; "
                    f"save with scripts/train.py)"
                )
            meta = json.loads(z.read(META_NAME))
            state = th.load(io.BytesIO(z.read("policy.pth")), map_location="cpu", weights_only=True)
    except AgentLoadError:
        raise
    except (zipfile.BadZipFile, OSError, EOFError, RuntimeError, ValueError, KeyError) as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise AgentLoadError(f"{path}: corrupt or unreadable checkpoint ({reason})") from None
    if not isinstance(meta, dict) or meta.get("format") != META_FORMAT:
        raise AgentLoadError(f"{path}: {META_NAME}: unknown format (want {META_FORMAT})")
    if meta.get("policy") not in POLICY_CLASSES:
        raise AgentLoadError(
            f"{path}: {META_NAME}: policy {meta.get('policy')!r} is not size-free "
            f"(known: {', '.join(POLICY_CLASSES)}); load it with SB3 instead"
        )
    if not isinstance(state, dict):
        raise AgentLoadError(f"{path}: policy.pth: not a state dict")
    return meta, state


def _dummy_lr(_: float) -> float:
    return 0.0


class RLAgent:
    """A trained set policy as a :class:`baselines.base.Policy`.

    ``act`` uses the env's observation when given one, else encodes the simulator state itself
    (the evaluation runner passes ``obs=None``); the policy is rebuilt for each new layout
    (padded GPU count, queue window) and the same weights loaded.

    Args:
        meta: Checkpoint metadata (see :func:`write_metadata`).
        state: The policy's state dict.
        name: Leaderboard name.
        deterministic: Take the most likely legal action (else sample).
    """

    oracle = False
    mechanisms: Mapping[str, bool] = {}

    def __init__(
        self,
        meta: Mapping[str, Any],
        state: Mapping[str, th.Tensor],
        name: str = "agent",
        deterministic: bool = True,
    ) -> None:
        self.meta = dict(meta)
        self.state = dict(state)
        self.name = name
        self.deterministic = deterministic
        self._policies: dict[tuple[int, int, int], Any] = {}
        self._encoder: ObservationEncoder | None = None
        self._encoder_key: tuple[int, int] | None = None
        self._rng = np.random.default_rng(0)
        self._seed = 0
        self._expert: Any = None

    # ------------------------------------------------------------------ Policy protocol
    def reset(self, seed: int) -> None:
        self._rng = np.random.default_rng(seed)
        self._seed = seed
        if self._expert is not None:
            self._expert.reset(seed)
        if self._encoder is not None:
            self._encoder.reset()

    def act(self, view: ClusterView, obs: Any, mask: np.ndarray) -> int:
        sim = view._sim
        if obs is None:
            obs = self._encode(sim)
        if self.meta.get("expert_hint") and HINT not in obs:
            if self._expert is None:
                self._expert = make_expert(self.meta["expert_hint"])
                self._expert.reset(self._seed)
            hint = np.zeros(mask.shape[0], dtype=np.float32)
            hint[self._expert.act(view, None, mask)] = 1.0
            obs = {**obs, HINT: hint}
        return self.predict(obs, mask)

    # ------------------------------------------------------------------ helpers
    def _encode(self, sim: Simulator) -> dict[str, np.ndarray]:
        key = (id(sim), sim.n_gpus)
        if self._encoder is None or self._encoder_key != key:
            self._encoder = ObservationEncoder(sim, sim.n_gpus)
            self._encoder_key = key
        return self._encoder.encode(sim)

    def policy_for(self, max_gpus: int, window: int, n_options: int) -> Any:
        """The policy network for a layout (built once, same weights)."""
        key = (max_gpus, window, n_options)
        pol = self._policies.get(key)
        if pol is None:
            trained = self.meta.get("n_options")
            if trained is not None and int(trained) != n_options:
                raise AgentLoadError(
                    f"agent {self.name}: trained with {trained} placement options "
                    f"({', '.join(self.meta.get('options', []))}), the scenario has {n_options}"
                )
            obs_space = observation_space(max_gpus, window)
            act_space = spaces.Discrete(1 + window * max_gpus * n_options)
            if self.meta.get("expert_hint"):
                n = int(act_space.n)
                obs_space = spaces.Dict(
                    {**obs_space.spaces, HINT: spaces.Box(0.0, 1.0, (n,), np.float32)}
                )
            cls = POLICY_CLASSES[self.meta["policy"]]
            pol = cls(obs_space, act_space, _dummy_lr, **self.meta.get("policy_kwargs", {}))
            try:
                pol.load_state_dict(self.state)
            except RuntimeError as e:
                raise AgentLoadError(
                    f"agent {self.name}: weights do not fit the policy ({str(e).splitlines()[0]})"
                ) from None
            pol.set_training_mode(False)
            self._policies[key] = pol
        return pol

    def predict(self, obs: Mapping[str, np.ndarray], mask: np.ndarray) -> int:
        """The action for one observation and mask."""
        window = obs["jobs"].shape[0] // len(JOB_FEATURES)
        max_gpus = obs["gpus"].shape[0] // len(GPU_FEATURES)
        n_options = (mask.shape[0] - 1) // (window * max_gpus)
        pol = self.policy_for(max_gpus, window, n_options)
        with th.no_grad():
            t_obs = {k: th.as_tensor(v, dtype=th.float32)[None] for k, v in obs.items()}
            features = pol.extract_features(t_obs)
            logits = pol.mlp_extractor.forward_actor(features)[0].numpy()
        legal = mask.astype(bool)
        if self.meta.get("work_conserving") and legal[1:].any():
            legal[WAIT] = False
        if not legal.any():
            return WAIT
        logits = np.where(legal, logits, -np.inf)
        if self.deterministic:
            return int(np.argmax(logits))
        p = np.exp(logits - logits.max())
        p /= p.sum()
        return int(self._rng.choice(len(p), p=p))


def load_agent(name_or_path: str | os.PathLike[str], deterministic: bool = True) -> RLAgent:
    """A shipped agent by name, or a checkpoint by path; AgentLoadError (one line) if it is
    missing, corrupt or not an agent checkpoint."""
    path = resolve(name_or_path)
    meta, state = read_checkpoint(path)
    name = os.fspath(name_or_path)
    # a shipped name, or the path as given (several "model.zip" files can be compared)
    return RLAgent(meta, state, name=name, deterministic=deterministic)


def ppo_default() -> RLAgent:
    """The shipped ``ppo_default`` agent (entry point of the policy registry)."""
    return load_agent("ppo_default")
