"""SB3 callbacks: simulator metrics, held-out evaluation, checkpoints and a progress bar.

TensorBoard tags (besides SB3's own ``rollout/``, ``train/``, ``time/``):

* ``sim/<metric>``: the schema's metrics (``gpu_sharing_env.evaluation.metrics.METRIC_NAMES``) averaged
  over the training episodes that ended since the last dump.
* ``eval/<metric>``: the agent (deterministic) on the held-out validation seeds;
  ``eval/best_baseline_<metric>`` the best reference baseline on the same seeds (lowest
  ``jct_mean_s`` among those meeting the SLO target); ``eval/occupancy``, now and then, an image
  of the cluster (GPUs x time, coloured by sharing mode) for the first validation seed.
* ``hparams``: the resolved configuration, with ``eval/jct_mean_s`` as the metric.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import shutil
import tempfile
import time
import zipfile
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib.image as mpimg
import numpy as np
import torch as th
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.logger import (
    CSVOutputFormat,
    HParam,
    Image,
    Logger,
    make_output_format,
)
from stable_baselines3.common.vec_env import VecNormalize

from gpu_sharing_env.config import ScenarioConfig
from gpu_sharing_env.envs.gpu_sharing import GpuSharingEnv
from gpu_sharing_env.envs.gpu_sharing_v1 import GpuSharingEnvV1
from gpu_sharing_env.evaluation.metrics import METRIC_NAMES
from gpu_sharing_env.evaluation.occupancy import PlacementRecorder, plot_occupancy
from gpu_sharing_env.evaluation.runner import evaluate
from gpu_sharing_env.registry import make_policy
from gpu_sharing_gym.agents.agent import save_model, write_metadata
from gpu_sharing_gym.agents.config import MASKED_ALGOS
from gpu_sharing_gym.agents.envs import ExpertHint, work_conserving
from gpu_sharing_gym.plumbing.fileio import atomic_write_text
from gpu_sharing_gym.plumbing.progress import progress

#: Metrics logged under ``eval/`` and ``sim/`` (numbers only).
LOGGED = tuple(m for m in METRIC_NAMES if m != "meets_slo")
#: The CSV column that orders ``progress.csv`` rows by training step.
STEP_KEY = "time/total_timesteps"


def next_due(step: int, freq: int) -> int:
    """The first multiple of ``freq`` after ``step``: evaluations and checkpoints happen at
    fixed multiples of their frequency, whatever the run's interruptions."""
    return (step // freq + 1) * freq


class ResumableCSV(CSVOutputFormat):
    """SB3's ``progress.csv`` writer that continues an existing file instead of emptying it.

    On resume at step ``resume_step`` the rows logged after that step (by a run killed after
    its last checkpoint) are dropped, since the resumed run logs those steps again; rows without
    a step (e.g. pretraining) are kept.
    """

    def __init__(self, filename: str, resume_step: int | None = None) -> None:
        path = Path(filename)
        if resume_step is None or not path.is_file() or path.stat().st_size == 0:
            super().__init__(filename)
            return
        with path.open(newline="") as f:
            rows = list(csv.reader(f))
        header, body = rows[0], rows[1:]
        col = header.index(STEP_KEY) if STEP_KEY in header else None

        def keep(row: list[str]) -> bool:
            if col is None or col >= len(row) or not row[col]:
                return True
            try:
                return float(row[col]) <= resume_step
            except ValueError:
                return True

        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows([header, *filter(keep, body)])
        atomic_write_text(path, buf.getvalue())  # a kill here keeps the old file whole
        self.file = path.open("r+")
        self.file.seek(0, os.SEEK_END)
        self.keys = list(header)
        self.separator = ","
        self.quotechar = '"'


def prune_event_files(folder: Path, resume_step: int) -> int:
    """Drop the TensorBoard events after ``resume_step`` from the event files in ``folder``
    (logged by a run killed after its last checkpoint; the resumed run logs those steps again,
    into a new file beside): one point per tag per step. Each file is rewritten atomically.
    Returns the number of events dropped."""
    from tensorboard.backend.event_processing.event_file_loader import RawEventFileLoader
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.summary.writer.record_writer import RecordWriter

    dropped = 0
    for path in sorted(folder.glob("events.out.tfevents.*")):
        if not path.is_file():
            continue
        records = list(RawEventFileLoader(str(path)).Load())
        keep = [r for r in records if Event.FromString(r).step <= resume_step]
        if len(keep) == len(records):
            continue
        dropped += len(records) - len(keep)
        # (a name without "tfevents": TensorBoard would read a leftover as a second file)
        tmp = path.with_name(f".pruning-{os.getpid()}.tmp")
        try:
            with tmp.open("wb") as f:
                writer = RecordWriter(f)
                for r in keep:
                    writer.write(r)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
    return dropped


def make_logger(folder: Path, resume_step: int | None = None) -> Logger:
    """TensorBoard and CSV logging into ``folder``; on resume at ``resume_step``,
    ``progress.csv`` continues and the event files lose what was logged after that step."""
    folder.mkdir(parents=True, exist_ok=True)
    if resume_step is not None:
        prune_event_files(folder, resume_step)
    return Logger(
        folder=str(folder),
        output_formats=[
            make_output_format("tensorboard", str(folder)),
            ResumableCSV(str(folder / "progress.csv"), resume_step),
        ],
    )


def _mean(records: Sequence[Mapping[str, Any]], key: str) -> float:
    vals = [float(r[key]) for r in records if r.get(key) is not None]
    vals = [v for v in vals if math.isfinite(v)]
    return float(np.mean(vals)) if vals else float("nan")


def summarise(records: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Mean of each logged metric over episodes."""
    return {k: _mean(records, k) for k in LOGGED}


def evaluate_model(
    model: BaseAlgorithm,
    algo: str,
    scenario: ScenarioConfig,
    seeds: Sequence[int],
    env_kwargs: Mapping[str, Any] | None = None,
    record_first: bool = False,
    conserving: bool = False,
    hint: str | None = None,
    env_id: str = "GpuSharing-v0",
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """Deterministic episodes of ``model`` on ``seeds``: (metrics per seed, placement record of
    the first seed for the occupancy figure, if asked)."""
    from gpu_sharing_gym.agents.envs import RuleChoices, split_rule_inputs

    kwargs, rules = split_rule_inputs(env_kwargs)
    kwargs["invalid_action"] = "noop"
    env_cls = GpuSharingEnvV1 if env_id == "GpuSharing-v1" else GpuSharingEnv
    base = env_cls(scenario, **kwargs)
    env: Any = ExpertHint(base, hint) if hint else base
    if rules:
        env = RuleChoices(env, rules)
    masked = algo in MASKED_ALGOS
    out: list[dict[str, Any]] = []
    placements: dict[str, Any] | None = None
    for i, seed in enumerate(seeds):
        recorder = PlacementRecorder(base.sim) if record_first and i == 0 else None
        obs, info = env.reset(seed=int(seed))
        done = False
        while not done:
            if masked:
                mask = info["action_mask"]
                action, _ = model.predict(  # type: ignore[call-arg]
                    obs,
                    deterministic=True,
                    action_masks=work_conserving(mask) if conserving else mask,
                )
            else:
                action, _ = model.predict(obs, deterministic=True)
            obs, _, done, _, info = env.step(int(action))
        rec = {"seed": int(seed), **info["metrics"]}
        out.append(rec)
        if recorder is not None and recorder.active:
            placements = {
                "jobs": recorder.jobs(),
                "options": [o.label for o in base.sim.options],
                "gpu_types": list(getattr(base.sim.cluster, "type_name_of", ())),
                "record": {"seed": int(seed)},
            }
            recorder.detach()
    return out, placements


def best_baseline(
    scenario: ScenarioConfig, seeds: Sequence[int], names: Sequence[str]
) -> dict[str, Any]:
    """The reference baselines on ``seeds``: every one's summary and the best one's name."""
    table: dict[str, dict[str, float]] = {}
    for name in names:
        recs = evaluate(make_policy(name), scenario, list(seeds))
        table[name] = summarise(recs)
    ok = [n for n, s in table.items() if s["slo_attainment"] >= scenario.slo_target - 1e-12]
    pool = ok or list(table)
    best = min(pool, key=lambda n: table[n]["jct_mean_s"]) if pool else None
    return {"best": best, "baselines": table, "seeds": list(seeds)}


def occupancy_image(scenario: str, policy: str, placements: Mapping[str, Any]) -> np.ndarray:
    """The leaderboard's occupancy chart as an HWC uint8 array."""
    png = plot_occupancy(scenario, policy, placements)
    img = mpimg.imread(io.BytesIO(png), format="png")
    return (np.asarray(img)[..., :3] * 255).astype(np.uint8)


class SimMetricsCallback(BaseCallback):
    """Logs ``sim/<metric>`` from the ``info["metrics"]`` of training episodes that ended.

    Values are recorded at the end of each rollout (off-policy algorithms too: SB3 ends a
    "rollout" every ``train_freq`` steps) as the mean over every episode that ended since the
    algorithm's last dump, so each episode counts in exactly one point and the algorithm's own
    dump writes it, at its step (one point per tag and step).
    """

    def __init__(self) -> None:
        super().__init__()
        self.buffer: list[dict[str, Any]] = []
        self.pending: list[dict[str, Any]] = []
        self.episodes = 0

    def _on_step(self) -> bool:
        for info in self.locals.get("infos", ()):
            m = info.get("metrics")
            if m is not None:
                self.buffer.append(m)
                self.episodes += 1
        return True

    def _on_rollout_end(self) -> None:
        self._flush()

    def _flush(self) -> None:
        if not self.buffer:
            return
        if "sim/episodes" not in self.logger.name_to_value:
            self.pending = []  # what was recorded before has been dumped
        self.pending += self.buffer
        self.buffer.clear()
        for k, v in summarise(self.pending).items():
            self.logger.record(f"sim/{k}", v)
        self.logger.record("sim/episodes", self.episodes)


class SloMultiplier(BaseCallback):
    """The reward's SLO weight as a Lagrange multiplier on the mean SLO attainment (RCPO:
    Tessler, Mankowitz and Mannor, "Reward Constrained Policy Optimization", ICLR 2019).

    The leaderboard ranks by mean JCT among policies whose attainment, *averaged over seeds*,
    meets the scenario's target. A per-episode hinge (the ``jct`` reward's default) asks every
    episode to meet it, so an agent that cannot tell a heavy seed from a light one at its
    first decisions protects the services everywhere. With ``slo_form: linear`` every request
    is priced at λ; after each rollout ``λ ← clip(λ + lr · (target + margin − A), 0, max)``,
    ``A`` the mean attainment of the latest ``window`` training episodes, and the new λ is set
    in every env (``set_slo_weight``). Logged as ``train/slo_weight`` and
    ``train/slo_attainment_window``. Every checkpoint keeps the weight (its ``state``), and a
    resumed run goes on from it; the window of attainments starts empty again.

    ``targets`` (per training env, in the vec env's order; the training script passes each
    env's scenario's): an episode is held to its own scenario's target, so with several
    scenarios the gap is the mean over the window of ``target_i + margin − A_i``. Without
    it every episode is held to ``target``.
    """

    def __init__(
        self, target: float, weight: float, lr: float, margin: float, max_weight: float,
        window: int, targets: Sequence[float] | None = None,
    ) -> None:  # fmt: skip
        super().__init__()
        self.target = float(target)
        self.targets = None if targets is None else [float(t) for t in targets]
        self.weight = float(weight)
        self.lr = float(lr)
        self.margin = float(margin)
        self.max_weight = float(max_weight)
        #: (attainment, its episode's target) of the latest training episodes
        self.recent: deque[tuple[float, float]] = deque(maxlen=int(window))

    def _on_training_start(self) -> None:
        self.training_env.env_method("set_slo_weight", self.weight)

    def _on_step(self) -> bool:
        for i, info in enumerate(self.locals.get("infos", ())):
            m = info.get("metrics")
            if m is not None and m.get("slo_attainment") is not None:
                target = self.target if self.targets is None else self.targets[i]
                self.recent.append((float(m["slo_attainment"]), target))
        return True

    def _on_rollout_end(self) -> None:
        if not self.recent:
            return
        att = sum(a for a, _ in self.recent) / len(self.recent)
        targets = {t for _, t in self.recent}
        # (one target: as itself, so a single scenario's run gives the bits it always gave)
        target = (
            targets.pop()
            if len(targets) == 1
            else sum(t for _, t in self.recent) / len(self.recent)
        )
        step = self.lr * (target + self.margin - att)
        self.weight = min(self.max_weight, max(0.0, self.weight + step))
        self.training_env.env_method("set_slo_weight", self.weight)
        self.logger.record("train/slo_weight", self.weight)
        self.logger.record("train/slo_attainment_window", att)


def dump_only(logger: Logger, prefix: str, step: int) -> None:
    """Dump the recorded values whose key starts with ``prefix`` (and the step column) at
    ``step``, keeping every other pending value for the algorithm's own dump."""
    stores: tuple[dict[str, Any], ...] = (
        logger.name_to_value,
        logger.name_to_count,
        logger.name_to_excluded,
    )
    others = [k for k in logger.name_to_value if not k.startswith(prefix) and k != STEP_KEY]
    held = [{k: store.pop(k) for k in others if k in store} for store in stores]
    logger.dump(step)
    for store, part in zip(stores, held):
        store.update(part)


class EvalCallback(BaseCallback):
    """Every ``eval_freq`` timesteps: the agent on the validation seeds, logged under ``eval/``
    beside the best baseline; keeps ``best_model.zip`` and the history in ``history``."""

    def __init__(
        self,
        algo: str,
        scenario: ScenarioConfig,
        seeds: Sequence[int],
        env_kwargs: Mapping[str, Any],
        reference: Mapping[str, Any],
        eval_freq: int,
        out_dir: Path,
        meta: Mapping[str, Any],
        figure_every: int = 1,
        history: list[dict[str, Any]] | None = None,
        on_eval: Callable[[list[dict[str, Any]]], None] | None = None,
        conserving: bool = False,
        hint: str | None = None,
        env_id: str = "GpuSharing-v0",
        best_jct: float = math.inf,
        clock: Callable[[], float] | None = None,
    ) -> None:
        super().__init__()
        #: The run's wall-clock seconds so far (recorded with each evaluation), if given.
        self.clock = clock
        self.conserving = conserving
        self.hint = hint
        self.env_id = env_id
        self.algo, self.scenario, self.seeds = algo, scenario, list(seeds)
        self.env_kwargs = dict(env_kwargs)
        self.reference = reference
        self.eval_freq = eval_freq
        self.out_dir = out_dir
        self.meta = dict(meta)
        self.figure_every = figure_every
        self.history = history if history is not None else []
        self.on_eval = on_eval
        self.best_jct = min(
            best_jct,
            min((h["jct_mean_s"] for h in self.history if h.get("meets_slo")), default=math.inf),
        )
        #: Per-seed records of the latest evaluation.
        self.last_records: list[dict[str, Any]] = []
        self._due = eval_freq

    def _on_training_start(self) -> None:
        # Fixed multiples of eval_freq: a resumed run evaluates where an uninterrupted one would.
        # (one missed by an interruption runs at the first step of the resumed run)
        last = int(self.history[-1]["timesteps"]) if self.history else 0
        self._due = next_due(last, self.eval_freq)

    def _on_step(self) -> bool:
        if self.num_timesteps >= self._due:
            self._due = next_due(self.num_timesteps, self.eval_freq)
            self.run()
        return True

    def run(self) -> dict[str, Any]:
        n_eval = len(self.history) + 1
        figure = self.figure_every > 0 and (n_eval - 1) % self.figure_every == 0
        recs, placements = evaluate_model(
            self.model,
            self.algo,
            self.scenario,
            self.seeds,
            self.env_kwargs,
            record_first=figure,
            conserving=self.conserving,
            hint=self.hint,
            env_id=self.env_id,
        )
        self.last_records = recs
        s = summarise(recs)
        meets = s["slo_attainment"] >= self.scenario.slo_target - 1e-12
        for k, v in s.items():
            self.logger.record(f"eval/{k}", v)
        best = self.reference.get("best")
        if best is not None:
            for k, v in self.reference["baselines"][best].items():
                self.logger.record(f"eval/best_baseline_{k}", v)
        if placements is not None:
            img = occupancy_image(self.scenario.name, "agent", placements)
            self.logger.record("eval/occupancy", Image(img, "HWC"), exclude=("stdout", "csv"))
        # the step column of progress.csv (TensorBoard has the step itself)
        self.logger.record(STEP_KEY, int(self.num_timesteps), exclude="tensorboard")
        entry: dict[str, Any] = {
            "timesteps": int(self.num_timesteps),
            "meets_slo": bool(meets),
            **s,
        }
        # per seed, in ``seeds`` order: how much each seed moved the mean
        entry["jct_per_seed"] = [r.get("jct_mean_s") for r in recs]
        if self.clock is not None:
            entry["wall_s"] = round(self.clock(), 1)
        self.history.append(entry)
        if meets and s["jct_mean_s"] < self.best_jct:
            self.best_jct = s["jct_mean_s"]
            path = self.out_dir / "best_model.zip"
            save_model(self.model, path, {**self.meta, "timesteps": int(self.num_timesteps)})
        # eval/ values only: training's pending values (train/, sim/) stay for the
        # algorithm's own dump at its own step
        dump_only(self.logger, "eval/", self.num_timesteps)
        if self.on_eval is not None:
            self.on_eval(self.history)
        return entry


#: The pointer to the latest complete checkpoint, in ``checkpoints/``.
CHECKPOINT_POINTER = "last.json"
#: The manifest inside a checkpoint directory, written last: a directory without it was never
#: completed (its files are never read).
CHECKPOINT_MANIFEST = "checkpoint.json"


@dataclass(frozen=True)
class Checkpoint:
    """A complete checkpoint: ``model.zip`` and, beside it, whatever else the run needs to go
    on from the same step (``vecnormalize.pkl``, ``replay_buffer.pkl``)."""

    model: Path
    timesteps: int

    @property
    def vecnormalize(self) -> Path:
        return self.model.parent / "vecnormalize.pkl"

    @property
    def replay_buffer(self) -> Path:
        return self.model.parent / "replay_buffer.pkl"

    def state(self) -> dict[str, Any]:
        """Training state saved beside the model (``CheckpointCallback.state``), e.g. the SLO
        multiplier's weight; empty for checkpoints without any."""
        data = _manifest(self.model.parent / CHECKPOINT_MANIFEST) or {}
        state = data.get("state")
        return dict(state) if isinstance(state, dict) else {}


def _manifest(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
        int(data["timesteps"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return data if isinstance(data, dict) else None


def latest_checkpoint(ckpt_dir: Path) -> Checkpoint | None:
    """The latest complete checkpoint in ``ckpt_dir`` (``checkpoints/``), None if none.

    ``last.json`` names it; without that pointer (a kill between a checkpoint's rename and its
    pointer), the complete ``step_*`` directory with the most timesteps. Runs from before
    checkpoint directories (``last.zip`` with its files beside it) still resume.
    """
    found: list[tuple[int, Path]] = []
    pointer = _manifest(ckpt_dir / CHECKPOINT_POINTER)
    if pointer is not None and isinstance(pointer.get("dir"), str):
        d = ckpt_dir / pointer["dir"]
        own = _manifest(d / CHECKPOINT_MANIFEST)
        if own is not None and (d / "model.zip").is_file():
            return Checkpoint(d / "model.zip", int(own["timesteps"]))
    for d in ckpt_dir.glob("step_*"):
        own = _manifest(d / CHECKPOINT_MANIFEST)
        if own is not None and (d / "model.zip").is_file():
            found.append((int(own["timesteps"]), d))
    if found:
        steps, d = max(found)
        return Checkpoint(d / "model.zip", steps)
    legacy = ckpt_dir / "last.zip"
    if legacy.is_file():
        if pointer is not None:
            return Checkpoint(legacy, int(pointer["timesteps"]))
        with zipfile.ZipFile(legacy) as z:
            meta = json.loads(z.read("gpu_sharing_agent.json"))
        return Checkpoint(legacy, int(meta.get("timesteps", 0)))
    return None


class CheckpointCallback(BaseCallback):
    """Saves a checkpoint at every multiple of ``freq`` timesteps: ``checkpoints/step_<N>-<id>/``
    holds ``model.zip``, ``vecnormalize.pkl`` (``VecNormalize``'s statistics), off-policy
    algorithms' ``replay_buffer.pkl`` and ``checkpoint.json``; ``checkpoints/last.json`` points
    to the latest one.

    All or nothing: the files are written into a temporary directory beside, which one rename
    makes a checkpoint; the pointer is then replaced atomically and older checkpoints removed. A
    kill at any moment leaves the previous checkpoint or the new one, never a model beside
    statistics from another step (:func:`latest_checkpoint` reads only complete ones).
    """

    def __init__(
        self, out_dir: Path, freq: int, meta: Mapping[str, Any], keep_models: bool = False
    ) -> None:
        super().__init__()
        self.dir = out_dir / "checkpoints"
        #: Where every checkpoint's model is kept as ``step_<N>.zip`` (``keep_models``), or None.
        self.models = out_dir / "models" if keep_models else None
        self.freq = freq
        self.meta = dict(meta)
        self._due = freq
        #: Returns training state to keep with each checkpoint (``checkpoint.json``'s
        #: ``state``; :meth:`Checkpoint.state` reads it back on ``--resume``).
        self.state: Callable[[], dict[str, Any]] | None = None

    def _on_training_start(self) -> None:
        self._due = next_due(self.num_timesteps, self.freq)

    def _on_step(self) -> bool:
        if self.num_timesteps >= self._due:
            self._due = next_due(self.num_timesteps, self.freq)
            self.save()
        return True

    def save(self) -> Path:
        """Write a checkpoint of the model now; returns its directory."""
        self.dir.mkdir(parents=True, exist_ok=True)
        steps = int(self.model.num_timesteps)
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=self.dir))
        tmp.chmod(0o755)  # mkdtemp makes it private
        self.model.save(tmp / "model.zip")
        write_metadata(tmp / "model.zip", {**self.meta, "timesteps": steps})
        if hasattr(self.model, "save_replay_buffer"):
            self.model.save_replay_buffer(tmp / "replay_buffer.pkl")
        norm = self.model.get_vec_normalize_env()
        if isinstance(norm, VecNormalize):
            norm.save(str(tmp / "vecnormalize.pkl"))
        files = sorted(f.name for f in tmp.iterdir())
        record: dict[str, Any] = {"timesteps": steps, "files": files}
        if self.state is not None:
            record["state"] = self.state()
        manifest = json.dumps(record) + "\n"
        atomic_write_text(tmp / CHECKPOINT_MANIFEST, manifest)
        final = self.dir / f"step_{steps:010d}-{tmp.name.removeprefix('.tmp-')}"
        os.rename(tmp, final)
        if self.models is not None:
            keep_model(final / "model.zip", self.models / f"step_{steps:010d}.zip")
        atomic_write_text(
            self.dir / CHECKPOINT_POINTER,
            json.dumps({"timesteps": steps, "dir": final.name, "files": files}) + "\n",
        )
        for old in self.dir.iterdir():  # older checkpoints, unfinished ones, the old layout
            if old == final or old.name == CHECKPOINT_POINTER:
                continue
            if old.is_dir():
                shutil.rmtree(old, ignore_errors=True)
            elif old.name in ("last.zip", "vecnormalize.pkl", "replay_buffer.pkl"):
                old.unlink(missing_ok=True)
        return final


def keep_model(src: Path, dst: Path) -> None:
    """``src`` as ``dst`` for good: a hard link where the file system allows one, else a copy;
    either way under a temporary name first, so ``dst`` is whole or absent."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(f".{dst.name}.partial")
    tmp.unlink(missing_ok=True)
    try:
        os.link(src, tmp)
    except OSError:
        shutil.copyfile(src, tmp)
    os.replace(tmp, dst)


class TorchThreads(BaseCallback):
    """One torch thread while collecting rollouts, ``update`` threads while PPO updates the
    policy (``update_threads`` in a recipe), and the count from before after learning. A
    rollout's forwards are batches of a few observations, which a second thread slows; the
    update's minibatches gain from it."""

    def __init__(self, update: int) -> None:
        super().__init__()
        self.update = update
        self._before = 1

    def _on_training_start(self) -> None:
        self._before = th.get_num_threads()

    def _on_rollout_start(self) -> None:
        th.set_num_threads(1)

    def _on_rollout_end(self) -> None:
        th.set_num_threads(self.update)

    def _on_training_end(self) -> None:
        th.set_num_threads(self._before)

    def _on_step(self) -> bool:
        return True


class WallClockLimit(BaseCallback):
    """Stops learning once ``seconds`` of wall-clock time have passed since training started
    (``gsg train --max-minutes``): the learning-curve comparisons give each recipe the same
    wall-clock, not the same steps."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds
        self._deadline = math.inf

    def _on_training_start(self) -> None:
        self._deadline = time.perf_counter() + self.seconds

    def _on_step(self) -> bool:
        return time.perf_counter() < self._deadline


class ProgressBar(BaseCallback):
    """Progress over the run's total timesteps (continues across resumes): a tqdm bar on a
    terminal, a plain line every 30 s elsewhere (:func:`gpu_sharing_gym.plumbing.progress.progress`);
    ``disable`` (``--quiet``): none."""

    def __init__(self, total: int, disable: bool | None = None) -> None:
        super().__init__()
        self.total = total
        self.disable = bool(disable)
        self.bar: Any = None

    def _on_training_start(self) -> None:
        self.bar = progress(
            self.total, "train", "step", initial=self.num_timesteps, disable=self.disable
        )

    def _on_step(self) -> bool:
        if self.bar is not None:
            self.bar.n = min(self.total, self.num_timesteps)
            self.bar.refresh()
        return True

    def _on_training_end(self) -> None:
        if self.bar is not None:
            self.bar.close()


def log_hparams(logger: Any, resolved: Mapping[str, Any]) -> None:
    """Record the resolved configuration as TensorBoard hparams (scalars and strings only)."""
    flat: dict[str, Any] = {}

    def walk(prefix: str, v: Any) -> None:
        if isinstance(v, Mapping):
            for k, x in v.items():
                walk(f"{prefix}.{k}" if prefix else str(k), x)
        elif isinstance(v, bool | int | float | str):
            flat[prefix] = v
        elif v is not None:
            flat[prefix] = str(v)

    walk("", resolved)
    metrics = {"eval/jct_mean_s": 0.0, "eval/slo_attainment": 0.0, "sim/jct_mean_s": 0.0}
    logger.record("hparams", HParam(flat, metrics), exclude=("stdout", "log", "json", "csv"))
