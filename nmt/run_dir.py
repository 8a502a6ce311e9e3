"""The run directory: the one place that names its files, prepares it for training, loads a trained model from
it and keeps its metrics.

```
RUN_DIR/config.yaml  spm.model  best.pt  last.pt  averaged.pt  metrics.jsonl  report.json  curves.png
        checkpoints/step<N>.pt  eval/  attention/  tensorboard/
```
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from nmt.checkpoint import check_training_state, load_checkpoint, same_vocabulary
from nmt.config import Config, ConfigError, with_absolute_paths
from nmt.config_file import load_config
from nmt.data.tokenizer import Tokenizers, load_tokenizers
from nmt.errors import UserError
from nmt.files import atomic_write_text
from nmt.models import build_model
from nmt.models.base import Seq2Seq

CHECKPOINTS = ("best", "last", "averaged")


@dataclass
class Run:
    """Everything a trained run directory provides: its config, tokenizers and model."""

    directory: RunDir
    cfg: Config
    tokenizers: Tokenizers
    model: Seq2Seq
    checkpoint: dict[str, Any]
    checkpoint_path: Path

    @property
    def checkpoint_name(self) -> str:
        """'best', 'last' or 'averaged'."""
        return self.checkpoint_path.stem


@dataclass(frozen=True)
class RunDir:
    """A run directory and the paths of everything in it."""

    path: Path

    def __str__(self) -> str:
        return str(self.path)

    # --- paths ---------------------------------------------------------------------------------------------

    @property
    def config(self) -> Path:
        return self.path / "config.yaml"

    @property
    def metrics(self) -> Path:
        return self.path / "metrics.jsonl"

    @property
    def report(self) -> Path:
        return self.path / "report.json"

    @property
    def curves(self) -> Path:
        return self.path / "curves.png"

    @property
    def snapshot_dir(self) -> Path:
        return self.path / "checkpoints"

    @property
    def eval_dir(self) -> Path:
        return self.path / "eval"

    @property
    def attention_dir(self) -> Path:
        return self.path / "attention"

    @property
    def tensorboard(self) -> Path:
        return self.path / "tensorboard"

    @property
    def lock_file(self) -> Path:
        return self.path / ".lock"

    def checkpoint(self, name: str) -> Path:
        """best.pt, last.pt or averaged.pt."""
        return self.path / f"{name}.pt"

    def snapshot(self, step: int) -> Path:
        return self.snapshot_dir / f"step{step}.pt"

    def snapshots(self) -> list[Path]:
        """The kept per-validation checkpoints, oldest first."""
        paths = self.snapshot_dir.glob("step*.pt")
        return sorted(paths, key=lambda path: int(path.stem.removeprefix("step")))

    # --- training ------------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def locked(self, hold: bool = True) -> Iterator[None]:
        """Hold the directory's lock (RUN_DIR/.lock, naming the holder's pid) for the block: a second run
        into the same directory is refused instead of mixing its files with this one's. The kernel drops the
        lock when its process ends, however it ends, so a lock left by a dead process is never in the way.
        With `hold` false (processes other than the main one) this does nothing."""
        if not hold:
            yield
            return
        self.create()
        try:
            handle = open(self.lock_file, "a+", encoding="utf-8")  # noqa: SIM115 (closed by `with` below)
        except OSError as err:
            raise UserError(f"cannot lock the run directory {self}: {err.strerror}") from err
        with handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as err:
                handle.seek(0)
                holder = handle.read().strip() or "unknown"
                raise UserError(
                    f"{self} is in use by another nmt run (pid {holder}); wait for it to end or pass "
                    f"another --out"
                ) from err
            handle.seek(0)
            handle.truncate()
            handle.write(f"{os.getpid()}\n")
            handle.flush()
            yield

    def create(self) -> None:
        if self.path.exists() and not self.path.is_dir():
            raise UserError(f"--out {self} is a file; pass a directory for the run")
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise UserError(f"cannot create the run directory {self}: {err.strerror}") from err

    def prepare(self, cfg: Config, resume: bool, overwrite: bool) -> None:
        """Check the directory against --resume/--overwrite, create it and drop temporary files a killed run
        left behind."""
        if resume:
            if not self.checkpoint("last").is_file():
                raise UserError(
                    f"--resume: {self} holds no last.pt to resume from; drop --resume to start a new run"
                )
            self.check_same_setup(cfg)
        elif self.checkpoint("last").exists() or self.checkpoint("best").exists():
            if not overwrite:
                raise UserError(
                    f"{self} already holds a trained run; pass --resume to continue it or --overwrite"
                )
            self.remove_run()
        self.create()
        for stale in self.path.glob(".*.pt.*.tmp"):  # a checkpoint being written when a run was killed
            stale.unlink()

    def remove_run(self) -> None:
        """Delete everything a run writes (for --overwrite): nothing of the old run may be mistaken for
        the new one's (snapshots averaged, a report, evaluations). Files nmt does not write are kept."""
        files = [self.config, self.metrics, self.report, self.curves, *map(self.checkpoint, CHECKPOINTS),
                 *self.path.glob("spm*.model")]  # fmt: skip
        try:
            for path in files:
                path.unlink(missing_ok=True)
            for directory in (self.snapshot_dir, self.eval_dir, self.attention_dir, self.tensorboard):
                if directory.is_dir():
                    shutil.rmtree(directory)
        except OSError as err:
            raise UserError(f"--overwrite: cannot remove the old run in {self}: {err}") from err

    def check_same_setup(self, cfg: Config) -> None:
        """Resuming needs the same data, tokenizer and model settings as the run was started with, a last.pt
        that holds the training state, and the same token budget (the saved data position counts batches of
        it); checked before any data is read."""
        saved = with_absolute_paths(self.load_config())
        for section in ("data", "tokenizer", "model"):
            if getattr(saved, section) != getattr(cfg, section):
                raise UserError(
                    f"the {section} settings differ from {self.config}; resume with the same config"
                )
        last = self.checkpoint("last")
        checkpoint = load_checkpoint(last)
        check_training_state(last, checkpoint)
        saved = checkpoint["progress"].get("batch_tokens") or checkpoint["config"]["train"]["batch_tokens"]
        if cfg.train.batch_tokens not in ("auto", saved):
            raise UserError(
                f"train.batch_tokens={cfg.train.batch_tokens} differs from the {saved} the run trained with, "
                f"which its saved data position belongs to; resume with train.batch_tokens={saved}, or start "
                f"a new run"
            )

    # --- metrics -------------------------------------------------------------------------------------------

    def append_metrics(self, record: dict[str, Any]) -> None:
        with open(self.metrics, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")

    def read_metrics(self) -> list[dict[str, Any]]:
        if not self.metrics.exists():
            return []
        return [json.loads(line) for line in self.metrics.read_text(encoding="utf-8").splitlines()]

    def forget_metrics_after(self, step: int) -> None:
        """Drop the metrics a killed run logged after its last checkpoint (and a line torn by the kill)."""

        def step_of(line: str) -> float:
            try:
                return json.loads(line)["step"]
            except (ValueError, KeyError, TypeError):
                return math.inf

        if self.metrics.is_file():
            lines = self.metrics.read_text(encoding="utf-8").splitlines()
            kept = [line for line in lines if step_of(line) <= step]
            if len(kept) < len(lines):
                atomic_write_text(self.metrics, "".join(line + "\n" for line in kept))

    # --- using a trained run -------------------------------------------------------------------------------

    def load_config(self, overrides: list[str] | None = None) -> Config:
        """The run's config, with dotted `overrides` (e.g. `search.beam_size=3`) applied."""
        if not self.config.is_file():
            raise UserError(
                f"{self} has no {self.config.name}; the run directory is incomplete (copy it back)"
            )
        try:
            return load_config(self.config, overrides, saved=True)
        except ConfigError as err:
            raise UserError(f"{self.config}: {err}") from err

    def chosen_checkpoint(self) -> str:
        """The checkpoint the run's final report chose ('best' or 'averaged'); 'best' before there is one."""
        try:
            name = json.loads(self.report.read_text(encoding="utf-8"))["checkpoint"]
        except (OSError, ValueError, KeyError, TypeError):
            return "best"
        return name if name in CHECKPOINTS and self.checkpoint(name).is_file() else "best"

    def find_checkpoint(self, which: str | None = None) -> Path:
        """Path of best.pt (falling back to last.pt), last.pt or averaged.pt; by default the one the run's
        report chose."""
        if self.path.is_file():
            raise UserError(f"{self} is a file; pass the run directory written by `nmt train` (--out)")
        if not self.path.is_dir():
            raise UserError(
                f"run directory {self} does not exist; train a model with `nmt train ... --out {self}`"
            )
        which = which or self.chosen_checkpoint()
        if which not in CHECKPOINTS:
            raise UserError(f"unknown checkpoint '{which}'; use {', '.join(CHECKPOINTS)}")
        names = ["best", "last"] if which == "best" else [which]
        for name in names:
            if self.checkpoint(name).is_file():
                return self.checkpoint(name)
        if which == "averaged":
            raise UserError(
                f"{self} holds no averaged.pt; make it with `nmt average {self}` "
                f"(from the snapshots that train.keep_checkpoints kept)"
            )
        tried = " or ".join(f"{name}.pt" for name in names)
        raise UserError(f"{self} holds no checkpoint ({tried}); train or resume the run first")

    def load(self, device: torch.device, which: str | None = None, overrides: list[str] | None = None) -> Run:
        """Rebuild the trained model from the config (with `overrides`), tokenizers and a checkpoint (`which`:
        best, last or averaged; by default the one the run's report chose)."""
        path = self.find_checkpoint(which)
        cfg = self.load_config(overrides)
        tokenizers = load_tokenizers(self.path, cfg.tokenizer.joint)
        checkpoint = load_checkpoint(path)
        if not same_vocabulary(checkpoint.get("vocab"), tokenizers):
            raise UserError(
                f"{path} was trained with another vocabulary than {tokenizers.src.path}; "
                f"use the checkpoint and sentencepiece model of the same run"
            )
        model = build_model(cfg.model, len(tokenizers.src), len(tokenizers.tgt), tokenizers.joint)
        try:
            model.load_state_dict(checkpoint["model"])
        except RuntimeError as err:
            problem = [line.strip() for line in str(err).splitlines() if line.strip()][-1][:200]
            raise UserError(
                f"{path} does not match the model in {self.config} ({problem}); "
                f"use the config the checkpoint was trained with"
            ) from err
        return Run(self, cfg, tokenizers, model.to(device).eval(), checkpoint, path)
