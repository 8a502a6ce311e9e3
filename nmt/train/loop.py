"""The training loop: updates → log lines → validation and checkpoints → stopping rules, on one page.

The update itself (forward, backward, AdamW, its guards; eager, CUDA graphs or compiled) is
nmt/train/step.py; the epochs of batches nmt/train/update_stream.py; what the run shows nmt/train/monitor.py;
where its files go nmt/run/directory.py; what its checkpoints hold nmt/run/checkpoint.py.
"""

from __future__ import annotations

import contextlib
import logging
import random
import time
from dataclasses import asdict
from pathlib import Path

import torch
from torch import Tensor

from nmt import interrupts
from nmt.config.schema import Config
from nmt.data.batching import Batch
from nmt.data.prepare import PreparedData
from nmt.errors import Interrupted
from nmt.evaluate.directions import describe_directions
from nmt.models.build import build_model
from nmt.run.checkpoint import (
    restore_rng,
    restore_training,
    rng_state,
    training_checkpoint,
    weights_checkpoint,
)
from nmt.run.checkpoint_io import CheckpointWriter, load_checkpoint
from nmt.run.directory import RunDir
from nmt.run.metrics import forget_metrics_after
from nmt.train.back_translation import OnlineBackTranslation
from nmt.train.distributed import World
from nmt.train.monitor import LossWindow, Monitor, clock
from nmt.train.progress import Progress, StopReason, describe_stop
from nmt.train.step import Update
from nmt.train.token_budget import fit_batch_tokens
from nmt.train.update_stream import UpdateStream
from nmt.train.validation import read_gold_set, validation_scores

