"""The training loop: batches → loss → AdamW step, with validation, checkpoints, resume and stopping rules."""

from __future__ import annotations

import contextlib
import json
import logging
import math
import random
import signal
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import Tensor
from tqdm import tqdm

from nmt.batch_size import fit_batch_tokens
from nmt.checkpoint import (
    METRICS_FILE,
    SNAPSHOT_DIR,
    load_checkpoint,
    same_vocabulary,
    save_checkpoint,
    snapshots,
    vocabulary_record,
)
from nmt.config import Config, TrainConfig, replace, to_dict
from nmt.data.batching import Batch, token_budget_groups
from nmt.data.prepare import PreparedData, prepare_data
from nmt.device import autocast, resolve_device
from nmt.distributed import World, joined
from nmt.errors import UserError
from nmt.loader import prefetch
from nmt.loss import sequence_loss
from nmt.models import build_model
from nmt.models.base import Seq2Seq
from nmt.report import final_report
from nmt.resume import forget_metrics_after, rng_state, set_rng_state
from nmt.run_dir import prepare_run
from nmt.validation import validation_scores

log = logging.getLogger(__name__)


class Interrupted(Exception):
    """Training stopped by SIGINT/SIGTERM after writing its last checkpoint."""


@dataclass
class Progress:
    """Where training stands; saved in every checkpoint so `--resume` continues exactly."""

    step: int = 0
    epoch: int = 0
    batches_done: int = 0  # batches of the current epoch already trained on
    best_bleu: float = -1.0
    best_step: int = 0
    bad_evals: int = 0  # validations since the best one
    elapsed: float = 0.0  # training seconds before this process started


def learning_rate_factor(step: int, cfg: TrainConfig) -> float:
    """Linear warmup to `lr`, then inverse-square-root decay (or constant)."""
    warmup = max(cfg.warmup_steps, 1)
    if cfg.schedule == "constant":
        return min(1.0, (step + 1) / warmup)
    return min((step + 1) / warmup, math.sqrt(warmup / (step + 1)))


def build_optimizer(model: Seq2Seq, cfg: TrainConfig, device: torch.device) -> torch.optim.AdamW:
    """AdamW (fused on CUDA); no weight decay on biases, norms and embeddings."""
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and "embedding" not in n]
    no_decay = [p for n, p in model.named_parameters() if not (p.dim() >= 2 and "embedding" not in n)]
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=cfg.betas, fused=device.type == "cuda")


