"""The training loop: updates → log lines → validation and checkpoints → stopping rules, on one page.

The update itself (forward, backward, AdamW; eager, CUDA graphs or compiled) is nmt/update.py; its guards
against non-finite losses and out-of-memory batches nmt/guards.py; what the run shows nmt/monitor.py; where
its files go nmt/run_dir.py.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import signal
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from types import FrameType

import torch
from torch import Tensor

from nmt import interrupts
from nmt.checkpoint import (
    CheckpointWriter,
    load_checkpoint,
    same_vocabulary,
    vocabulary_record,
)
from nmt.config import Config, save_config, to_dict, with_absolute_paths
from nmt.data.batching import Batch, token_budget_groups
from nmt.data.buckets import Buckets, batch_shapes
from nmt.data.prepare import PreparedData, prepare_data
from nmt.device import resolve_device
from nmt.distributed import World, joined
from nmt.errors import Interrupted, UserError
from nmt.graphs import portable_optimizer_state
from nmt.loader import prefetch
from nmt.models import build_model
from nmt.monitor import LossWindow, Monitor
from nmt.report import final_report
from nmt.resume import rng_state, set_rng_state
from nmt.run_dir import RunDir
from nmt.token_budget import fit_batch_tokens
from nmt.update import Update
from nmt.validation import validation_scores
from nmt.warm_start import find_parent

log = logging.getLogger(__name__)


@dataclass
class Progress:
    """Where training stands; saved in every checkpoint so `--resume` continues exactly."""

    step: int = 0
    epoch: int = 0
    batches_done: int = 0  # batches of the current epoch already trained on
    batch_tokens: int = 0  # the token budget of a batch: train.batch_tokens, or what `auto` chose
    best_bleu: float = -1.0
    best_step: int = 0
    bad_evals: int = 0  # validations since the best one
    validated_step: int = -1  # the step of the last validation
    parent: str = ""  # the checkpoint training started from (--init-from), if any
    elapsed: float = 0.0  # training seconds before this process started
    window_loss: float = 0.0  # the log window since the last training record: loss summed over processes,
    window_tokens: int = 0  # … target tokens, and …
    window_seconds: float = 0.0  # … seconds; carried over a resume, so that records do not depend on one


class Trainer:
    """Trains the model of one run directory (in one process of `world`); the config is never changed."""

    def __init__(
        self,
        cfg: Config,
        run_dir: RunDir,
        data: PreparedData,
        device: torch.device,
        world: World | None = None,
    ) -> None:
        self.cfg, self.run_dir, self.data, self.device = cfg, run_dir, data, device
        self.world = world or World()
        torch.manual_seed(cfg.train.seed)
        random.seed(cfg.train.seed)
        tok = data.tokenizers
        self.model = build_model(cfg.model, len(tok.src), len(tok.tgt), tok.joint).to(device)
        if self.world.rank:  # the same weights (DDP copies rank 0's), but other dropout in every process
            torch.manual_seed(cfg.train.seed + self.world.rank)
        self.update = Update(self.model, cfg.train, device, self.world)
        budget = cfg.train.batch_tokens
        self.progress = Progress(batch_tokens=budget if isinstance(budget, int) else 0)  # 0: `auto`, unfitted
        self.buckets: Buckets | None = None  # planned at the first epoch, when the budget is known
        self.planned = False  # whether an epoch was planned (logged once at INFO)
        self.writer = CheckpointWriter()  # checkpoints are written in the background
        self.started = time.monotonic()
        self.stop_signal: int | None = None
        self.window = LossWindow(device, self.world)  # since the last training record

    # --- the loop ----------------------------------------------------------------------------------------

    def run(self) -> Path:
        """Train until a stopping rule fires, validating every `eval_every` updates and at the end; returns
        the best checkpoint's path."""
        cfg, progress = self.cfg.train, self.progress
        self.started, window = time.monotonic(), self.window
        window.carry(progress.window_loss, progress.window_tokens, progress.window_seconds)
        self.monitor = Monitor(cfg, self.run_dir, self.world.is_main, progress.step)
        with _catch_signals(self), contextlib.closing(self.monitor), contextlib.closing(self.writer):
            with contextlib.closing(self.updates()) as updates:
                while not self.should_stop() and (batches := next(updates, None)) is not None:
                    result = self.train_step(batches)
                    if result is None:
                        continue  # skipped: out of GPU memory
                    window.add(*result)
                    self.monitor.update()
                    if progress.step % cfg.log_every == 0:
                        self.log_training(window)
                    if progress.step % cfg.eval_every == 0:
                        self.validate()
            if progress.validated_step != progress.step and not self.interrupted():
                self.validate()
            progress.elapsed = self.elapsed()
            self.update.guards.check(progress.step, self.run_dir.checkpoint("last"))
            self.save_last()
        if self.interrupted():  # also a barrier: no process exits while the main one still writes
            raise Interrupted(
                f"training interrupted at step {progress.step}; "
                f"{self.run_dir.checkpoint('last')} saved, continue with --resume"
            )
        return self.run_dir.checkpoint("best")

    def train_step(self, batches: list[Batch]) -> tuple[Tensor, Tensor] | None:
        """One update (nmt/update.py); returns its loss and target tokens, None when it was skipped."""
        result = self.update(batches, self.progress.step, self.progress.batch_tokens)
        self.progress.step += result is not None
        return result

    def updates(self, epochs: int = 0) -> Iterator[list[Batch]]:
        """Every update from the saved data position on, epoch after epoch, up to `train.max_epochs` (or at
        most `epochs` epochs, the current one included). The position in `progress` moves as each update is
        handed out, so a checkpoint written after an update resumes with the next one."""
        progress, max_epochs = self.progress, self.cfg.train.max_epochs
        end = progress.epoch + epochs if epochs else None
        while not (max_epochs and progress.epoch >= max_epochs) and progress.epoch != end:
            for consumed, batches in self.epoch_updates():
                progress.batches_done += consumed
                yield batches
            progress.epoch, progress.batches_done = progress.epoch + 1, 0

    def epoch_updates(self) -> Iterator[tuple[int, list[Batch]]]:
        """This epoch's remaining updates: how many of the epoch's batches each one uses, and this process's
        part of them (all of them in a single process), prepared in a background thread and on the device."""
        cfg = self.cfg.train
        started = time.perf_counter()
        groups = token_budget_groups(
            self.data.train, self.progress.batch_tokens, cfg.seed + self.progress.epoch, cfg.pad_to_multiple
        )
        log.log(
            logging.DEBUG if self.planned else logging.INFO,
            "epoch %d: %d batches of %d pairs planned in %.2f s",
            self.progress.epoch,
            len(groups),
            len(self.data.train),
            time.perf_counter() - started,
        )
        self.planned, groups = True, groups[self.progress.batches_done :]
        size = self.world.update_batches(cfg)
        updates = [groups[i : i + size] for i in range(0, len(groups), size)]
        batches = self.world.batches(self.data.train, updates, cfg.pad_to_multiple)
        if self.update.static_shapes:
            batches = self.bucket_plan().pad(batches)
        with contextlib.closing(prefetch(batches, self.device)) as ready:
            for update in updates:
                yield len(update), [next(ready) for _ in self.world.share(update)]

    def bucket_plan(self) -> Buckets:
        """The static batch shapes, planned once from the shapes of an epoch's batches (the token-budget
        grouping gives every epoch the same shapes, in another order)."""
        if self.buckets is None:
            cfg = self.cfg.train
            groups = token_budget_groups(
                self.data.train, self.progress.batch_tokens, cfg.seed, cfg.pad_to_multiple
            )
            src_len, tgt_len = self.data.train.lengths()
            shapes = batch_shapes(groups, src_len, tgt_len, cfg.pad_to_multiple)
            self.buckets = Buckets.plan(shapes, cfg.max_shapes)
            log.info("%s", self.buckets.describe())
        return self.buckets

    def log_training(self, window: LossWindow) -> None:
        """A training record: the window's loss and speed, the learning rate, the time so far."""
        self.update.guards.check(self.progress.step, self.run_dir.checkpoint("last"))
        record = window.flush() | {
            "lr": float(self.update.scheduler.get_last_lr()[0]),
            "elapsed": self.elapsed(),
        }
        self.monitor.train(self.progress.step, self.progress.epoch, record)

    # --- stopping ----------------------------------------------------------------------------------------

    def elapsed(self) -> float:
        """Training seconds so far, earlier processes of a resumed run included."""
        return self.progress.elapsed + time.monotonic() - self.started

    def should_stop(self) -> bool:
        """Whether a stopping rule fires; every process takes the same decision (a signal or the clock of any
        process stops them all)."""
        cfg, progress = self.cfg.train, self.progress
        time_up = cfg.max_time > 0 and self.elapsed() >= cfg.max_time
        return (
            self.world.any(self.stop_signal is not None or time_up)
            or (cfg.max_steps > 0 and progress.step >= cfg.max_steps)
            or (cfg.patience > 0 and progress.bad_evals >= cfg.patience)
            or (cfg.target_bleu > 0 and progress.best_bleu >= cfg.target_bleu)
        )

    def interrupted(self) -> bool:
        """Whether SIGINT/SIGTERM reached any process."""
        return self.world.any(self.stop_signal is not None)

    # --- validation and checkpoints ----------------------------------------------------------------------

    def validate(self) -> None:
        """Validate in the main process, share its verdict with the others; write last.pt, and best.pt when
        BLEU improved (in the background: the previous validation's files are on disk first)."""
        self.writer.wait()
        progress = self.progress
        self.update.guards.check(progress.step, self.run_dir.checkpoint("last"))
        improved = self.score_validation() if self.world.is_main else False
        verdict = self.world.broadcast((progress.best_bleu, progress.best_step, progress.bad_evals, improved))
        progress.best_bleu, progress.best_step, progress.bad_evals, improved = verdict
        progress.validated_step = progress.step
        if improved and self.world.is_main:
            self.writer.save(self.run_dir.checkpoint("best"), self.weights())
        self.save_last()
        if self.cfg.train.keep_checkpoints and self.world.is_main:
            self.writer.save(self.run_dir.snapshot(progress.step), self.weights())
            self.writer.later(self.prune_snapshots)

    def prune_snapshots(self) -> None:
        """Keep the newest `keep_checkpoints` snapshots in checkpoints/."""
        for old in self.run_dir.snapshots()[: -self.cfg.train.keep_checkpoints]:
            old.unlink()

    def score_validation(self) -> bool:
        """Validation loss and greedy BLEU, logged; returns whether BLEU improved."""
        scores = validation_scores(self.model, self.data, self.cfg, self.device)
        progress = self.progress
        improved = scores["bleu"] > progress.best_bleu
        if improved:
            progress.best_bleu, progress.best_step, progress.bad_evals = scores["bleu"], progress.step, 0
        else:
            progress.bad_evals += 1
        self.monitor.valid(progress.step, progress.epoch, scores | {"elapsed": self.elapsed()})
        log.info(
            "step %d: valid loss %.3f, BLEU %.2f%s",
            progress.step,
            scores["loss"],
            scores["bleu"],
            " (best)" if improved else "",
        )
        return improved

    def weights(self) -> dict:
        """What translation needs: the weights with their config and vocabulary (best.pt, snapshots)."""
        return {
            "model": self.model.state_dict(),
            "config": to_dict(self.cfg),
            "vocab": vocabulary_record(self.data.tokenizers),
            "step": self.progress.step,
        }

    def save_last(self) -> None:
        """Write last.pt, what resuming needs besides the weights; every process calls this (their RNG states
        are gathered), the main one writes."""
        progress = self.progress
        progress.window_loss, progress.window_tokens, progress.window_seconds = self.window.partial()
        rng = self.world.gather(rng_state())
        if self.world.is_main:
            state = self.weights() | {
                "optimizer": portable_optimizer_state(self.update.optimizer),
                "scheduler": self.update.scheduler.state_dict(),
                "progress": asdict(self.progress),
                "rng": rng[0],
                **({"rng_ranks": rng} if len(rng) > 1 else {}),
            }
            self.writer.save(self.run_dir.checkpoint("last"), state)

    def restore(self) -> None:
        """Continue from `last.pt`: weights, optimizer, schedule, progress (data position and token budget
        included), RNG."""
        last = self.run_dir.checkpoint("last")
        checkpoint = load_checkpoint(last, self.device)
        if not same_vocabulary(checkpoint["vocab"], self.data.tokenizers):
            raise UserError(f"{last} does not match the run's sentencepiece model; cannot resume")
        self.model.load_state_dict(checkpoint["model"])
        try:
            self.update.optimizer.load_state_dict(checkpoint["optimizer"])
        except ValueError as err:  # e.g. written before self-attention fused its projections
            raise UserError(
                f"{last} holds optimizer state for other parameters than this version of "
                f"nmt builds ({err}); its weights still translate, but training cannot resume from it"
            ) from err
        self.update.scheduler.load_state_dict(checkpoint["scheduler"])
        saved = Progress(**checkpoint["progress"])
        # checkpoints written before the budget moved into the progress keep it in their config (checked
        # against the config by RunDir.check_same_setup)
        saved.batch_tokens = saved.batch_tokens or checkpoint["config"]["train"]["batch_tokens"]
        self.progress = saved
        rng = checkpoint.get("rng_ranks", [checkpoint["rng"]])
        set_rng_state(rng[self.world.rank % len(rng)])
        if len(rng) != self.world.size:
            log.warning(
                "resuming in %d processes a run saved by %d: dropout will differ", self.world.size, len(rng)
            )
            if self.world.rank:
                torch.manual_seed(self.cfg.train.seed + self.world.rank + self.progress.step)
        if self.world.is_main:
            self.run_dir.forget_metrics_after(self.progress.step)
        log.info(
            "resuming at step %d (epoch %d, batch %d)",
            self.progress.step,
            self.progress.epoch,
            self.progress.batches_done,
        )

    def fit_batch_tokens(self) -> None:
        """Resolve `train.batch_tokens: auto` by probing GPU memory (nmt/token_budget.py) unless a resumed run
        brought its budget; the processes of a job take the smallest of their fits."""
        if self.progress.batch_tokens:
            return
        cfg = self.cfg.train
        fitted = fit_batch_tokens(self.model, self.data.train, cfg.pad_to_multiple, cfg.amp, self.device)
        self.progress.batch_tokens = min(self.world.gather(fitted))


