"""The training step in CUDA graphs (`train.cuda_graphs`), and torch.compile's bookkeeping (`train.compile`).

A CUDA graph replays a recorded sequence of kernels with one launch, removing the host's per-kernel launch
cost and Python overhead, which bound training at Multi30k's batch sizes. The price is static shapes
(nmt/data/buckets.py pads training batches to a few planned shapes) and no host syncs inside the captured
region.

The recipe is PyTorch's documented one (`torch.cuda.graph`; "whole-network capture" in the CUDA semantics
notes): warm up on a side stream before capturing, copy new inputs into the captured (static) input tensors
before each replay, step a `capturable` AdamW whose learning rate is a device tensor, and capture autocast
without its weight cache. Gradients live as long as the model (zeroed in place, never set to None), so every
captured backward accumulates into the same tensors. A capture that fails falls back to eager execution with a
warning.

Capture is a backend (nmt/device/capture.py): CUDA graphs on a GPU; in CPU tests the recorder, which runs the
same bookkeeping and refuses host reads inside a captured step (tests/train/test_captured_training.py);
tests/test_gpu.py checks the real graphs against eager on a GPU.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
import warnings
from collections.abc import Callable, Iterator, Sequence

import torch
from torch import Tensor

from nmt.config.sections import TrainConfig
from nmt.data.batching import Batch
from nmt.device.capture import Capture, Captured, GraphPool, capture_for

log = logging.getLogger(__name__)


def training_capture(cfg: TrainConfig, device: torch.device, processes: int) -> Capture | None:
    """How the training step is captured when `train.cuda_graphs` applies: on a device that captures (CUDA),
    in a single process (the log says why not); None: eager."""
    if not cfg.cuda_graphs:
        return None
    capture = capture_for(device)
    if capture is None:
        log.info("train.cuda_graphs applies on CUDA only; training on %s without graphs", device)
        return None
    if processes > 1:
        log.warning(
            "train.cuda_graphs is off under torchrun: DDP's gradient all-reduce inside a captured backward "
            "is not supported here; training without graphs"
        )
        return None
    return capture


class TrainGraphs:
    """The training step in CUDA graphs: `micro_step(batch, total_tokens)` (forward and backward of one batch,
    accumulating gradients) captured once per batch shape, and `update()` (unscale, clip, AdamW, zero the
    gradients; returns the gradient norm) captured once.

    At most `max_shapes` shapes are captured; batches of other shapes run eagerly (into the same gradients).
    All captures share one memory pool: they replay one at a time on one stream, and each replay's outputs
    (a loss, a norm) are consumed by kernels queued right after it, before the next replay reuses the memory.
    A batch's shape is that of every one of its tensors (`Batch.shapes`): with and without alignment links
    are two shapes.
    """

    def __init__(
        self,
        capture: Capture,
        model: torch.nn.Module,
        optimizer: torch.optim.Optimizer,
        micro_step: Callable[[Batch, Tensor], Tensor],
        update: Callable[[], Tensor],
        max_shapes: int,
    ) -> None:
        self.capture, self.model, self.optimizer, self.max_shapes = capture, model, optimizer, max_shapes
        self.micro_step, self.update_step = micro_step, update
        self.captured: dict[tuple, _CapturedMicro] = {}
        self.eager_shapes: set[tuple] = set()
        self.update_graph: _CapturedUpdate | None = None
        self.eager_update = False
        self.pool: GraphPool | None = None
        self.capture_seconds = 0.0

    @property
    def grads(self) -> list[Tensor]:
        return [p.grad for p in self.model.parameters() if p.grad is not None]

    @property
    def state(self) -> list[Tensor]:
        """What an optimizer update changes: the weights, their gradients, the optimizer's state tensors."""
        moments = [t for s in self.optimizer.state.values() for t in s.values() if isinstance(t, Tensor)]
        return [*self.model.parameters(), *self.grads, *moments]

    def micro(self, batch: Batch, total_tokens: Tensor) -> Tensor:
        """Forward and backward of `batch`, its gradient divided by `total_tokens` (0-d); returns its loss."""
        key = batch.shapes()
        if key not in self.captured and key not in self.eager_shapes:
            self._capture_micro(key, batch, total_tokens)
        if key in self.eager_shapes:
            return self.micro_step(batch, total_tokens)
        return self.captured[key](batch, total_tokens)

    def update(self) -> Tensor:
        """The optimizer update from the accumulated gradients; returns their norm before clipping."""
        if self.update_graph is None and not self.eager_update:
            self._prepare()
            try:
                with self._timed("the optimizer update"):
                    self.update_graph = _CapturedUpdate(
                        self.capture, self.update_step, self.grads, lambda: self.state, self.pool
                    )
            except Exception as err:  # graph capture is a beta API: fall back to an eager update
                log.warning("the optimizer update runs without a CUDA graph: capture failed (%s)", err)
                self.eager_update = True
        return self.update_step() if self.update_graph is None else self.update_graph()  # None: it failed

    def _capture_micro(self, key: tuple, batch: Batch, total_tokens: Tensor) -> None:
        """Capture forward and backward for the shape of `batch`, or mark the shape eager (cap reached, or
        the capture failed)."""
        shape = "×".join(map(str, (batch.size, batch.src.size(1), batch.tgt_in.size(1))))
        shape += " with alignment links" if batch.links is not None else ""
        if len(self.captured) >= self.max_shapes:
            log.warning(
                "batch shape %s runs without a CUDA graph: %d shapes already captured",
                shape,
                len(self.captured),
            )
            self.eager_shapes.add(key)
            return
        self._prepare()
        try:
            count = f"{len(self.captured) + 1} of at most {self.max_shapes}"
            with self._timed(f"the training step for batch shape {shape} ({count})"):
                self.captured[key] = _CapturedMicro(
                    self.capture, self.micro_step, batch, total_tokens, self.grads, self.pool
                )
        except Exception as err:  # graph capture is a beta API: fall back to eager for this shape
            log.warning("batch shape %s runs without a CUDA graph: capture failed (%s)", shape, err)
            self.eager_shapes.add(key)

    def _prepare(self) -> None:
        """Before the first capture (after a checkpoint was loaded): gradients that persist, a capturable
        optimizer whose learning rates are device tensors (the scheduler then fills them in place), one
        memory pool for all captures."""
        if self.pool is not None:
            return
        for param in self.model.parameters():
            if param.requires_grad and param.grad is None:
                param.grad = torch.zeros_like(param)
        device = next(self.model.parameters()).device
        for group in self.optimizer.param_groups:
            group["capturable"] = True  # a loaded optimizer state brings the flag it was saved with
            if not isinstance(group["lr"], Tensor):
                group["lr"] = torch.tensor(group["lr"], dtype=torch.float32, device=device)
        self.pool = self.capture.pool()

    @contextlib.contextmanager
    def _timed(self, what: str) -> Iterator[None]:
        """Log before and after a capture, with its seconds; a capture never runs without a word."""
        log.info("capturing %s in a CUDA graph …", what)
        started = time.perf_counter()
        yield
        self.capture.synchronize()
        seconds = time.perf_counter() - started
        self.capture_seconds += seconds
        log.info("captured in %.1f s (%.1f s of CUDA graph capture so far)", seconds, self.capture_seconds)