class Trainer:
    """Holds the model, optimizer and progress of one run directory (in one process of `world`)."""

    def __init__(
        self, cfg: Config, run_dir: Path, data: PreparedData, device: torch.device, world: World | None = None
    ) -> None:
        self.cfg, self.run_dir, self.data, self.device = cfg, run_dir, data, device
        self.world = world or World()
        torch.manual_seed(cfg.train.seed)
        random.seed(cfg.train.seed)
        tok = data.tokenizers
        self.model = build_model(cfg.model, len(tok.src), len(tok.tgt), tok.joint).to(device)
        if self.world.rank:  # the same weights (DDP copies rank 0's), but other dropout in every process
            torch.manual_seed(cfg.train.seed + self.world.rank)
        self.optimizer = build_optimizer(self.model, cfg.train, device)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda step: learning_rate_factor(step, cfg.train)
        )
        self.replica = self.world.wrap(self.model)  # DistributedDataParallel under torchrun
        self.forward = (
            torch.compile(self.replica) if cfg.train.compile and device.type == "cuda" else self.replica
        )
        self.progress = Progress()
        self.started = time.monotonic()
        self.stop_signal: int | None = None
        self.scaler = torch.amp.GradScaler(device.type, init_scale=1.0)  # only to skip non-finite updates
        self.skipped = torch.zeros((), dtype=torch.long, device=device)  # non-finite updates since reported
        self.bad_streak = torch.zeros((), dtype=torch.long, device=device)  # non-finite updates in a row
        self.oom_streak = 0  # updates in a row skipped for lack of GPU memory
        self.planned = False  # whether an epoch was planned (logged once at INFO)

    # --- checkpoints -------------------------------------------------------------------------------------

    def state(self, rng: list[dict]) -> dict:
        """The checkpoint: `rng` holds every process's RNG states (one entry unless distributed)."""
        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "progress": asdict(self.progress),
            "rng": rng[0],
            **({"rng_ranks": rng} if len(rng) > 1 else {}),
            "config": to_dict(self.cfg),
            "vocab": vocabulary_record(self.data.tokenizers),
        }

    def save(self, name: str) -> None:
        """Every process calls this; the main one writes the checkpoint."""
        rng = self.world.gather(rng_state())
        if self.world.is_main:
            save_checkpoint(self.run_dir / name, self.state(rng))

    def restore(self) -> None:
        """Continue from `last.pt`: weights, optimizer, schedule, progress, RNG and data position."""
        checkpoint = load_checkpoint(self.run_dir / "last.pt", self.device)
        if not same_vocabulary(checkpoint["vocab"], self.data.tokenizers):
            raise UserError(
                f"{self.run_dir / 'last.pt'} does not match the run's sentencepiece model; cannot resume"
            )
        self.model.load_state_dict(checkpoint["model"])
        self.optimizer.load_state_dict(checkpoint["optimizer"])
        self.scheduler.load_state_dict(checkpoint["scheduler"])
        self.progress = Progress(**checkpoint["progress"])
        if self.cfg.train.batch_tokens == "auto":  # the budget the run started with keeps the data position
            self.cfg = replace(
                self.cfg, train={"batch_tokens": checkpoint["config"]["train"]["batch_tokens"]}
            )
        rng = checkpoint.get("rng_ranks", [checkpoint["rng"]])
        set_rng_state(rng[self.world.rank % len(rng)])
        if len(rng) != self.world.size:
            log.warning(
                "resuming in %d processes a run saved by %d: dropout will differ", self.world.size, len(rng)
            )
            if self.world.rank:
                torch.manual_seed(self.cfg.train.seed + self.world.rank + self.progress.step)
        if self.world.is_main:
            forget_metrics_after(self.run_dir / METRICS_FILE, self.progress.step)
        log.info(
            "resuming at step %d (epoch %d, batch %d)",
            self.progress.step,
            self.progress.epoch,
            self.progress.batches_done,
        )

    def fit_batch_tokens(self) -> None:
        """Resolve `train.batch_tokens: auto` by probing GPU memory (nmt/batch_size.py); the processes of a
        job take the smallest of their fits. Other budgets are left as they are."""
        cfg = self.cfg.train
        if cfg.batch_tokens != "auto":
            return
        fitted = fit_batch_tokens(self.model, self.data.train, cfg.pad_to_multiple, cfg.amp, self.device)
        self.cfg = replace(self.cfg, train={"batch_tokens": min(self.world.gather(fitted))})

    # --- the loop ----------------------------------------------------------------------------------------

    def epoch_updates(self) -> Iterator[tuple[int, list[Batch]]]:
        """This epoch's remaining updates: how many of the epoch's batches each one uses, and this process's
        part of them (all of them in a single process), prepared in a background thread and on the device."""
        cfg = self.cfg.train
        started = time.perf_counter()
        groups = token_budget_groups(
            self.data.train, cfg.batch_tokens, cfg.seed + self.progress.epoch, cfg.pad_to_multiple
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
        with contextlib.closing(prefetch(batches, self.device)) as ready:
            for update in updates:
                yield len(update), [next(ready) for _ in self.world.share(update)]

    def train_step(self, batches: list[Batch]) -> tuple[Tensor, Tensor] | None:
        """One optimizer update over `batches` (gradient accumulation); returns their summed loss and target
        tokens.

        Distributed, the loss is divided by the target tokens of all processes, times their number as DDP
        averages the gradients: each update's gradient is that of one process doing all the batches. An update
        with non-finite gradients is skipped on the device, without a host sync (its loss and tokens count as
        0; `check_updates` reports it later). Batches that do not fit in GPU memory are skipped with a
        warning, and None is returned.
        """
        tokens = sum(batch.target_tokens() for batch in batches)
        total_tokens = self.world.sum(tokens)  # of all processes
        try:
            loss_sum = self._backward(batches, total_tokens)
        except torch.cuda.OutOfMemoryError:
            loss_sum = None
        if loss_sum is None:  # outside the except block, which keeps the failed step's tensors alive
            self._skip_out_of_memory(batches)
            return None
        self.oom_streak = 0
        self.scaler.unscale_(self.optimizer)
        norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.train.clip_norm)
        self.scaler.step(self.optimizer)  # no update where a gradient is inf/NaN (on CUDA decided on the GPU)
        self.scaler.update(1.0)  # the scaler only detects non-finite gradients: the loss scale stays 1
        self.optimizer.zero_grad(set_to_none=True)
        self.scheduler.step()
        self.progress.step += 1
        finite = torch.isfinite(norm)
        self.skipped += ~finite
        self.bad_streak = (self.bad_streak + 1) * ~finite
        return torch.where(finite, loss_sum, 0.0), tokens * finite

    def _backward(self, batches: list[Batch], total_tokens: Tensor) -> Tensor:
        """Forward and backward pass of each batch, accumulating gradients; returns the summed loss."""
        loss_sum = torch.zeros((), device=self.device)
        for i, batch in enumerate(batches):
            with self.world.accumulating(self.replica, sync=i == len(batches) - 1):
                with autocast(self.device, self.cfg.train.amp):
                    output = self.forward(batch.src, batch.src_mask, batch.tgt_in)
                    loss = sequence_loss(output.logits, batch.tgt_out, self.cfg.train.label_smoothing)
                self.scaler.scale(loss * self.world.size / total_tokens).backward()
            loss_sum += loss.detach()
        return loss_sum

    def _skip_out_of_memory(self, batches: list[Batch]) -> None:
        """Drop the gradients of an update that ran out of GPU memory; abort after too many in a row.

        Under torchrun the job ends instead: the other processes are already inside DDP's gradient
        all-reduce, which this one cannot join, so skipping alone would leave them waiting.
        """
        self.optimizer.zero_grad(set_to_none=True)
        torch.cuda.empty_cache()
        self.oom_streak += 1
        shapes = "; ".join(
            f"{b.size} sentences, source length {b.src.size(1)}, target length {b.tgt_in.size(1)}"
            for b in batches
        )
        if self.world.size > 1:
            raise UserError(
                f"out of GPU memory at step {self.progress.step} on a batch of {shapes}; all processes stop "
                f"(each update needs them all): lower train.batch_tokens (now {self.cfg.train.batch_tokens}) "
                "and --resume"
            )
        log.warning("step %d: out of GPU memory on a batch of %s; batch skipped", self.progress.step, shapes)
        if self.oom_streak >= self.cfg.train.max_bad_steps:
            raise UserError(
                f"out of GPU memory on {self.oom_streak} batches in a row; lower train.batch_tokens "
                f"(now {self.cfg.train.batch_tokens}) or the model size"
            )

    def check_updates(self) -> None:
        """Report updates skipped for non-finite loss/gradients; abort after train.max_bad_steps in a row.

        Reads counters kept on the device, so it runs only where the host waits anyway: at log lines, before
        validation and before the final checkpoint. Skipped updates leave the weights as they were, and the
        abort writes nothing, so last.pt and best.pt keep the last good weights.
        """
        skipped, streak = torch.stack([self.skipped, self.bad_streak]).tolist()
        if skipped:
            self.skipped.zero_()
            log.warning(
                "step %d: %d updates skipped for non-finite loss/gradients", self.progress.step, skipped
            )
        if streak >= self.cfg.train.max_bad_steps:
            last = self.run_dir / "last.pt"
            kept = f"last good checkpoint: {last}" if last.is_file() else "no checkpoint was written"
            raise UserError(
                f"loss became NaN/inf in {streak} consecutive steps; {kept}; lower train.lr or check the data"
            )

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

    def run(self) -> Path:
        """Train until a stopping rule fires; returns the best checkpoint's path."""
        cfg, progress = self.cfg.train, self.progress
        self.started = time.monotonic()
        bar = tqdm(
            total=cfg.max_steps or None,
            initial=progress.step,
            unit="step",
            dynamic_ncols=True,
            disable=None if self.world.is_main else True,
            mininterval=1.0,
        )
        window = _Window(self.device, self.world)
        last_eval = -1
        with _catch_signals(self), bar:
            while not self.should_stop() and not (cfg.max_epochs and progress.epoch >= cfg.max_epochs):
                for consumed, batches in self.epoch_updates():
                    updated = self._update(consumed, batches, window, bar)
                    if updated and progress.step % cfg.eval_every == 0:
                        self.validate()
                        last_eval = progress.step
                    if self.should_stop():
                        break
                else:
                    progress.epoch, progress.batches_done = progress.epoch + 1, 0
            if last_eval != progress.step and not self.interrupted():
                self.validate()
            progress.elapsed = self.elapsed()
            self.check_updates()
            self.save("last.pt")
        if self.interrupted():  # also a barrier: no process exits while the main one still writes
            raise Interrupted(
                f"training interrupted at step {progress.step}; "
                f"{self.run_dir / 'last.pt'} saved, continue with --resume"
            )
        return self.run_dir / "best.pt"

    def interrupted(self) -> bool:
        """Whether SIGINT/SIGTERM reached any process."""
        return self.world.any(self.stop_signal is not None)

    def _update(self, consumed: int, batches: list[Batch], window: _Window, bar: tqdm) -> bool:
        """Train on `batches`; False when the update was skipped for lack of GPU memory."""
        result = self.train_step(batches)
        self.progress.batches_done += consumed
        if result is None:
            return False
        window.add(*result)
        bar.update(1)
        if self.progress.step % self.cfg.train.log_every == 0:
            self.check_updates()
            record = window.flush() | {"lr": self.scheduler.get_last_lr()[0], "elapsed": self.elapsed()}
            bar.set_postfix(
                loss=f"{record['loss']:.3f}",
                lr=f"{record['lr']:.2e}",
                tok_s=f"{record['target_tokens_per_s']:.0f}",
            )
            self.log_metrics("train", record)
        return True

    def validate(self) -> None:
        """Validate in the main process, share its verdict with the others; write last.pt, and best.pt when
        BLEU improved."""
        self.check_updates()
        progress = self.progress
        improved = self.score_validation() if self.world.is_main else False
        verdict = self.world.broadcast((progress.best_bleu, progress.best_step, progress.bad_evals, improved))
        progress.best_bleu, progress.best_step, progress.bad_evals, improved = verdict
        if improved:
            self.save("best.pt")
        self.save("last.pt")
        if self.cfg.train.keep_checkpoints and self.world.is_main:
            self.save_snapshot()

    def save_snapshot(self) -> None:
        """Keep this validation's weights as checkpoints/step<N>.pt (the newest `keep_checkpoints` only)."""
        snapshot = {
            "model": self.model.state_dict(),
            "config": to_dict(self.cfg),
            "vocab": vocabulary_record(self.data.tokenizers),
            "step": self.progress.step,
        }
        save_checkpoint(self.run_dir / SNAPSHOT_DIR / f"step{self.progress.step}.pt", snapshot)
        for old in snapshots(self.run_dir)[: -self.cfg.train.keep_checkpoints]:
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
        self.log_metrics("valid", scores | {"elapsed": self.elapsed()})
        log.info(
            "step %d: valid loss %.3f, BLEU %.2f%s",
            progress.step,
            scores["loss"],
            scores["bleu"],
            " (best)" if improved else "",
        )
        return improved

    def log_metrics(self, kind: str, record: dict) -> None:
        if not self.world.is_main:
            return
        line = {"kind": kind, "step": self.progress.step, "epoch": self.progress.epoch} | record
        with open(self.run_dir / METRICS_FILE, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(line) + "\n")


