"""Where a training update's or a decoding step's time goes besides the math: operators (or CUDA kernel
launches) and host syncs, counted by torch.profiler, and the fraction of the wall time the GPU spends in
kernels.

On CUDA, launches are the runtime's kernel-launch calls and syncs the calls that make the host wait for the
device. Operators are the profiler's aten operators that do work (innermost ones; views, reshapes and
allocations excluded; a multi-tensor `_foreach_*`/`_fused_*` operator counts once, as on CUDA it launches
one or a few kernels), a device-independent measure of the work the host dispatches. On CPU, syncs are
`aten::_local_scalar_dense` (what `.item()` and `bool(tensor)` run) and `aten::nonzero` (a shape read from
the data), except inside the optimizer's step, where CPU AdamW reads each parameter's step counter (on CUDA
the fused kernel reads it on the device).
"""

from __future__ import annotations

import resource
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.autograd import DeviceType
from torch.autograd.profiler_util import FunctionEvent
from torch.profiler import ProfilerActivity, profile

from nmt.models.base import Seq2Seq, Step

NO_WORK = frozenset(
    f"aten::{name}"
    for name in [
        *["as_strided", "alias", "view", "_unsafe_view", "_reshape_alias", "reshape", "resolve_conj"],
        *["resolve_neg", "detach", "detach_", "empty", "empty_strided", "empty_like", "t", "transpose"],
        *["permute", "expand", "slice", "select", "unsqueeze", "squeeze", "split", "chunk", "unbind"],
        *["narrow", "to", "lift_fresh", "resize_", "set_", "item", "_local_scalar_dense"],
    ]
)  # views, reshapes, allocations and scalar reads: no kernel of their own
CPU_SYNCS = frozenset({"aten::_local_scalar_dense", "aten::nonzero"})
CUDA_LAUNCHES = frozenset({"cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx"})
CUDA_GRAPH_LAUNCHES = frozenset({"cudaGraphLaunch"})
CUDA_SYNCS = frozenset(
    {"cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy"}
)


@dataclass
class UpdateCosts:
    """Per-update averages over the profiled updates."""

    operators: float  # aten operators that do work
    optimizer_operators: float  # of them, inside the optimizer's step (a loop over parameters on CPU)
    host_syncs: float
    kernel_launches: float | None  # CUDA only; a graph replay counts as one launch
    kernel_seconds: float | None  # CUDA only: GPU time in kernels (and copies)


def profile_updates(work: Callable[[], int], device: torch.device) -> UpdateCosts:
    """Run `work` (which performs some updates or decoding steps and returns how many) under the profiler."""
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        updates = max(work(), 1)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    events = prof.events()
    working = [e for e in events if _does_work(e)]
    operators = len(working) / updates
    in_optimizer = sum(map(_inside_optimizer_step, working)) / updates
    if device.type != "cuda":
        syncs = sum(e.name in CPU_SYNCS and not _inside_optimizer_step(e) for e in events) / updates
        return UpdateCosts(operators, in_optimizer, syncs, None, None)
    launches = sum(e.name in CUDA_LAUNCHES or e.name in CUDA_GRAPH_LAUNCHES for e in events) / updates
    syncs = sum(e.name in CUDA_SYNCS for e in events) / updates
    kernel_us = sum(e.time_range.elapsed_us() for e in events if e.device_type == DeviceType.CUDA)
    return UpdateCosts(operators, in_optimizer, syncs, launches, kernel_us / 1e6 / updates)


def counting_steps(model: Seq2Seq, search: Callable[[], object]) -> Callable[[], int]:
    """`search` as a function that returns how many decoding steps it took (calls of `model.decode_step`: run
    it with its steps eager, since a step replayed from a CUDA graph runs no Python)."""

    def run() -> int:
        steps, step = 0, model.decode_step

        def counted(*args: Any) -> Step:
            nonlocal steps
            steps += 1
            return step(*args)

        model.decode_step = counted  # type: ignore[method-assign,assignment]
        try:
            search()
        finally:
            del model.decode_step  # the instance attribute shadowed the method
        return steps

    return run


def _does_work(event: FunctionEvent) -> bool:
    """An operator that launches work: a multi-tensor one (`_foreach_*`, `_fused_*`: one or a few kernels on
    CUDA, a loop over tensors on CPU) counts once; otherwise an innermost aten operator that is not a view,
    reshape or allocation, and not part of a multi-tensor one."""
    name = event.name
    if _multi_tensor(name):
        return True
    if not name.startswith("aten::") or name in NO_WORK:
        return False
    if any(child.name.startswith("aten::") for child in event.cpu_children):
        return False
    parent = event.cpu_parent
    while parent is not None:
        if _multi_tensor(parent.name):
            return False
        parent = parent.cpu_parent
    return True


def _multi_tensor(name: str) -> bool:
    return name.startswith(("aten::_foreach_", "aten::_fused_"))


def _inside_optimizer_step(event: FunctionEvent) -> bool:
    """Whether the event ran inside `Optimizer.step` (which the profiler labels `Optimizer.step#…`)."""
    parent = event.cpu_parent
    while parent is not None:
        if parent.name.startswith("Optimizer.step#"):
            return True
        parent = parent.cpu_parent
    return False


def peak_resident_gib() -> float:
    """The process's peak resident memory so far (ru_maxrss: KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (2**30 if sys.platform == "darwin" else 2**20)
