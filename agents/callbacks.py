"""SB3 callbacks: simulator metrics, held-out evaluation, checkpoints and a progress bar.

TensorBoard tags (besides SB3's own ``rollout/``, ``train/``, ``time/``):

* ``sim/<metric>``: the schema's metrics (``gpu_sharing_env.metrics.METRIC_NAMES``) averaged
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
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib.image as mpimg
import numpy as np
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
from tqdm import tqdm

from gpu_sharing_env.config import ScenarioConfig
from gpu_sharing_env.envs.gpu_sharing import GpuSharingEnv
from gpu_sharing_env.envs.gpu_sharing_v1 import GpuSharingEnvV1
from gpu_sharing_env.metrics import METRIC_NAMES
from gpu_sharing_env.occupancy import PlacementRecorder, plot_occupancy
from gpu_sharing_env.registry import make_policy
from gpu_sharing_env.runner import evaluate
from gpu_sharing_gym.agents.agent import write_metadata
from gpu_sharing_gym.agents.config import MASKED_ALGOS
from gpu_sharing_gym.agents.envs import ExpertHint, work_conserving

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

        with path.open("w", newline="") as f:
            csv.writer(f, lineterminator="\n").writerows([header, *filter(keep, body)])
        self.file = path.open("r+")
        self.file.seek(0, os.SEEK_END)
        self.keys = list(header)
        self.separator = ","
        self.quotechar = '"'


def make_logger(folder: Path, resume_step: int | None = None) -> Logger:
    """TensorBoard and CSV logging into ``folder``; ``progress.csv`` continues on resume."""
    folder.mkdir(parents=True, exist_ok=True)
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
    kwargs = dict(env_kwargs or {})
    kwargs["invalid_action"] = "noop"
    env_cls = GpuSharingEnvV1 if env_id == "GpuSharing-v1" else GpuSharingEnv
    base = env_cls(scenario, **kwargs)
    env: Any = ExpertHint(base, hint) if hint else base
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
    """Logs ``sim/<metric>`` from the ``info["metrics"]`` of training episodes that ended."""

    def __init__(self) -> None:
        super().__init__()
        self.buffer: list[dict[str, Any]] = []
        self.episodes = 0

    def _on_step(self) -> bool:
        for info in self.locals.get("infos", ()):
            m = info.get("metrics")
            if m is not None:
                self.buffer.append(m)
                self.episodes += 1
        # off-policy algorithms have no rollout end: flush every few episodes
        if len(self.buffer) >= 8:
            self._flush()
        return True

    def _on_rollout_end(self) -> None:
        self._flush()

    def _flush(self) -> None:
        if not self.buffer:
            return
        for k, v in summarise(self.buffer).items():
            self.logger.record(f"sim/{k}", v)
        self.logger.record("sim/episodes", self.episodes)
        self.buffer.clear()


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
    ) -> None:
        super().__init__()
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
        self.logger.record(STEP_KEY, int(self.num_timesteps))
        entry = {"timesteps": int(self.num_timesteps), "meets_slo": bool(meets), **s}
        self.history.append(entry)
        if meets and s["jct_mean_s"] < self.best_jct:
            self.best_jct = s["jct_mean_s"]
            path = self.out_dir / "best_model.zip"
            self.model.save(path)
            write_metadata(path, {**self.meta, "timesteps": int(self.num_timesteps)})
        self.logger.dump(self.num_timesteps)
        if self.on_eval is not None:
            self.on_eval(self.history)
        return entry


class CheckpointCallback(BaseCallback):
    """Saves ``checkpoints/last.zip`` (atomically) at every multiple of ``freq`` timesteps;
    off-policy algorithms also save their replay buffer, ``VecNormalize`` its statistics."""

    def __init__(self, out_dir: Path, freq: int, meta: Mapping[str, Any]) -> None:
        super().__init__()
        self.dir = out_dir / "checkpoints"
        self.freq = freq
        self.meta = dict(meta)
        self._due = freq

    def _on_training_start(self) -> None:
        self._due = next_due(self.num_timesteps, self.freq)

    def _on_step(self) -> bool:
        if self.num_timesteps >= self._due:
            self._due = next_due(self.num_timesteps, self.freq)
            self.save()
        return True

    def save(self) -> Path:
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.dir / "last.tmp.zip"
        self.model.save(tmp)
        write_metadata(tmp, {**self.meta, "timesteps": int(self.model.num_timesteps)})
        if hasattr(self.model, "save_replay_buffer"):
            self.model.save_replay_buffer(self.dir / "replay_buffer.pkl")
        norm = self.model.get_vec_normalize_env()
        if isinstance(norm, VecNormalize):
            norm.save(str(self.dir / "vecnormalize.tmp.pkl"))
            os.replace(self.dir / "vecnormalize.tmp.pkl", self.dir / "vecnormalize.pkl")
        os.replace(tmp, self.dir / "last.zip")
        (self.dir / "last.json").write_text(
            json.dumps({"timesteps": int(self.model.num_timesteps)}) + "\n"
        )
        return self.dir / "last.zip"


class ProgressBar(BaseCallback):
    """A tqdm bar over the run's total timesteps (continues across resumes)."""

    def __init__(self, total: int, disable: bool | None = None) -> None:
        super().__init__()
        self.total = total
        self.disable = disable
        self.bar: Any = None

    def _on_training_start(self) -> None:
        self.bar = tqdm(
            total=self.total,
            initial=self.num_timesteps,
            unit="step",
            desc="train",
            disable=self.disable,
            dynamic_ncols=True,
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