class _Window:
    """Loss and token counts since the last log line, kept on the device to avoid per-step syncs; `flush`
    sums them over all processes."""

    def __init__(self, device: torch.device, world: World) -> None:
        self.device, self.world = device, world
        self.reset()

    def reset(self) -> None:
        self.loss = torch.zeros((), device=self.device)
        self.tokens = torch.zeros((), device=self.device, dtype=torch.long)
        self.started = time.perf_counter()

    def add(self, loss: Tensor, tokens: Tensor) -> None:
        self.loss += loss
        self.tokens += tokens

    def flush(self) -> dict[str, float]:
        loss, tokens = self.world.sum(self.loss).item(), int(self.world.sum(self.tokens).item())
        seconds = time.perf_counter() - self.started
        self.reset()
        loss = loss / tokens if tokens else math.nan  # nan: every update of the window was skipped
        return {"loss": loss, "target_tokens_per_s": tokens / max(seconds, 1e-9)}


@contextlib.contextmanager
def _catch_signals(trainer: Trainer) -> Iterator[None]:
    """SIGINT/SIGTERM set a flag; the loop then saves `last.pt` and stops after the current step."""

    def handler(signum: int, _frame: object) -> None:
        if trainer.stop_signal is not None:  # a second Ctrl-C: stop at once
            raise KeyboardInterrupt
        trainer.stop_signal = signum
        log.warning("received signal %d: saving a checkpoint after this step", signum)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def train(cfg: Config, run_dir: Path, resume: bool = False, overwrite: bool = False) -> Path:
    """Train the configured model into `run_dir`; returns the path of the best checkpoint.

    Under torchrun every process calls this: the main one checks and prepares the run directory (training
    sentencepiece) while the others wait, then they load what it wrote.
    """
    with joined(resolve_device(cfg.train.device)) as (world, device):
        data = world.main_first(lambda: prepare_run(cfg, run_dir, resume, overwrite))
        data = data or prepare_data(cfg, run_dir, reuse_tokenizers=True)
        trainer = Trainer(cfg, run_dir, data, device, world)
        if resume:
            trainer.restore()
        trainer.fit_batch_tokens()
        log.info(
            "training %s (%.1fM parameters) on %s%s; %s",
            cfg.model.type,
            sum(p.numel() for p in trainer.model.parameters()) / 1e6,
            device,
            f" in each of {world.size} processes" if world.size > 1 else "",
            world.describe_batch(trainer.cfg.train),
        )
        best = trainer.run()
        main = world.is_main
    if cfg.train.final_report and main:
        final_report(cfg, run_dir, cfg.train.device)
    return best
