"""Choosing the device and the matching numeric settings: bf16 autocast on CUDA, float32 where a result must
not depend on the device (word alignments)."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator

import torch

from nmt.errors import UserError


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
        if device.index is not None:  # the current device too: CUDA graphs capture on it
            torch.cuda.set_device(device)
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


@contextlib.contextmanager
def full_precision(device: torch.device) -> Iterator[None]:
    """float32 inside, whatever autocast is active around it, and on CUDA without TF32 matmuls: for results
    that must be the same on every device (the attention word alignments read, where bf16 moves argmax
    ties)."""
    matmul, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn
    tf32 = matmul.allow_tf32, cudnn.allow_tf32
    try:
        matmul.allow_tf32 = cudnn.allow_tf32 = False
        with torch.autocast(device.type, enabled=False):
            yield
    finally:
        matmul.allow_tf32, cudnn.allow_tf32 = tf32
