"""A run directory: the one place that names its files, and its lock. Paths only: nothing here loads a model
(that is nmt/decode/trained_run.py) or a checkpoint (nmt/run/checkpoint.py).

```
RUN_DIR/config.yaml  spm.model  best.pt  last.pt  averaged.pt  metrics.jsonl  train.log  report.json
        curves.png  checkpoints/step<N>.pt  eval/  attention/  tensorboard/
```
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from nmt.data.tokenizer import tokenizer_files
from nmt.errors import UserError
from nmt.run.report import read_report

CHECKPOINTS = ("best", "last", "averaged")


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
    def train_log(self) -> Path:
        return self.path / "train.log"

    @property
    def report(self) -> Path:
        return self.path / "report.json"

    @property
    def curves(self) -> Path:
        return self.path / "curves.png"

    @property
    def origin(self) -> Path:
        """Where an imported model came from (`nmt import`)."""
        return self.path / "origin.json"

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

    # --- the lock, creating and clearing -------------------------------------------------------------------

    @contextlib.contextmanager
    def locked(self, hold: bool = True) -> Iterator[Callable[[], None]]:
        """Hold the directory's lock (RUN_DIR/.lock, naming the holder's pid) for the block: a second run
        into the same directory is refused instead of mixing its files with this one's. The kernel drops the
        lock when its process ends, however it ends, so a lock left by a dead process is never in the way.
        A block that fails before it calls the function it is given (`training_started`) and before any
        checkpoint exists (a refused run, one interrupted while preparing) leaves nothing behind: what it
        added to the directory, and the directories it made, are removed. Once training has started, a failure
        keeps what the run wrote (train.log and metrics.jsonl say what went wrong).
        With `hold` false (processes other than the main one) this does nothing."""
        started = False

        def training_started() -> None:
            nonlocal started
            started = True

        if not hold:
            yield training_started
            return
        made = [self.path, *self.path.parents][: self._missing_levels()]  # deepest first
        before = set(self.path.iterdir()) if self.path.is_dir() else set()
        self.create()
        with self._lock():
            try:
                yield training_started
            except BaseException:
                if not started and not self.trained():  # cleared while locked: no other run is in there
                    self._remove_added(before, made)
                raise

    def _missing_levels(self) -> int:
        """How many of the run directory and its parents do not exist yet."""
        return next(i for i, path in enumerate([self.path, *self.path.parents]) if path.exists())

    @contextlib.contextmanager
    def _lock(self) -> Iterator[None]:
        """RUN_DIR/.lock held (flock) and naming this process for the block."""
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

    def trained(self) -> bool:
        """Whether the directory holds a checkpoint (of this run or of the one it resumes)."""
        return self.checkpoint("last").exists() or self.checkpoint("best").exists()

    def _remove_added(self, before: set[Path], made: list[Path]) -> None:
        """Remove the entries a failed run added (those not in `before`) and the directories it made (`made`,
        deepest first, when empty); best effort: the run's own error is the one to report."""
        with contextlib.suppress(OSError):
            for entry in set(self.path.iterdir()) - before:
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry)
                else:
                    entry.unlink()
            for directory in made:
                directory.rmdir()

    def create(self) -> None:
        if self.path.exists() and not self.path.is_dir():
            raise UserError(f"--out {self} is a file; pass a directory for the run")
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise UserError(f"cannot create the run directory {self}: {err.strerror}") from err

    def remove_run(self) -> None:
        """Delete everything a run writes (for --overwrite): nothing of the old run may be mistaken for
        the new one's (snapshots averaged, a report, evaluations). Files nmt does not write are kept."""
        files = [
            self.config,
            self.metrics,
            self.train_log,
            self.report,
            self.curves,
            self.origin,
            *map(self.checkpoint, CHECKPOINTS),
            *self.path.glob("spm*.model"),
            *tokenizer_files(self.path, joint=False, vocabulary="marian"),  # an imported model's
        ]
        try:
            for path in files:
                path.unlink(missing_ok=True)
            for directory in (self.snapshot_dir, self.eval_dir, self.attention_dir, self.tensorboard):
                if directory.is_dir():
                    shutil.rmtree(directory)
        except OSError as err:
            raise UserError(f"--overwrite: cannot remove the old run in {self}: {err}") from err

    # --- which checkpoint ----------------------------------------------------------------------------------

    def chosen_checkpoint(self) -> str:
        """The checkpoint the run's final report chose ('best' or 'averaged'); 'best' before there is one."""
        try:
            name = read_report(self.report)["checkpoint"]
        except (OSError, ValueError, KeyError, TypeError):
            return "best"
        return name if name in CHECKPOINTS and self.checkpoint(name).is_file() else "best"

    def _no_average(self) -> str:
        """Why there is no averaged.pt, and what is possible: averaging the snapshots the run kept (as many as
        it kept, at most `nmt average`'s default 5), or, where it kept none, another checkpoint."""
        kept = len(self.snapshots())
        if not kept:
            return (
                f"{self} holds no averaged.pt and no checkpoints to average (it kept none in checkpoints/: "
                f"train.keep_checkpoints=0); use --checkpoint best or last, or train with "
                f"train.keep_checkpoints=N to average later runs"
            )
        return (
            f"{self} holds no averaged.pt; make it from the {kept} checkpoint(s) it keeps with "
            f"`nmt average {self} --last {min(kept, 5)}`"
        )

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
            raise UserError(self._no_average())
        tried = " or ".join(f"{name}.pt" for name in names)
        raise UserError(f"{self} holds no checkpoint ({tried}); train or resume the run first")
