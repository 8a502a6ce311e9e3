"""The training loop: batches → loss → AdamW step, with validation, checkpoints, resume and stopping rules."""

from __future__ import annotations

import contextlib
import logging
import math
import os
import random
import signal
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import Tensor

from nmt.batch_size import fit_batch_tokens
from nmt.checkpoint import CheckpointWriter, load_checkpoint, vocabulary_record
from nmt.config import Config, TrainConfig, replace, save_config, to_dict, with_absolute_paths
from nmt.data.batching import Batch, token_budget_groups
from nmt.data.buckets import Buckets, batch_shapes
from nmt.data.prepare import PreparedData, prepare_data
from nmt.device import autocast, resolve_device
from nmt.distributed import World, joined
from nmt.errors import Interrupted, UserError
from nmt.graphs import CompileLog, TrainGraphs, cuda_graphs_possible, portable_optimizer_state
from nmt.loader import prefetch
from nmt.loss import sequence_loss
from nmt.models import build_model
from nmt.models.base import Seq2Seq
from nmt.monitor import Monitor
from nmt.report import final_report
from nmt.resume import rng_state, set_rng_state
from nmt.run_dir import RunDir
from nmt.validation import validation_scores

log = logging.getLogger(__name__)


@dataclass
class Progress:
    """Where training stands; saved in every checkpoint so `--resume` continues exactly."""

    step: int = 0
    epoch: int = 0
    batches_done: int = 0  # batches of the current epoch already trained on
    best_bleu: float = -1.0
    best_step: int = 0
    bad_evals: int = 0  # validations since the best one
    last_eval: int = -1  # step of the latest validation (a resumed finished run does not validate it again)
    elapsed: float = 0.0  # training seconds before this process started


def learning_rate_factor(step: int, cfg: TrainConfig) -> float:
    """Linear warmup to `lr`, then inverse-square-root decay (or constant)."""
    warmup = max(cfg.warmup_steps, 1)
    if cfg.schedule == "constant":
        return min(1.0, (step + 1) / warmup)
    return min((step + 1) / warmup, math.sqrt(warmup / (step + 1)))


def build_optimizer(model: Seq2Seq, cfg: TrainConfig) -> torch.optim.AdamW:
    """AdamW, fused (one kernel for all parameters; it skips a non-finite update on the device); no weight
    decay on biases, norms and embeddings."""
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and "embedding" not in n]
    no_decay = [p for n, p in model.named_parameters() if not (p.dim() >= 2 and "embedding" not in n)]
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=cfg.betas, fused=True)