class _CapturedMicro:
    """Forward and backward of one batch shape; the batch and token count are copied in before a replay."""

    def __init__(
        self,
        capture: Capture,
        micro_step: Callable[[Batch, Tensor], Tensor],
        batch: Batch,
        total_tokens: Tensor,
        grads: list[Tensor],
        pool: GraphPool | None,
    ) -> None:
        self.batch = batch.apply(Tensor.clone)
        self.total_tokens = total_tokens.clone()
        capture.warm_up(self._step(micro_step), grads)
        self.graph: Captured = capture.capture(self._step(micro_step), pool, grads)

    def _step(self, micro_step: Callable[[Batch, Tensor], Tensor]) -> Callable[[], Tensor]:
        return lambda: micro_step(self.batch, self.total_tokens)

    def __call__(self, batch: Batch, total_tokens: Tensor) -> Tensor:
        for name, tensor in batch.tensors().items():
            self.batch.tensors()[name].copy_(tensor)
        self.total_tokens.copy_(total_tokens)
        loss = self.graph.replay()
        assert loss is not None
        return loss


class _CapturedUpdate:
    """The optimizer update. Its warm-up runs with a NaN gradient, which the fused AdamW skips on the device,
    so that warming up changes neither the weights nor the optimizer state (which it creates); `state()` is
    all that an update changes, what the recorder's capture puts back."""

    def __init__(
        self,
        capture: Capture,
        update: Callable[[], Tensor],
        grads: list[Tensor],
        state: Callable[[], Sequence[Tensor]],
        pool: GraphPool | None,
    ) -> None:
        def skipped_update() -> Tensor:
            grads[0].fill_(math.nan)
            return update()

        with warnings.catch_warnings():  # capturable AdamW warns when stepped outside a capture
            warnings.simplefilter("ignore")
            capture.warm_up(skipped_update, grads)
            self.graph = capture.capture(update, pool, state())

    def __call__(self) -> Tensor:
        norm = self.graph.replay()
        assert norm is not None
        return norm


class CompileLog:
    """`train.compile`: torch.compile compiles again for each new batch shape, which can take a minute, so
    every first batch of a shape is announced, and timed. With static shapes each planned shape compiles
    once (`dynamic=False`, and the recompile limit raised to the number of shapes). `mode` is torch.compile's
    (`reduce-overhead` adds CUDA graphs of its own: the alternative to `train.cuda_graphs` to measure)."""

    def __init__(self, static_shapes: bool, max_shapes: int, mode: str = "default") -> None:
        self.static_shapes, self.max_shapes, self.mode = static_shapes, max_shapes, mode
        self.seen: set[tuple[int, int, int]] = set()
        self.started: float | None = None
        self.seconds = 0.0

    def compile(self, module: torch.nn.Module) -> Callable:
        if not self.static_shapes:
            return torch.compile(module, mode=self.mode)
        limit = torch._dynamo.config.cache_size_limit
        torch._dynamo.config.cache_size_limit = max(limit, self.max_shapes + 8)
        return torch.compile(module, mode=self.mode, dynamic=False)

    def before(self, batch: Batch) -> None:
        """Called before the forward pass of `batch`."""
        shape = (batch.size, batch.src.size(1), batch.tgt_in.size(1))
        self.started = None
        if shape not in self.seen:
            self.seen.add(shape)
            log.info(
                "train.compile: first batch of shape %s (%d shapes so far), compiling …",
                "×".join(map(str, shape)),
                len(self.seen),
            )
            self.started = time.perf_counter()

    def after(self) -> None:
        """Called after the backward pass."""
        if self.started is not None:
            torch.cuda.synchronize()
            seconds = time.perf_counter() - self.started
            self.seconds += seconds
            log.info(
                "train.compile: step done in %.1f s (%.1f s on first batches of a shape so far)",
                seconds,
                self.seconds,
            )
