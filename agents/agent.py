"""Trained agents behind the baselines' Policy protocol, and safe checkpoint loading.

A checkpoint is SB3's ``model.zip`` plus a small ``gpu_sharing_agent.json`` member that
:func:`write_metadata` adds (algorithm, policy class, its keyword arguments, the training
scenario's placement options, the env version). :func:`load_agent` reads only that JSON and the
weights (``policy.pth``, loaded with ``torch.load(weights_only=True)``): nothing is unpickled.
The networks are rebuilt for whatever cluster the agent is asked to schedule:

* format 1 (``GpuSharing-v0`` agents, e.g. ``ppo_default``): set-structured over GPUs and jobs,
  so one checkpoint runs on clusters of any size *with the same placement options*;
* format 2 (``GpuSharing-v1`` agents, :mod:`gpu_sharing_gym.agents.option_policy`): options are described by
  their features, so one checkpoint runs on any scenario (any options, GPUs and window).

Names: ``load_agent("ppo_default")`` loads ``agents/pretrained/ppo_default.zip``; anything with
a path separator or ending in ``.zip`` is a path. Nothing is loaded unless named.
"""

from __future__ import annotations

import io
import json
import os
import zipfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces

from gpu_sharing_env.envs.observation import (
    GPU_FEATURES,
    JOB_FEATURES,
    ObservationEncoder,
    observation_space,
)
from gpu_sharing_env.envs.observation_v1 import (
    GPU_FEATURES_V1,
    OPTION_FEATURES,
    PAIR_FEATURES,
    ObservationEncoderV1,
    observation_space_v1,
)
from gpu_sharing_env.sim.codec import WAIT
from gpu_sharing_env.sim.constants import WINDOW_ORDERS
from gpu_sharing_env.sim.view import ClusterView
from gpu_sharing_gym.agents.candidate_policy import (
    RULES_KEY,
    CandidateActorCriticPolicy,
    rule_actions,
)
from gpu_sharing_gym.agents.envs import HINT, make_expert
from gpu_sharing_gym.agents.option_policy import OptionActorCriticPolicy
from gpu_sharing_gym.agents.policy import SetActorCriticPolicy, SetPPOPolicy
from gpu_sharing_gym.plumbing.fileio import atomic_write_bytes