class Trainer:
    """Holds the model, optimizer and progress of one run directory (in one process of `world`)."""

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
        graphs = cuda_graphs_possible(cfg.train, device, self.world.size, self.model)
        self.optimizer = build_optimizer(self.model, cfg.train)  # made capturable before the first capture
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda step: learning_rate_factor(step, cfg.train)
        )
        self.replica = self.world.wrap(self.model)  # DistributedDataParallel under torchrun
        compiled = cfg.train.compile and device.type == "cuda"
        static = cfg.train.static_shapes
        self.static_shapes = graphs or compiled if static == "auto" else static
        self.buckets: Buckets | None = None  # planned at the first epoch, when batch_tokens is known
        steps = (self.model, self.optimizer, self._micro_step, self._optimizer_step, cfg.train.max_shapes)
        self.graphs = TrainGraphs(*steps) if graphs else None
        compile_log = CompileLog(self.static_shapes, cfg.train.max_shapes, cfg.train.compile_mode)
        self.compile_log = compile_log if compiled else None
        self.forward = self.compile_log.compile(self.replica) if self.compile_log else self.replica
        self.progress = Progress()
        self.started = time.monotonic()
        self.stop_signal: int | None = None
        self.scaler = torch.amp.GradScaler(device.type, init_scale=1.0)  # only to skip non-finite updates
        self.skipped = torch.zeros((), dtype=torch.long, device=device)  # non-finite updates since reported
        self.bad_streak = torch.zeros((), dtype=torch.long, device=device)  # non-finite updates in a row
        self.oom_streak = 0  # updates in a row skipped for lack of GPU memory
        self.writer = CheckpointWriter()  # checkpoints are written in the background

    # --- checkpoints -------------------------------------------------------------------------------------

    def weights(self) -> dict:
        """What translation needs: the weights with their config and vocabulary (best.pt, snapshots)."""
        return {
            "model": self.model.state_dict(),
            "config": to_dict(self.cfg),
            "vocab": vocabulary_record(self.data.tokenizers),
            "step": self.progress.step,
        }

    def state(self, rng: list[dict]) -> dict:
        """What resuming needs besides the weights (last.pt): `rng` holds every process's RNG states (one
        entry unless distributed)."""
        return self.weights() | {
            "optimizer": portable_optimizer_state(self.optimizer),
            "scheduler": self.scheduler.state_dict(),
            "progress": asdict(self.progress),
            "rng": rng[0],
            **({"rng_ranks": rng} if len(rng) > 1 else {}),
        }

    def save_last(self) -> None:
        """Write last.pt; every process calls this (their RNG states are gathered), the main one writes."""
        rng = self.world.gather(rng_state())
        if self.world.is_main:
            self.writer.save(self.run_dir.checkpoint("last"), self.state(rng))

    def restore(self) -> None:
        """Continue from `last.pt`: weights, optimizer, schedule, progress, RNG and data position."""
        last = self.run_dir.checkpoint("last")
        checkpoint = load_checkpoint(last, self.device)
        if checkpoint["vocab"] != vocabulary_record(self.data.tokenizers):
            raise UserError(f"{last} does not match the run's sentencepiece model; cannot resume")
        self.model.load_state_dict(checkpoint["model"])
        try:
            self.optimizer.load_state_dict(checkpoint["optimizer"])
        except ValueError as err:  # e.g. written before self-attention fused its projections
            raise UserError(
                f"{last} holds optimizer state for other parameters than this version of "
                f"nmt builds ({err}); its weights still translate, but training cannot resume from it"
            ) from err
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
            self.run_dir.forget_metrics_after(self.progress.step)
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
        groups = token_budget_groups(
            self.data.train, cfg.batch_tokens, cfg.seed + self.progress.epoch, cfg.pad_to_multiple
        )[self.progress.batches_done :]
        size = self.world.update_batches(cfg)
        updates = [groups[i : i + size] for i in range(0, len(groups), size)]
        batches = self.world.batches(self.data.train, updates, cfg.pad_to_multiple)
        if self.static_shapes:
            batches = self.bucket_plan().pad(batches)
        with contextlib.closing(prefetch(batches, self.device)) as ready:
            for update in updates:
                yield len(update), [next(ready) for _ in self.world.share(update)]

    def bucket_plan(self) -> Buckets:
        """The static batch shapes, planned once from the shapes of an epoch's batches (the token-budget
        grouping gives every epoch the same shapes, in another order)."""
        if self.buckets is None:
            cfg = self.cfg.train
            groups = token_budget_groups(self.data.train, cfg.batch_tokens, cfg.seed, cfg.pad_to_multiple)
            src_len, tgt_len = self.data.train.lengths()
            shapes = batch_shapes(groups, src_len, tgt_len, cfg.pad_to_multiple)
            self.buckets = Buckets.plan(shapes, cfg.max_shapes)
            log.info("%s", self.buckets.describe())
        return self.buckets

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
        norm = self.graphs.update() if self.graphs else self._optimizer_step()
        self.scheduler.step()
        self.progress.step += 1
        finite = torch.isfinite(norm)
        self.skipped += ~finite
        self.bad_streak = (self.bad_streak + 1) * ~finite
        return torch.where(finite, loss_sum, 0.0), tokens * finite

    def _backward(self, batches: list[Batch], total_tokens: Tensor) -> Tensor:
        """Forward and backward pass of each batch, accumulating gradients; returns the summed loss."""
        loss_sum = torch.zeros((), device=self.device)
        micro_step = self.graphs.micro if self.graphs else self._micro_step
        for i, batch in enumerate(batches):
            with self.world.accumulating(self.replica, sync=i == len(batches) - 1):
                loss_sum += micro_step(batch, total_tokens)
        return loss_sum

    def _micro_step(self, batch: Batch, total_tokens: Tensor) -> Tensor:
        """Forward and backward of one batch, its gradient divided by the update's `total_tokens` (0-d);
        returns its summed loss. What a CUDA graph captures: no host sync, autocast without its cache."""
        if self.compile_log:
            self.compile_log.before(batch)
        with autocast(self.device, self.cfg.train.amp, cache=False):
            output = self.forward(batch.src, batch.src_mask, batch.tgt_in)
            loss = sequence_loss(output.logits, batch.tgt_out, self.cfg.train.label_smoothing)
        self.scaler.scale(loss * self.world.size / total_tokens).backward()
        if self.compile_log:
            self.compile_log.after()
        return loss.detach()

    def _optimizer_step(self) -> Tensor:
        """Unscale, clip, AdamW step, zero the gradients (in place under CUDA graphs, where they persist);
        returns the gradient norm before clipping. The fused AdamW skips a non-finite update on the device."""
        self.scaler.unscale_(self.optimizer)
        norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.train.clip_norm)
        self.scaler.step(self.optimizer)  # no update where a gradient is inf/NaN, decided on the device
        self.scaler.update(1.0)  # the scaler only detects non-finite gradients: the loss scale stays 1
        self.optimizer.zero_grad(set_to_none=self.graphs is None)
        return norm

    def _skip_out_of_memory(self, batches: list[Batch]) -> None:
        """Drop the gradients of an update that ran out of GPU memory; abort after too many in a row.

        Under torchrun the job ends instead: the other processes are already inside DDP's gradient
        all-reduce, which this one cannot join, so skipping alone would leave them waiting.
        """
        self.optimizer.zero_grad(set_to_none=self.graphs is None)  # captured graphs keep the gradients
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
            last = self.run_dir.checkpoint("last")
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
        self.monitor = Monitor(cfg, self.run_dir, self.world.is_main, progress.step)
        window = _Window(self.device, self.world)
        with _catch_signals(self), contextlib.closing(self.monitor), contextlib.closing(self.writer):
            while not self.should_stop() and not (cfg.max_epochs and progress.epoch >= cfg.max_epochs):
                for consumed, batches in self.epoch_updates():
                    updated = self._update(consumed, batches, window)
                    if updated and progress.step % cfg.eval_every == 0:
                        self.validate()
                    if self.should_stop():
                        break
                else:
                    progress.epoch, progress.batches_done = progress.epoch + 1, 0
            if progress.last_eval != progress.step and not self.interrupted():
                self.validate()
            progress.elapsed = self.elapsed()
            self.check_updates()
            self.save_last()
        if self.interrupted():  # also a barrier: no process exits while the main one still writes
            raise Interrupted(
                f"training interrupted at step {progress.step}; "
                f"{self.run_dir.checkpoint('last')} saved, continue with --resume"
            )
        return self.run_dir.checkpoint("best")

    def interrupted(self) -> bool:
        """Whether SIGINT/SIGTERM reached any process."""
        return self.world.any(self.stop_signal is not None)

    def _update(self, consumed: int, batches: list[Batch], window: _Window) -> bool:
        """Train on `batches`; False when the update was skipped for lack of GPU memory."""
        result = self.train_step(batches)
        self.progress.batches_done += consumed
        if result is None:
            return False
        window.add(*result)
        self.monitor.update()
        if self.progress.step % self.cfg.train.log_every == 0:
            self.check_updates()
            record = window.flush() | {
                "lr": float(self.scheduler.get_last_lr()[0]),
                "elapsed": self.elapsed(),
            }
            self.monitor.train(self.progress.step, self.progress.epoch, record)
        return True

    def validate(self) -> None:
        """Validate in the main process, share its verdict with the others; write last.pt, and best.pt when
        BLEU improved (in the background: the previous validation's files are on disk first)."""
        self.writer.wait()
        self.check_updates()
        progress = self.progress
        progress.last_eval = progress.step
        improved = self.score_validation() if self.world.is_main else False
        verdict = self.world.broadcast((progress.best_bleu, progress.best_step, progress.bad_evals, improved))
        progress.best_bleu, progress.best_step, progress.bad_evals, improved = verdict
        if improved and self.world.is_main:
            self.writer.save(self.run_dir.checkpoint("best"), self.weights())
        self.save_last()
        if self.cfg.train.keep_checkpoints and self.world.is_main:
            self.save_snapshot()

    def save_snapshot(self) -> None:
        """Keep this validation's weights as checkpoints/step<N>.pt (the newest `keep_checkpoints` only)."""
        self.writer.save(self.run_dir.snapshot(self.progress.step), self.weights())
        self.writer.later(self.prune_snapshots)

    def prune_snapshots(self) -> None:
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


def train(cfg: Config, out: Path, resume: bool = False, overwrite: bool = False) -> Path:
    """Train the configured model into the run directory `out`; returns the path of the best checkpoint.

    Under torchrun every process calls this: the main one checks and prepares the run directory (training
    sentencepiece) while the others wait, then they load what it wrote. Relative data paths are made absolute
    first, so that config.yaml in the run directory works from any working directory.
    """
    cfg, run_dir = with_absolute_paths(cfg), RunDir(out)

    def prepare() -> PreparedData:
        run_dir.prepare(cfg, resume, overwrite)
        data = prepare_data(cfg, run_dir.path, reuse_tokenizers=resume)
        save_config(cfg, run_dir.config)
        return data

    with run_dir.locked(hold=os.environ.get("RANK", "0") == "0"):  # the main process holds it, to the end
        with joined(resolve_device(cfg.train.device)) as (world, device):
            data = world.main_first(prepare) or prepare_data(cfg, run_dir.path, reuse_tokenizers=True)
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
