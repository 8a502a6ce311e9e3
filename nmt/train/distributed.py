"""Data-parallel training in processes started by torchrun: the process group, each process's share of the
data, the DistributedDataParallel wrapper, and the few decisions all processes must take together.

`torchrun --nproc_per_node N -m nmt train …` (or `nmt train … --nproc N`, which starts torchrun) runs N copies
of the training loop, one per GPU (or CPU process). Every copy builds the same token-budget batches from the
same seed and takes its share of each update's batches; DDP all-reduces the gradients in buckets and every
replica takes the same optimizer step. Stop signals, the time limit and the validation verdict are agreed by
small CPU collectives, so that all processes leave the loop at the same step: a mismatched collective hangs.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from argparse import Namespace
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import TypeVar

import torch
import torch.distributed as dist
from torch import Tensor, nn
from torch.nn.parallel import DistributedDataParallel

from nmt.config.sections import TrainConfig
from nmt.data.arrays import EncodedCorpus
from nmt.data.batching import Batch, IntSequence, collate
from nmt.data.special_tokens import PAD
from nmt.errors import REPORTS_ENV, PeerFailed, UserError

T = TypeVar("T")

# How long a process waits in a collective before giving up: the others wait this long for validation too.
TIMEOUT = timedelta(minutes=30)


@dataclass(frozen=True)
class World:
    """This process's place among the processes of one training job: rank 0 of 1 when not distributed.

    Every method that communicates must be called by all processes at the same point of the loop.
    """

    rank: int = 0
    size: int = 1

    @property
    def is_main(self) -> bool:
        """The process that validates and writes the run directory."""
        return self.rank == 0

    def update_batches(self, cfg: TrainConfig) -> int:
        """Batches of the epoch one optimizer update uses: `accumulate`, times the processes when
        `distributed_batch` is `scale` (each process then takes whole batches)."""
        return cfg.accumulate * (self.size if cfg.distributed_batch == "scale" else 1)

    def share(self, update: Sequence[IntSequence]) -> Sequence[IntSequence]:
        """This process's part of one update's batches (lists of example indices); the parts of all processes
        make up the update exactly. Whole batches when they divide evenly among the processes, else every
        batch split by sentences (batches are sorted by length, so the parts are alike). An empty part means
        the process has no sentence of that batch: it runs a stand-in that adds nothing (see `batches`)."""
        if len(update) % self.size == 0:
            return update[self.rank :: self.size]
        return [group[self.rank :: self.size] for group in update]

    def batches(
        self, corpus: EncodedCorpus, updates: Sequence[Sequence[IntSequence]], multiple: int
    ) -> Iterator[Batch]:
        """Collate this process's part of each update in order. An empty part becomes the update's first
        sentence with its targets masked (and no alignment links): DDP needs every process in every gradient
        all-reduce."""
        for update in updates:
            for group in self.share(update):
                stand_in = len(group) == 0
                group = update[0][:1] if stand_in else group
                src, tgt = [corpus.src[i] for i in group], [corpus.tgt[i] for i in group]
                links = None if corpus.links is None else [corpus.links[i] for i in group]
                batch = collate(src, tgt, group, multiple, links)
                if stand_in:
                    nothing = None if batch.links is None else torch.zeros_like(batch.links)
                    batch = replace(batch, tgt_out=torch.full_like(batch.tgt_out, PAD), links=nothing)
                yield batch

    def describe_batch(self, cfg: TrainConfig, batch_tokens: int) -> str:
        """The effective batch of one update of `batch_tokens`-token batches, for the log."""
        batches, tokens = self.update_batches(cfg), self.update_batches(cfg) * batch_tokens
        if self.size == 1:
            return f"{batches} batch(es) of at most {batch_tokens} tokens per update"
        if cfg.distributed_batch == "scale":
            return (
                f"{batches} batch(es) of at most {batch_tokens} tokens per update on {self.size} "
                f"processes: an effective batch of at most {tokens} tokens, {self.size}× the config's"
            )
        return (
            f"{batches} batch(es) of at most {batch_tokens} tokens per update, shared by {self.size} "
            f"processes: an effective batch of at most {tokens} tokens, as on one process"
        )

    # --- communication --------------------------------------------------------------------------------

    def any(self, flag: bool) -> bool:
        """Whether `flag` is true in any process."""
        if self.size == 1:
            return flag
        value = torch.tensor([float(flag)])
        dist.all_reduce(value, op=dist.ReduceOp.MAX)
        return bool(value.item())

    def sum(self, tensor: Tensor) -> Tensor:
        """The sum of `tensor` over all processes (on its device, without a host sync)."""
        if self.size == 1:
            return tensor
        total = tensor.clone()
        dist.all_reduce(total)
        return total

    def broadcast(self, value: T) -> T:
        """The main process's `value` (picklable), in every process."""
        if self.size == 1:
            return value
        box = [value]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def gather(self, value: T) -> list[T]:
        """Every process's `value` (picklable), in rank order."""
        if self.size == 1:
            return [value]
        values: list = [None] * self.size
        dist.all_gather_object(values, value)
        return values

    def main_first(self, task: Callable[[], T]) -> T | None:
        """Run `task` in the main process while the others wait (e.g. to write files they then read); returns
        its result there and None elsewhere. If it fails, the others fail with a pointer to its error rather
        than with a broken connection."""
        if self.size == 1:
            return task()
        if not self.is_main:
            if self.broadcast(None):
                raise PeerFailed("the main process (rank 0) failed")
            return None
        try:
            result = task()
        except BaseException:
            self.broadcast(True)
            raise
        self.broadcast(False)
        return result

    # --- the model ------------------------------------------------------------------------------------

    def wrap(self, model: nn.Module) -> nn.Module:
        """The model under DistributedDataParallel, or the model itself in a single process.

        All parameters take part in every forward pass of both model families, so DDP need not search for
        unused ones; the only buffers (position tables) are constant and not broadcast at each step.
        """
        if self.size == 1:
            return model
        device = next(model.parameters()).device
        replica = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
        replica.broadcast_buffers = False  # set, not passed: the argument is deprecated in newer releases
        return replica

    @staticmethod
    def accumulating(replica: nn.Module, sync: bool) -> contextlib.AbstractContextManager:
        """Around a micro-batch's forward and backward: gradients are all-reduced only when `sync` (the
        update's last micro-batch); before that DDP just accumulates them locally (`no_sync`)."""
        if isinstance(replica, DistributedDataParallel) and not sync:
            return replica.no_sync()
        return contextlib.nullcontext()