log = logging.getLogger(__name__)


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
        self.model = build_model(cfg.model, len(tok.src), len(tok.tgt), tok.joint, tok.pad).to(device)
        if self.world.rank:  # the same weights (DDP copies rank 0's), but other dropout in every process
            torch.manual_seed(cfg.train.seed + self.world.rank)
        align = cfg.train.alignment
        self.align_layer = None if align is None else align.decoder_layer(cfg.model.decoder_layers)
        guided = align is not None and align.links is not None
        self.update = Update(self.model, cfg.train, device, self.world, self.align_layer if guided else None)
        self.gold = None
        if align is not None and self.world.is_main:
            self.gold = read_gold_set(align, tok, cfg.model.position_limit)
        self.back_translation = OnlineBackTranslation.of(self.model, cfg, data, self.world.rank)
        examples = data.directions.epoch_examples
        self.stream = UpdateStream(
            data.train, cfg.train, self.world, device, self.update.static_shapes, examples
        )
        budget = cfg.train.batch_tokens
        self.progress = Progress(batch_tokens=budget if isinstance(budget, int) else 0)  # 0: `auto`, unfitted
        self.writer = CheckpointWriter()  # checkpoints are written in the background
        self.started = time.monotonic()
        self.stop = interrupts.StopRequest()  # SIGINT/SIGTERM during run(): stop after the step
        self.window = LossWindow(device, self.world)  # since the last training record

    # --- the loop ----------------------------------------------------------------------------------------

    def run(self) -> Path:
        """Train until a stopping rule fires, validating every `eval_every` updates and at the end; returns
        the best checkpoint's path."""
        cfg, progress = self.cfg.train, self.progress
        self.started, window = time.monotonic(), self.window
        window.carry(progress.window_loss, progress.window_tokens, progress.window_seconds)
        self.monitor = Monitor(cfg, self.run_dir, self.world.is_main, progress.step)
        with (
            interrupts.after_the_step(self.stop),
            contextlib.closing(self.monitor),
            contextlib.closing(self.writer),
        ):
            with contextlib.closing(self.stream.updates(progress)) as updates:
                while (reason := self.stop_reason()) is None:
                    if (batches := next(updates, None)) is None:
                        reason = "max epochs"
                        break
                    result = self.train_step(batches)
                    if result is None:
                        continue  # skipped: out of GPU memory
                    window.add(*result)
                    self.monitor.update()
                    if progress.step % cfg.log_every == 0:
                        self.log_training(window)
                    if progress.step % cfg.eval_every == 0:
                        self.validate()
            progress.stop_reason = reason
            log.info(
                "training stopped at step %d after %s: %s",
                progress.step,
                clock(self.elapsed()),
                describe_stop(reason, cfg),
            )
            if progress.validated_step != progress.step and reason != "signal":
                self.validate()
            progress.elapsed = self.elapsed()
            self.update.guards.check(progress.step, self.run_dir.checkpoint("last"))
            self.save_last()
        if self.world.any(reason == "signal"):  # also a barrier: no process exits while the main one writes
            raise Interrupted(
                f"training interrupted at step {progress.step}; "
                f"{self.run_dir.checkpoint('last')} saved, continue with --resume"
            )
        return self.run_dir.checkpoint("best")

    def train_step(self, batches: list[Batch]) -> tuple[Tensor, Tensor] | None:
        """One update (nmt/train/step.py), a share of its pairs back-translated first where the run asks;
        returns its loss and target tokens, None when it was skipped."""
        if self.back_translation is not None:
            batches = self.back_translation(batches, self.progress.step)
        result = self.update(batches, self.progress.step, self.progress.batch_tokens)
        self.progress.step += result is not None
        return result

    def log_training(self, window: LossWindow) -> None:
        """A training record: the window's loss and speed, the learning rate, the time so far."""
        self.update.guards.check(self.progress.step, self.run_dir.checkpoint("last"))
        aligned = self.update.alignment_sum if self.update.guide is not None else None
        record = window.flush(aligned) | {
            "lr": float(self.update.scheduler.get_last_lr()[0]),
            "elapsed": self.elapsed(),
        }
        if self.back_translation is not None:
            record |= self.back_translation.counted(self.world, self.progress.step)
        self.monitor.train(self.progress.step, self.progress.epoch, record)

    # --- stopping ----------------------------------------------------------------------------------------

    def elapsed(self) -> float:
        """Training seconds so far, earlier processes of a resumed run included."""
        return self.progress.elapsed + time.monotonic() - self.started

    def stop_reason(self) -> StopReason | None:
        """The stopping rule that fires now, None while none does; every process takes the same decision (a
        signal or the clock of any process stops them all)."""
        cfg, progress = self.cfg.train, self.progress
        time_up = cfg.max_time > 0 and self.elapsed() >= cfg.max_time
        if self.world.any(self.stop.signal is not None or time_up):
            return "signal" if self.world.any(self.stop.signal is not None) else "time budget"
        if cfg.max_steps > 0 and progress.step >= cfg.max_steps:
            return "max steps"
        if cfg.patience > 0 and progress.bad_evals >= cfg.patience:
            return "early stopping"
        if cfg.target_bleu > 0 and progress.best_bleu >= cfg.target_bleu:
            return "target BLEU"
        return None

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
        scores = validation_scores(self.model, self.data, self.cfg, self.device, self.gold, self.align_layer)
        progress = self.progress
        improved = scores["bleu"] > progress.best_bleu
        if improved:
            progress.best_bleu, progress.best_step, progress.bad_evals = scores["bleu"], progress.step, 0
        else:
            progress.bad_evals += 1
        self.monitor.valid(progress.step, progress.epoch, scores | {"elapsed": self.elapsed()})
        log.info(
            "step %d: valid loss %.3f, %s %.2f%s%s",
            progress.step,
            scores["loss"],
            "mean BLEU" if "directions" in scores else "BLEU",
            scores["bleu"],
            f", AER {100 * scores['aer']:.1f}" if "aer" in scores else "",
            " (best)" if improved else "",
        )
        if "directions" in scores:
            log.info("step %d: valid %s", progress.step, describe_directions(scores))
        return improved

    def weights(self) -> dict:
        """What translation needs (best.pt, snapshots): nmt/run/checkpoint.py `weights_checkpoint`."""
        return weights_checkpoint(self.model, self.cfg, self.data.tokenizers, self.progress.step)

    def save_last(self) -> None:
        """Write last.pt, what resuming needs besides the weights; every process calls this (their RNG states
        are gathered), the main one writes."""
        progress = self.progress
        progress.window_loss, progress.window_tokens, progress.window_seconds = self.window.partial()
        rng = self.world.gather(rng_state())
        if self.world.is_main:
            update = self.update
            state = training_checkpoint(
                self.weights(), update.optimizer, update.scheduler, asdict(progress), rng
            )
            self.writer.save(self.run_dir.checkpoint("last"), state)

    def restore(self) -> None:
        """Continue from `last.pt`: weights, optimizer, schedule, progress, RNG (nmt/run/checkpoint.py)."""
        last, update = self.run_dir.checkpoint("last"), self.update
        state = load_checkpoint(last, self.device)
        saved = restore_training(
            last, state, self.model, update.optimizer, update.scheduler, self.data.tokenizers
        )
        self.progress = Progress(**saved)
        restore_rng(state, self.world.rank, self.world.size, self.cfg.train.seed + self.progress.step)
        if self.world.is_main:
            forget_metrics_after(self.run_dir, self.progress.step)
        log.info(
            "resuming at step %d (epoch %d, batch %d)",
            self.progress.step,
            self.progress.epoch,
            self.progress.batches_done,
        )

    def fit_batch_tokens(self) -> None:
        """Resolve `train.batch_tokens: auto` by probing GPU memory (nmt/train/token_budget.py) unless a
        resumed run brought its budget; the processes of a job take the smallest of their fits."""
        if self.progress.batch_tokens:
            return
        cfg = self.cfg.train
        fitted = fit_batch_tokens(
            self.model, self.update.probe, self.data.train, cfg.pad_to_multiple, self.device
        )
        self.progress.batch_tokens = min(self.world.gather(fitted))