@contextlib.contextmanager
def _catch_signals(trainer: Trainer) -> Iterator[None]:
    """SIGINT/SIGTERM set a flag; the loop then saves `last.pt` and stops after the current step."""

    def handler(signum: int, frame: FrameType | None) -> None:
        if trainer.stop_signal is not None:  # a second Ctrl-C: stop at once (last.pt is renamed into place)
            interrupts.stop_now(signum, frame)
        trainer.stop_signal = signum
        log.info("received signal %d: saving a checkpoint after this step", signum)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:  # once stopping, the process's own handler (nmt/interrupts.py) would raise in the cleanup
        stopping = trainer.stop_signal is not None
        for sig, old in previous.items():
            signal.signal(sig, interrupts.stop_now if stopping and old is interrupts.interrupt else old)


def train(
    cfg: Config, out: Path, resume: bool = False, overwrite: bool = False, init_from: Path | None = None
) -> Path:
    """Train the configured model into the run directory `out` (from the weights and sentencepiece model of
    the run `init_from` when given: fine-tuning); returns the path of the best checkpoint.

    Under torchrun every process calls this: the main one checks and prepares the run directory (training
    sentencepiece) while the others wait, then they load what it wrote. Relative data paths are made absolute
    first, so that config.yaml in the run directory works from any working directory.
    """
    cfg, run_dir = with_absolute_paths(cfg), RunDir(out)
    parent, cfg = find_parent(cfg, init_from) if init_from else (None, cfg)

    def prepare() -> PreparedData:
        run_dir.prepare(cfg, resume, overwrite)
        if parent and not resume:
            parent.copy_tokenizers(run_dir)
        data = prepare_data(cfg, run_dir.path, reuse_tokenizers=resume or parent is not None)
        save_config(cfg, run_dir.config)
        return data

    with run_dir.locked(hold=os.environ.get("RANK", "0") == "0"):  # the main process holds it, to the end
        with joined(resolve_device(cfg.train.device)) as (world, device):
            data = world.main_first(prepare) or prepare_data(cfg, run_dir.path, reuse_tokenizers=True)
            trainer = Trainer(cfg, run_dir, data, device, world)
            if resume:
                trainer.restore()
            elif parent:
                trainer.model.load_state_dict(parent.weights())
                trainer.progress.parent = str(parent.checkpoint)
                log.info("starting from the weights of %s", parent.checkpoint)
            trainer.fit_batch_tokens()
            log.info(
                "training %s (%.1fM parameters) on %s%s; %s",
                cfg.model.type,
                sum(p.numel() for p in trainer.model.parameters()) / 1e6,
                device,
                f" in each of {world.size} processes" if world.size > 1 else "",
                world.describe_batch(cfg.train, trainer.progress.batch_tokens),
            )
            best = trainer.run()
            main = world.is_main
        if cfg.train.final_report and main:
            final_report(cfg, run_dir, cfg.train.device)
    return best
