"""What a run's checkpoints hold, written and read here and nowhere else (the files themselves are
nmt/run/checkpoint_io.py).

```
best.pt, checkpoints/step<N>.pt   what translation needs: model (state dict), config (dict), vocab (the
                                  tokenizers' sizes and fingerprints), step
averaged.pt                       the same, with averaged_steps instead of step (nmt/run/average.py)
last.pt                           the same as best.pt, and what resuming needs: optimizer (as an eager run
                                  writes it), scheduler, progress (nmt/train/progress.py's fields), rng (this
                                  process's generators), rng_ranks (every process's, under torchrun)
```
"""

from __future__ import annotations

import logging
import random
from pathlib import Path
from typing import Any

import torch
from torch import nn

from nmt.config.schema import Config
from nmt.config.yaml_file import to_dict
from nmt.data.tokenizer import Tokenizers
from nmt.errors import UserError
from nmt.run.checkpoint_io import check_entries, incomplete

log = logging.getLogger(__name__)


# --- the vocabulary -----------------------------------------------------------------------------------------


def vocabulary_record(tokenizers: Tokenizers, legacy: bool = False) -> dict[str, Any]:
    """What a checkpoint stores about its vocabulary, to refuse pairing it with another one (`legacy`: as
    checkpoints recorded it before the fingerprints covered the pieces rather than the model files)."""
    return {
        "src_size": len(tokenizers.src),
        "tgt_size": len(tokenizers.tgt),
        "src_sha256": tokenizers.src.file_sha256 if legacy else tokenizers.src.fingerprint,
        "tgt_sha256": tokenizers.tgt.file_sha256 if legacy else tokenizers.tgt.fingerprint,
    }


def same_vocabulary(record: Any, tokenizers: Tokenizers) -> bool:
    """Whether a checkpoint's vocabulary record is that of `tokenizers` (also in the legacy form)."""
    return record in (vocabulary_record(tokenizers), vocabulary_record(tokenizers, legacy=True))


# --- writing ------------------------------------------------------------------------------------------------


def weights_checkpoint(model: nn.Module, cfg: Config, tokenizers: Tokenizers, step: int) -> dict[str, Any]:
    """best.pt and the snapshots: the weights with their config and vocabulary, what translation needs."""
    return {
        "model": model.state_dict(),
        "config": to_dict(cfg),
        "vocab": vocabulary_record(tokenizers),
        "step": step,
    }


def averaged_checkpoint(weights: dict[str, torch.Tensor], newest: dict[str, Any], steps: list[int]) -> dict:
    """averaged.pt: the mean `weights` of the snapshots of `steps`, with the newest one's config and
    vocabulary."""
    return {
        "model": weights,
        "config": newest["config"],
        "vocab": newest.get("vocab"),
        "averaged_steps": steps,
    }


def training_checkpoint(
    weights: dict[str, Any],
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    progress: dict[str, Any],
    rng: list[dict[str, Any]],
) -> dict[str, Any]:
    """last.pt: `weights_checkpoint`'s contents and the state of training; `rng` holds the random states of
    every process (one entry in a single process)."""
    return weights | {
        "optimizer": portable_optimizer_state(optimizer),
        "scheduler": scheduler.state_dict(),
        "progress": progress,
        "rng": rng[0],
        **({"rng_ranks": rng} if len(rng) > 1 else {}),
    }


def portable_optimizer_state(optimizer: torch.optim.Optimizer) -> dict:
    """The optimizer's state dict as an eager run writes it: float learning rates, not capturable (CUDA graphs
    make them device tensors, and capturable), so that a checkpoint resumes with or without graphs."""
    state = optimizer.state_dict()
    state["param_groups"] = [
        {**group, "lr": float(group["lr"]), "capturable": False} for group in state["param_groups"]
    ]
    return state


def rng_state() -> dict:
    """This process's random number generator states (torch CPU and CUDA, Python's `random`)."""
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all(),
        "python": random.getstate(),
    }


# --- reading ------------------------------------------------------------------------------------------------


def check_training_state(path: Path, payload: dict[str, Any]) -> None:
    """Raise UserError unless `payload` (last.pt) holds what resuming needs besides the weights."""
    check_entries(path, payload, {"optimizer": dict, "scheduler": dict, "progress": dict, "rng": dict})
    if not isinstance(payload["optimizer"].get("state"), dict) or not isinstance(
        payload["optimizer"].get("param_groups"), list
    ):
        raise incomplete(path, "'optimizer' is not an optimizer state (state and param_groups)")
    if not isinstance(payload["progress"].get("step"), int):
        raise incomplete(path, "'progress' has no step")


def trained_batch_tokens(state: dict[str, Any]) -> int:
    """The token budget a run trained with (checkpoints written before it moved into the progress keep it in
    their config)."""
    return state["progress"].get("batch_tokens") or state["config"]["train"]["batch_tokens"]


def restore_training(
    path: Path,
    state: dict[str, Any],
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    tokenizers: Tokenizers,
) -> dict[str, Any]:
    """Load last.pt (`state`, read from `path`) into the model, optimizer and schedule; returns the saved
    progress (data position and token budget included)."""
    if not same_vocabulary(state["vocab"], tokenizers):
        raise UserError(f"{path} does not match the run's sentencepiece model; cannot resume")
    model.load_state_dict(state["model"])
    try:
        optimizer.load_state_dict(state["optimizer"])
    except ValueError as err:  # e.g. written before self-attention fused its projections
        raise UserError(
            f"{path} holds optimizer state for other parameters than this version of "
            f"nmt builds ({err}); its weights still translate, but training cannot resume from it"
        ) from err
    scheduler.load_state_dict(state["scheduler"])
    return state["progress"] | {"batch_tokens": trained_batch_tokens(state)}


def restore_rng(state: dict[str, Any], rank: int, processes: int, reseed: int) -> None:
    """The saved random states of process `rank` of `processes`; a run saved by another number of processes
    gives the processes past the first a seed of their own (`reseed` + rank), so their dropout differs."""
    saved = state.get("rng_ranks", [state["rng"]])
    set_rng_state(saved[rank % len(saved)])
    if len(saved) != processes:
        log.warning("resuming in %d processes a run saved by %d: dropout will differ", processes, len(saved))
        if rank:
            torch.manual_seed(reseed + rank)


def set_rng_state(state: dict) -> None:
    """Restore what `rng_state` returned (as loaded from a checkpoint)."""
    torch.set_rng_state(state["torch"].cpu())
    if torch.cuda.is_available() and state["cuda"]:
        torch.cuda.set_rng_state_all([s.cpu() for s in state["cuda"]])
    random.setstate(as_python_rng_state(state["python"]))


def as_python_rng_state(state: list | tuple) -> tuple:
    """random.setstate wants tuples; a checkpoint may hand back lists."""
    version, internal, gauss = state
    return version, tuple(internal), gauss
