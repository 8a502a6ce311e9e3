"""One optimizer update: forward and backward of each of its batches (gradient accumulation), then unscale,
clip and the fused AdamW step — run eagerly, replayed from CUDA graphs (nmt/train/step_graphs.py) or
torch.compile'd — and its guards. The loop around it is nmt/train/loop.py.

The guards decide what happens when an update's loss is not finite or it does not fit in GPU memory. A
non-finite update is skipped on the device (the fused AdamW does not apply it) and counted there, without a
host sync; `UpdateGuards.check` reads the counts where the host waits anyway and ends training after
`max_bad_steps` in a row. An update that runs out of GPU memory is skipped with a warning, and ends training
after as many in a row; under torchrun it ends the job at once, since the other processes already wait in
DDP's all-reduce.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from pathlib import Path

import torch
from torch import Tensor

from nmt.config.sections import TrainConfig
from nmt.data.batching import Batch
from nmt.device.choice import autocast
from nmt.errors import UserError
from nmt.models.base import Output, Seq2Seq, Wanted
from nmt.train.distributed import World
from nmt.train.loss import alignment_loss, sequence_loss, with_null_links
from nmt.train.step_graphs import CompileLog, TrainGraphs, training_capture

log = logging.getLogger(__name__)


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


class UpdateGuards:
    """Counts skipped updates and decides when there were too many."""

    def __init__(self, device: torch.device, max_bad_steps: int) -> None:
        self.max_bad_steps = max_bad_steps
        self.skipped = torch.zeros((), dtype=torch.long, device=device)  # non-finite updates since reported
        self.bad_streak = torch.zeros((), dtype=torch.long, device=device)  # non-finite updates in a row
        self.oom_streak = 0  # updates in a row skipped for lack of GPU memory

    def count(self, norm: Tensor) -> Tensor:
        """Record an update whose gradient norm was `norm` (0-d); returns whether it was finite (0-d bool)."""
        finite = torch.isfinite(norm)
        self.skipped += ~finite
        self.bad_streak = (self.bad_streak + 1) * ~finite
        self.oom_streak = 0
        return finite

    def out_of_memory(self, batches: list[Batch], step: int, batch_tokens: int, distributed: bool) -> None:
        """Record an update skipped for lack of GPU memory; raise UserError when training must end."""
        self.oom_streak += 1
        shapes = "; ".join(
            f"{b.size} sentences, source length {b.src.size(1)}, target length {b.tgt_in.size(1)}"
            for b in batches
        )
        if distributed:
            raise UserError(
                f"out of GPU memory at step {step} on a batch of {shapes}; all processes stop (each update "
                f"needs them all): lower train.batch_tokens (now {batch_tokens}) and --resume"
            )
        log.warning("step %d: out of GPU memory on a batch of %s; batch skipped", step, shapes)
        if self.oom_streak >= self.max_bad_steps:
            raise UserError(
                f"out of GPU memory on {self.oom_streak} batches in a row; lower train.batch_tokens "
                f"(now {batch_tokens}) or the model size"
            )

    def check(self, step: int, last: Path) -> None:
        """Report non-finite updates skipped since the last check (one host sync); raise UserError after
        `max_bad_steps` in a row. Skipped updates left the weights as they were and the abort writes nothing,
        so `last` (last.pt) keeps the last good weights."""
        skipped, streak = torch.stack([self.skipped, self.bad_streak]).tolist()
        if skipped:
            self.skipped.zero_()
            log.warning("step %d: %d updates skipped for non-finite loss/gradients", step, skipped)
        if streak >= self.max_bad_steps:
            kept = f"last good checkpoint: {last}" if last.is_file() else "no checkpoint was written"
            raise UserError(
                f"loss became NaN/inf in {streak} consecutive steps; {kept}; lower train.lr or check the data"
            )


class Update:
    """`update(batches, step, batch_tokens)` trains on one update's batches; it owns the optimizer, the
    learning-rate schedule and how the step runs (eager, CUDA graphs or compiled). With `align_layer`
    (guided alignment, `train.alignment`) the loss adds the weighted alignment loss of that decoder layer's
    attention; its sum since the last read is `alignment_sum` (0-d, on the device)."""

    def __init__(
        self,
        model: Seq2Seq,
        cfg: TrainConfig,
        device: torch.device,
        world: World,
        align_layer: int | None = None,
    ) -> None:
        self.model, self.cfg, self.device, self.world = model, cfg, device, world
        self.guide = cfg.alignment if align_layer is not None else None
        self.align_layer = align_layer
        full_context = self.guide is not None and self.guide.full_context
        self.wanted = Wanted(align_layer=align_layer, full_context=full_context)  # what each step computes
        self.alignment_sum = torch.zeros((), device=device)
        capture = training_capture(cfg, device, world.size)
        self.optimizer = build_optimizer(model, cfg)  # made capturable before the first capture
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda step: learning_rate_factor(step, cfg)
        )
        self.replica = world.wrap(model)  # DistributedDataParallel under torchrun
        self.scaler = torch.amp.GradScaler(device.type, init_scale=1.0)  # only to skip non-finite updates
        self.guards = UpdateGuards(device, cfg.max_bad_steps)
        steps = (model, self.optimizer, self._micro_step, self._optimizer_step, cfg.max_shapes)
        self.graphs = TrainGraphs(capture, *steps) if capture else None
        compiled = cfg.compile and device.type == "cuda"
        self.static_shapes = bool(capture) or compiled if cfg.static_shapes == "auto" else cfg.static_shapes
        compile_log = CompileLog(self.static_shapes, cfg.max_shapes, cfg.compile_mode)
        self.compile_log = compile_log if compiled else None
        self.forward: Callable[..., Output] = self.replica
        if self.compile_log:
            self.forward = self.compile_log.compile(self.replica)

    def __call__(self, batches: list[Batch], step: int, batch_tokens: int) -> tuple[Tensor, Tensor] | None:
        """One update over `batches`; returns their summed loss and target tokens (0-d tensors).

        Distributed, the loss is divided by the target tokens of all processes, times their number as DDP
        averages the gradients: each update's gradient is that of one process doing all the batches. An update
        with non-finite gradients is skipped on the device, without a host sync (its loss and tokens count as
        0; the guards report it later). Batches that do not fit in GPU memory are skipped with a warning, and
        None is returned. `step` and `batch_tokens` only name the update in messages.
        """
        tokens = torch.stack([batch.target_tokens() for batch in batches]).sum()
        total_tokens = self.world.sum(tokens)  # of all processes
        try:
            losses = self._backward(batches, total_tokens)
        except torch.cuda.OutOfMemoryError:
            losses = None
        if losses is None:  # outside the except block, which keeps the failed step's tensors alive
            self.optimizer.zero_grad(set_to_none=self.graphs is None)  # captured graphs keep the gradients
            torch.cuda.empty_cache()
            self.guards.out_of_memory(batches, step, batch_tokens, self.world.size > 1)
            return None
        norm = self.graphs.update() if self.graphs else self._optimizer_step()
        self.scheduler.step()
        finite = self.guards.count(norm)
        self.alignment_sum += torch.where(finite, losses[1], 0.0)
        return torch.where(finite, losses[0], 0.0), tokens * finite

    def _backward(self, batches: list[Batch], total_tokens: Tensor) -> Tensor:
        """Forward and backward pass of each batch, accumulating gradients; returns the summed translation
        and alignment losses, (2,)."""
        losses = torch.zeros(2, device=self.device)
        micro_step = self.graphs.micro if self.graphs else self._micro_step
        for i, batch in enumerate(batches):
            with self.world.accumulating(self.replica, sync=i == len(batches) - 1):
                losses += micro_step(batch, total_tokens)
        return losses

    def _micro_step(self, batch: Batch, total_tokens: Tensor) -> Tensor:
        """Forward and backward of one batch, its gradient divided by the update's `total_tokens` (0-d);
        returns its summed translation and alignment losses, (2,) (the latter 0 without guided alignment).
        What a CUDA graph captures: no host sync, autocast without its cache."""
        if self.compile_log:
            self.compile_log.before(batch)
        losses = self._forward_backward(self.forward, batch, total_tokens)
        if self.compile_log:
            self.compile_log.after()
        return losses

    def probe(self, batch: Batch) -> None:
        """The forward and backward of a micro step on `batch` (guided alignment included), with the model
        itself (not compiled, not DDP's replica); its gradients are dropped: what `train.batch_tokens: auto`
        measures."""
        try:
            self._forward_backward(self.model, batch, batch.target_tokens())
        finally:
            self.model.zero_grad(set_to_none=True)

    def _forward_backward(self, forward: Callable[..., Output], batch: Batch, total_tokens: Tensor) -> Tensor:
        """`_micro_step`'s work with the model `forward`."""
        with autocast(self.device, self.cfg.amp, cache=False):
            output = forward(batch.src, batch.src_mask, batch.tgt_in, self.wanted)
            assert output.logits is not None
            loss = sequence_loss(output.logits, batch.tgt_out, self.cfg.label_smoothing)
            aligned, total = loss.new_zeros(()), loss
            if self.guide is not None:
                assert output.alignment is not None and batch.links is not None
                links = batch.links
                if self.guide.null_slot:
                    links = with_null_links(links, batch.src, batch.tgt_out)
                aligned = alignment_loss(output.alignment, links, self.guide.heads, self.guide.shift)
                total = loss + self.guide.weight * aligned
        self.scaler.scale(total * self.world.size / total_tokens).backward()
        return torch.stack([loss, aligned]).detach()

    def _optimizer_step(self) -> Tensor:
        """Unscale, clip, AdamW step, zero the gradients (in place under CUDA graphs, where they persist);
        returns the gradient norm before clipping. The fused AdamW skips a non-finite update on the device."""
        self.scaler.unscale_(self.optimizer)
        limit = self.cfg.clip_norm or math.inf  # 0: no clipping
        norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), limit)
        self.scaler.step(self.optimizer)  # no update where a gradient is inf/NaN, decided on the device
        self.scaler.update(1.0)  # the scaler only detects non-finite gradients: the loss scale stays 1
        self.optimizer.zero_grad(set_to_none=self.graphs is None)
        return norm
