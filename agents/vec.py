"""Training envs split over two processes: half stepped here, half in one worker, at once.

On a two-core machine SB3's ``SubprocVecEnv`` (one process per env) runs eight processes on two
cores and pickles every observation, while ``DummyVecEnv`` leaves the second core idle during
rollouts. :class:`TwoProcessVecEnv` keeps one worker process holding the second half of the envs
as a ``DummyVecEnv``: a step sends it that half's actions, steps the first half here meanwhile,
then collects the worker's observations. The worker sends its envs' action masks with every
observation, so MaskablePPO's ``env_method("action_masks")`` (once a step) needs no second
round trip. Each env gets the seed it would get in ``DummyVecEnv`` (``seed + index``), so the
episodes are the same as in-process (tests/test_fast_loop.py).
"""

from __future__ import annotations

import multiprocessing as mp
import traceback
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv
from stable_baselines3.common.vec_env.base_vec_env import (
    CloudpickleWrapper,
    VecEnvIndices,
    VecEnvObs,
    VecEnvStepReturn,
)

#: MaskablePPO's mask method (sb3_contrib.common.maskable.utils.EXPECTED_METHOD_NAME).
MASKS = "action_masks"


def _masks(venv: DummyVecEnv) -> np.ndarray:
    return np.stack(venv.env_method(MASKS))


def _answer(venv: DummyVecEnv, cmd: str, data: Any) -> Any:
    """The worker's answer to one command."""
    if cmd == "step":
        obs, rew, done, infos = venv.step(data)
        return obs, rew, done, infos, _masks(venv)
    if cmd == "reset":
        seed, options = data
        if seed is not None:
            venv.seed(seed)
        venv.set_options(options)
        obs = venv.reset()
        return obs, list(venv.reset_infos), _masks(venv)
    if cmd == "env_method":
        name, args, kwargs, indices = data
        return venv.env_method(name, *args, indices=indices, **kwargs)
    if cmd == "call":
        fn, args = data
        return fn(*args)
    if cmd == "has_attr":
        return venv.has_attr(data)
    if cmd == "get_attr":
        return venv.get_attr(*data)
    if cmd == "set_attr":
        return venv.set_attr(*data)
    if cmd == "env_is_wrapped":
        return venv.env_is_wrapped(*data)
    raise ValueError(f"unknown command {cmd!r}")


def _worker(conn: Any, parent: Any, fns: CloudpickleWrapper) -> None:
    """The worker's loop: a ``DummyVecEnv`` of its envs, answering one command at a time with
    ``(True, answer)``, or ``(False, traceback)`` when the command raised (the training process
    raises it there, so an env's error reads as it would in process)."""
    parent.close()
    venv: DummyVecEnv | None = None
    failed = None
    try:
        venv = DummyVecEnv(fns.var)
    except Exception:  # the envs could not be built: every command answers with why
        failed = traceback.format_exc()
    try:
        while True:
            cmd, data = conn.recv()
            if cmd == "close":
                break
            try:
                if venv is None:
                    raise RuntimeError(f"the worker's envs could not be built:\n{failed}")
                reply = (True, _answer(venv, cmd, data))
            except Exception:  # any env error goes back to the trainer
                reply = (False, traceback.format_exc())
            conn.send(reply)
    except (EOFError, KeyboardInterrupt):  # the parent went away, or the same Ctrl-C
        pass
    if venv is not None:
        venv.close()
    conn.close()


class WorkerError(RuntimeError):
    """A command raised in the worker process; the message ends with its traceback."""


def _concat(a: VecEnvObs, b: VecEnvObs) -> VecEnvObs:
    if isinstance(a, dict):
        assert isinstance(b, dict)
        return {k: np.concatenate([a[k], b[k]]) for k in a}
    assert isinstance(a, np.ndarray) and isinstance(b, np.ndarray)
    return np.concatenate([a, b])