@contextlib.contextmanager
def joined(device: torch.device) -> Iterator[tuple[World, torch.device]]:
    """Join the process group of the job torchrun started (WORLD_SIZE > 1 in the environment), or stay alone.

    Yields this process's World and device: with CUDA, the GPU of its local rank; NCCL carries the CUDA
    tensors and gloo the CPU ones (on CPU, gloo carries all). Processes other than the main one log only
    warnings and errors. The group is not torn down when the block ends: the process leaves with os._exit
    (nmt/__main__.py says why; destroying a gloo group can deadlock).
    """
    size = int(os.environ.get("WORLD_SIZE", "1"))
    if size == 1:
        yield World(), device
        return
    rank, local_rank = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    if device.index is not None:
        raise UserError(
            f"--device {device} under torchrun: each process takes the GPU of its local rank; choose the "
            f"GPUs with CUDA_VISIBLE_DEVICES and give --device cuda"
        )
    if device.type == "cuda":
        if local_rank >= torch.cuda.device_count():
            raise UserError(
                f"{os.environ.get('LOCAL_WORLD_SIZE', local_rank + 1)} processes on this machine need as "
                f"many GPUs, but {torch.cuda.device_count()} are visible; use fewer processes"
            )
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    backend = "cpu:gloo,cuda:nccl" if device.type == "cuda" else "gloo"
    dist.init_process_group(backend, timeout=TIMEOUT)
    if rank:
        logging.getLogger("nmt").setLevel(logging.WARNING)
    try:
        yield World(rank, size), device
    except RuntimeError as err:
        if not _peer_lost(err):
            raise
        raise PeerFailed("another process of the job failed") from None


def _peer_lost(err: RuntimeError) -> bool:
    """Whether a collective failed because another process is gone (it reports its own error)."""
    return isinstance(err, dist.DistNetworkError) or any(
        sign in str(err) for sign in ("Connection closed by peer", "Connection reset by peer")
    )


def launch(nproc: int, argv: list[str]) -> tuple[int, str | None]:
    """Run `python -m nmt ARGV` (less its --nproc option) in `nproc` processes on this machine through
    torchrun; returns the job's exit code (2 when a process reported an error, else that of the first process
    that failed, or 0) and the one line to print for it (None when there is none).

    torchrun's own log lines and error summary are silenced: the processes' lines say what went wrong.
    """
    from torch.distributed.run import parse_args

    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise UserError("--nproc starts torchrun itself; drop it when launching with torchrun")
    args = parse_args(
        ["--standalone", "--nproc-per-node", str(nproc), "--module", "nmt", *_without_nproc(argv)]
    )
    with tempfile.TemporaryDirectory(prefix="nmt-reports-") as reports, _quiet_torchrun(reports):
        code = _run_torchrun(args)
        line = _job_report(Path(reports))
    if line is None and code == 130:
        line = "nmt: interrupted"
    return (2 if line and line.startswith("nmt: error") else code), line


def _run_torchrun(args: Namespace) -> int:
    """torchrun's exit code for the job: that of the first failed process (2, 130, else 1), or 0."""
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import run

    try:
        run(args)
    except ChildFailedError as err:
        code = err.get_first_failure()[1].exitcode
        return code if code in (2, 130) else 1
    except SignalException:
        return 130
    return 0


@contextlib.contextmanager
def _quiet_torchrun(reports: str) -> Iterator[None]:
    """No log records in this (the launching) process, and the processes' lines go to `reports`."""
    os.environ[REPORTS_ENV] = reports
    logging.disable(logging.CRITICAL)
    try:
        yield
    finally:
        logging.disable(logging.NOTSET)
        del os.environ[REPORTS_ENV]


def _job_report(reports: Path) -> str | None:
    """The line the processes left in `reports`: the first error by rank, else the first line by rank."""
    lines = [
        path.read_text().strip() for path in sorted(reports.glob("rank*"), key=lambda p: int(p.name[4:]))
    ]
    errors = [line for line in lines if line.startswith("nmt: error")]
    return next(iter(errors or lines), None)


def _without_nproc(argv: list[str]) -> list[str]:
    out, skip = [], False
    for arg in argv:
        if skip or arg.startswith("--nproc="):
            skip = False
            continue
        skip = arg == "--nproc"
        if not skip:
            out.append(arg)
    return out
