"""Choosing the device and the matching numeric settings (bf16 autocast on CUDA), and what every CUDA graph
capture needs first (nmt/train/step_graphs.py, nmt/decode/step_graphs.py)."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator
from typing import TypeAlias

import torch
from torch import Tensor

from nmt.errors import UserError

GraphPool: TypeAlias = "torch.cuda._POOL_HANDLE"  # the memory pool torch.cuda.graph_pool_handle() names
WARMUP_RUNS = 1  # eager runs on a side stream before each capture (cuBLAS workspaces, lazy initialisation)


def resolve_device(name: str) -> torch.device:
    """'auto' → cuda when available, else cpu; 'cuda' without a GPU is a user error."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if not re.fullmatch(r"cpu|cuda(:[0-9]{1,3})?", name):  # torch knows mps, xpu, meta …: nmt runs on these
        raise UserError(f"unknown device '{name}'; use auto, cpu, cuda or cuda:N")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise UserError(f"--device {name} was requested but no CUDA GPU is available; use --device cpu")
    device = torch.device(name)
    if device.index is not None and device.index >= torch.cuda.device_count():
        raise UserError(f"--device {name}: there are {torch.cuda.device_count()} CUDA GPU(s), from cuda:0")
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True  # float32 work (the RNNs) on tensor cores
        torch.backends.cudnn.allow_tf32 = True
    return device


@contextlib.contextmanager
def autocast(device: torch.device, enabled: bool = True, cache: bool = True) -> Iterator[None]:
    """bf16 autocast on CUDA; nothing on CPU (where bf16 matmuls are slow on most machines).

    `cache=False` casts a weight at each use instead of once per region: what a CUDA graph capture needs, and
    no loss in a training step, which uses each weight once per forward pass.
    """
    on = enabled and device.type == "cuda"
    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=on, cache_enabled=cache):
        yield


def uncached_autocast() -> contextlib.AbstractContextManager:
    """The current CUDA autocast setting without its cache of cast weights (it must not outlive a capture)."""
    return torch.autocast(
        "cuda",
        dtype=torch.get_autocast_dtype("cuda"),
        enabled=torch.is_autocast_enabled("cuda"),
        cache_enabled=False,
    )


def warm_up(work: Callable[[], object], grads: list[Tensor]) -> None:
    """Run `work` eagerly on a side stream, as the CUDA graph docs ask before capturing it; the gradients and
    the random number generators are left as they were."""
    saved = [grad.clone() for grad in grads]
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.random.fork_rng(devices=[torch.cuda.current_device()]), torch.cuda.stream(stream):
        for _ in range(WARMUP_RUNS):
            work()
    torch.cuda.current_stream().wait_stream(stream)
    for grad, old in zip(grads, saved, strict=True):
        grad.copy_(old)