class TwoProcessVecEnv(VecEnv):
    """``env_fns``: the first ``n_local`` (default: half, rounded up) stepped in this process,
    the rest in one worker process (``spawn``), the two halves at the same time."""

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env[Any, Any]]],
                 n_local: int | None = None) -> None:  # fmt: skip
        n = len(env_fns)
        if n < 2:
            raise ValueError("TwoProcessVecEnv needs at least two envs")
        self.n_local = (n + 1) // 2 if n_local is None else int(n_local)
        if not 1 <= self.n_local < n:
            raise ValueError(f"n_local must be in [1, {n - 1}] (got {self.n_local})")
        self.local = DummyVecEnv(list(env_fns[: self.n_local]))
        ctx = mp.get_context("spawn")
        self._conn, work = ctx.Pipe()
        fns = CloudpickleWrapper(list(env_fns[self.n_local :]))
        self._proc = ctx.Process(target=_worker, args=(work, self._conn, fns), daemon=True)
        self._proc.start()
        work.close()
        self._remote_masks: np.ndarray | None = None
        self._actions: np.ndarray | None = None
        self.closed = False
        try:  # VecEnv's constructor reads an attribute of every env, the worker's included
            super().__init__(n, self.local.observation_space, self.local.action_space)
        except BaseException:
            self.close()
            raise

    # -- stepping ------------------------------------------------------------------------
    def step_async(self, actions: np.ndarray) -> None:
        self._actions = np.asarray(actions)
        self._conn.send(("step", self._actions[self.n_local :]))

    def step_wait(self) -> VecEnvStepReturn:
        assert self._actions is not None
        obs, rew, done, infos = self.local.step(self._actions[: self.n_local])
        r_obs, r_rew, r_done, r_infos, self._remote_masks = self._recv()
        self._actions = None
        return (
            _concat(obs, r_obs),
            np.concatenate([rew, r_rew]),
            np.concatenate([done, r_done]),
            list(infos) + list(r_infos),
        )

    def reset(self) -> VecEnvObs:
        k = self.n_local
        seed0 = self._seeds[0]
        options = list(self._options)
        self._conn.send(("reset", (None if seed0 is None else seed0 + k, options[k:])))
        if seed0 is not None:
            self.local.seed(seed0)
        self.local.set_options(options[:k])
        obs = self.local.reset()
        r_obs, r_infos, self._remote_masks = self._recv()
        self.reset_infos = list(self.local.reset_infos) + list(r_infos)
        self._reset_seeds()
        self._reset_options()
        return _concat(obs, r_obs)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.local.close()
        try:
            self._conn.send(("close", None))
            self._proc.join(timeout=30)
        except (BrokenPipeError, EOFError):
            pass
        if self._proc.is_alive():
            self._proc.terminate()

    # -- per-env access ------------------------------------------------------------------
    def _split(self, indices: VecEnvIndices) -> tuple[list[int], list[int]]:
        """``indices`` as (this process's envs, the worker's envs, numbered in the worker)."""
        idx = list(self._get_indices(indices))
        k = self.n_local
        return [i for i in idx if i < k], [i - k for i in idx if i >= k]

    def _recv(self) -> Any:
        ok, answer = self._conn.recv()
        if not ok:
            raise WorkerError(f"in the worker process of TwoProcessVecEnv:\n{answer}")
        return answer

    def _ask(self, cmd: str, data: Any) -> Any:
        self._conn.send((cmd, data))
        return self._recv()

    def env_method(self, method_name: str, *method_args: Any, indices: VecEnvIndices = None,
                   **method_kwargs: Any) -> list[Any]:  # fmt: skip
        here, there = self._split(indices)
        out = []
        if here:
            out = self.local.env_method(method_name, *method_args, indices=here, **method_kwargs)
        if not there:
            return out
        cached = self._remote_masks
        if method_name == MASKS and not (method_args or method_kwargs) and cached is not None:
            return out + [cached[j] for j in there]
        self._remote_masks = None  # the method may change the envs' state
        return out + list(self._ask("env_method", (method_name, method_args, method_kwargs, there)))

    def call_in_worker(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` run in the worker process (``fn`` a module-level function): for state
        kept per process, such as a cache's counters."""
        return self._ask("call", (fn, args))

    def has_attr(self, attr_name: str) -> bool:
        # VecEnv's default reads the attribute from every env: a bound method from the worker
        # would come back pickled with its whole env (MaskablePPO asks once a rollout)
        return bool(self.local.has_attr(attr_name) and self._ask("has_attr", attr_name))

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        here, there = self._split(indices)
        out = self.local.get_attr(attr_name, here) if here else []
        return out + (list(self._ask("get_attr", (attr_name, there))) if there else [])

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        here, there = self._split(indices)
        if here:
            self.local.set_attr(attr_name, value, here)
        if there:
            self._remote_masks = None
            self._ask("set_attr", (attr_name, value, there))

    def env_is_wrapped(self, wrapper_class: type[gym.Wrapper[Any, Any, Any, Any]],
                       indices: VecEnvIndices = None) -> list[bool]:  # fmt: skip
        here, there = self._split(indices)
        out = self.local.env_is_wrapped(wrapper_class, here) if here else []
        return out + (list(self._ask("env_is_wrapped", (wrapper_class, there))) if there else [])

    def get_images(self) -> Sequence[np.ndarray | None]:
        raise NotImplementedError("TwoProcessVecEnv does not render")

    def __del__(self) -> None:
        if not getattr(self, "closed", True):
            self.close()