PRETRAINED_DIR = Path(__file__).resolve().parent / "pretrained"
META_NAME = "gpu_sharing_agent.json"
#: Metadata format written for an env version: 1 for ``GpuSharing-v0`` agents, 2 for ``-v1``.
META_FORMATS = {"GpuSharing-v0": 1, "GpuSharing-v1": 2}
META_FORMAT = 1
#: Size-free policy classes a checkpoint may name (nothing else is instantiated), per format.
POLICY_CLASSES: dict[str, type[Any]] = {
    "SetActorCriticPolicy": SetActorCriticPolicy,
    "SetPPOPolicy": SetPPOPolicy,
    "OptionActorCriticPolicy": OptionActorCriticPolicy,
    "CandidateActorCriticPolicy": CandidateActorCriticPolicy,
}
_FORMAT_POLICIES = {
    1: ("SetActorCriticPolicy", "SetPPOPolicy"),
    2: ("OptionActorCriticPolicy", "CandidateActorCriticPolicy"),
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
    """Add (or replace) the agent metadata member of an SB3 checkpoint zip (its format follows
    ``meta["env_id"]``: 1 for ``GpuSharing-v0``, the default, 2 for ``GpuSharing-v1``)."""
    fmt = META_FORMATS.get(str(meta.get("env_id", "GpuSharing-v0")), META_FORMAT)
    text = json.dumps({"format": fmt, **meta}, indent=1)
    rewrite_checkpoint(Path(path), Path(path), {META_NAME: text.encode()})


@contextmanager
def one_thread() -> Iterator[None]:
    """Torch's intra-op threads pinned to one, the caller's count restored after.

    A decision must not depend on the machine's core count. A reduction split across threads
    adds in another order, and where two actions' scores are nearly tied the last bit can pick
    another action. Example: a distilled `pai-busy` candidate scored 10,336 s on seed 2 with two
    threads and 10,878 s with one, in otherwise identical processes. The networks are small, and
    one thread is the faster setting here: `ppo` at 226 GPUs took 2.9 ms a decision against 3.5
    ms with two threads on the 2-core development machine. Training pins one thread too. Saving
    and restoring the count takes ~0.4 us.
    """
    before = th.get_num_threads()
    th.set_num_threads(1)
    try:
        yield
    finally:
        th.set_num_threads(before)


def rewrite_checkpoint(src: Path, dst: Path, members: Mapping[str, bytes]) -> None:
    """Write the checkpoint zip ``src`` to ``dst`` (which may be ``src``) with ``members``
    replaced or added, atomically (:func:`gpu_sharing_gym.plumbing.fileio.atomic_write_bytes`)."""
    with zipfile.ZipFile(src) as z:
        kept = {n: z.read(n) for n in z.namelist() if n not in members}
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for n, data in {**kept, **members}.items():
            z.writestr(n, data)
    atomic_write_bytes(dst, buf.getvalue())


def save_model(model: Any, path: str | os.PathLike[str], meta: Mapping[str, Any]) -> None:
    """``model.save`` with the agent metadata, atomically: written beside ``path`` under a
    temporary name, then renamed over it, so a kill never leaves a half-written zip nor loses
    the previous one."""
    p = Path(path)
    tmp = p.with_name(f".{p.stem}.partial.zip")
    model.save(tmp)
    write_metadata(tmp, meta)
    os.replace(tmp, p)


def _unreadable(path: Path, e: BaseException) -> AgentLoadError:
    reason = str(e).splitlines()[0] if str(e) else type(e).__name__
    return AgentLoadError(f"{path}: corrupt or unreadable checkpoint ({reason})")


def check_checkpoint(path: Path) -> None:
    """AgentLoadError (one line naming the file) unless ``path`` is a whole zip holding an
    agent's metadata and weights: a truncated or damaged file fails here (every member's CRC is
    checked), before anything is read from it. ``gsg evaluate`` and ``gsg train --resume`` both
    check a checkpoint with this."""
    try:
        with zipfile.ZipFile(path) as z:
            names = set(z.namelist())
            if META_NAME not in names or "policy.pth" not in names:
                missing = META_NAME if META_NAME not in names else "policy.pth"
                raise AgentLoadError(
                    f"{path}: not a gpu-sharing-gym agent checkpoint (no {missing} inside; "
                    f"save with gsg train)"
                )
            bad = z.testzip()
    except AgentLoadError:
        raise
    except (zipfile.BadZipFile, OSError, EOFError, RuntimeError, ValueError, KeyError) as e:
        raise _unreadable(path, e) from None
    if bad is not None:
        raise AgentLoadError(f"{path}: corrupt checkpoint ({bad} inside fails its CRC check)")


def read_checkpoint(path: Path) -> tuple[dict[str, Any], dict[str, th.Tensor]]:
    """(metadata, policy state dict) of a checkpoint, without unpickling anything."""
    check_checkpoint(path)
    try:
        with zipfile.ZipFile(path) as z:
            meta = json.loads(z.read(META_NAME))
            state = th.load(io.BytesIO(z.read("policy.pth")), map_location="cpu", weights_only=True)
    except (zipfile.BadZipFile, OSError, EOFError, RuntimeError, ValueError, KeyError) as e:
        raise _unreadable(path, e) from None
    fmt = meta.get("format") if isinstance(meta, dict) else None
    if fmt not in _FORMAT_POLICIES:
        raise AgentLoadError(
            f"{path}: {META_NAME}: unknown format {fmt!r} (known: "
            f"{', '.join(map(str, _FORMAT_POLICIES))})"
        )
    assert isinstance(meta, dict)
    if meta.get("policy") not in _FORMAT_POLICIES[fmt]:
        raise AgentLoadError(
            f"{path}: {META_NAME}: policy {meta.get('policy')!r} is not size-free "
            f"(known: {', '.join(_FORMAT_POLICIES[fmt])}); load it with SB3 instead"
        )
    if meta.get("window_order", "fifo") not in WINDOW_ORDERS:
        raise AgentLoadError(
            f"{path}: {META_NAME}: window_order must be one of {', '.join(WINDOW_ORDERS)} "
            f"(got {meta.get('window_order')!r})"
        )
    if not isinstance(state, dict):
        raise AgentLoadError(f"{path}: policy.pth: not a state dict")
    return meta, state


def _dummy_lr(_: float) -> float:
    return 0.0


class RLAgent:
    """A trained set policy as a :class:`gpu_sharing_gym.baselines.base.Policy`.

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
        self._encoder: ObservationEncoder | ObservationEncoderV1 | None = None
        self._encoder_key: tuple[int, int] | None = None
        self._rng = np.random.default_rng(0)
        self._seed = 0
        self._expert: Any = None
        #: The queue order it was trained under (``GpuSharingEnv``'s ``window_order``): the
        #: runner sets the simulator's to it.
        self.window_order = str(self.meta.get("window_order", "fifo"))
        #: Migration slots of its training env (``GpuSharing-v1``'s ``migration_slots``): the
        #: runner's codec offers it the same running jobs to move.
        self.migration_slots = int(self.meta.get("migration_slots", 0))
        #: Whether it reads the group history and node tables (``job_history=True``), and the
        #: rules whose choices it observes (``candidate_policy.RuleChoices``).
        self.job_history = bool(self.meta.get("job_history", False))
        self._rules: list[Any] = [make_expert(n) for n in self.meta.get("rule_inputs") or []]

    # ------------------------------------------------------------------ Policy protocol
    def reset(self, seed: int) -> None:
        self._rng = np.random.default_rng(seed)
        self._seed = seed
        if self._expert is not None:
            self._expert.reset(seed)
        for r in self._rules:
            r.reset(seed)
        if self._encoder is not None:
            self._encoder.reset()

    def act(self, view: ClusterView, obs: Any, mask: np.ndarray) -> int:
        if obs is None:
            obs = self._encode(view)
        if self.meta.get("expert_hint") and HINT not in obs:
            if self._expert is None:
                self._expert = make_expert(self.meta["expert_hint"])
                self._expert.reset(self._seed)
            hint = np.zeros(mask.shape[0], dtype=np.float32)
            hint[self._expert.act(view, None, mask)] = 1.0
            obs = {**obs, HINT: hint}
        if self._rules and RULES_KEY not in obs:
            obs = {**obs, RULES_KEY: rule_actions(self._rules, view, mask)}
        return self.predict(obs, mask)

    # ------------------------------------------------------------------ helpers
    @property
    def option_agnostic(self) -> bool:
        """Whether the agent reads ``GpuSharing-v1`` observations (runs on any option set)."""
        return int(self.meta.get("format", 1)) >= 2

    def _encode(self, view: ClusterView) -> dict[str, np.ndarray]:
        key = (view.simulator_id, view.n_gpus)
        if self._encoder is None or self._encoder_key != key:
            enc_cls: Any = (
                partial(ObservationEncoderV1, moves=self.migration_slots, history=self.job_history)
                if self.option_agnostic
                else ObservationEncoder
            )
            self._encoder = view.make_encoder(enc_cls, view.n_gpus)
            self._encoder_key = key
        assert self._encoder is not None
        return view.encode(self._encoder)

    def layout(self, obs: Mapping[str, np.ndarray], mask: np.ndarray) -> tuple[int, int, int]:
        """(max_gpus, window, n_options) of an observation and its mask."""
        if self.option_agnostic:
            # (job slots: the window's and any migration slots, one pairs block each)
            max_gpus = obs["gpus"].shape[0] // len(GPU_FEATURES_V1)
            slots = obs["pairs"].shape[0] // (max_gpus * len(PAIR_FEATURES))
            return max_gpus, slots, obs["options"].shape[0] // len(OPTION_FEATURES)
        window = obs["jobs"].shape[0] // len(JOB_FEATURES)
        max_gpus = obs["gpus"].shape[0] // len(GPU_FEATURES)
        return max_gpus, window, (mask.shape[0] - 1) // (window * max_gpus)

    def policy_for(self, max_gpus: int, window: int, n_options: int) -> Any:
        """The policy network for a layout (built once, same weights)."""
        key = (max_gpus, window, n_options)
        pol = self._policies.get(key)
        if pol is None:
            trained = self.meta.get("n_options")
            if self.option_agnostic:
                moves = self.migration_slots
                obs_space = observation_space_v1(
                    max_gpus, window - moves, n_options, moves, history=self.job_history
                )
            elif trained is not None and int(trained) != n_options:
                raise AgentLoadError(
                    f"agent {self.name}: trained with {trained} placement options "
                    f"({', '.join(self.meta.get('options', []))}), the scenario has {n_options}"
                )
            else:
                obs_space = observation_space(max_gpus, window)
            act_space = spaces.Discrete(1 + window * max_gpus * n_options)
            if self.meta.get("expert_hint"):
                n = int(act_space.n)
                obs_space = spaces.Dict(
                    {**obs_space.spaces, HINT: spaces.Box(0.0, 1.0, (n,), np.float32)}
                )
            if self._rules:
                r = spaces.Box(0.0, float(act_space.n), (len(self._rules),), np.float32)
                obs_space = spaces.Dict({**obs_space.spaces, RULES_KEY: r})
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
        """The action for one observation and mask (always a legal one)."""
        pol = self.policy_for(*self.layout(obs, mask))
        legal = mask.astype(bool)
        if self.meta.get("work_conserving") and legal[1:].any():
            legal[WAIT] = False
        if not legal.any():
            return WAIT
        with th.no_grad(), one_thread():
            t_obs = {k: th.as_tensor(v, dtype=th.float32)[None] for k, v in obs.items()}
            if self.option_agnostic:
                # the two-level distribution: its mode, or a sample from it
                dist = pol.get_distribution(t_obs, action_masks=legal[None])
                if self.deterministic:
                    return int(dist.mode()[0])
                p = dist.distribution.probs[0].double().numpy()
                p = np.where(legal, p, 0.0)
                return int(self._rng.choice(len(p), p=p / p.sum()))
            features = pol.extract_features(t_obs)
            logits = pol.mlp_extractor.forward_actor(features)[0].numpy()
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


def ppo() -> RLAgent:
    """The shipped learned agent ``ppo``, option-agnostic (``GpuSharing-v1``: any scenario's
    option set and cluster size); its model card is ``agents/pretrained/ppo.md`` (entry point of
    the policy registry)."""
    return load_agent("ppo")


def ppo_default() -> RLAgent:
    """The shipped ``ppo_default`` agent (entry point of the policy registry)."""
    return load_agent("ppo_default")


def ppo_v1() -> RLAgent:
    """The shipped ``ppo_v1`` agent, option-agnostic (``GpuSharing-v1``): it runs on any
    scenario's option set and cluster size (entry point of the policy registry)."""
    return load_agent("ppo_v1")
