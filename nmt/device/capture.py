"""Capturing a step once and replaying it: CUDA graphs on a GPU, and a recorder that stands in for them on a
CPU, so that the host logic around captures (keys, shapes, capture counts, fallbacks) runs in CPU tests.

A backend warms a step up, captures it and replays it; the step reads its inputs from tensors it was
captured with (the caller copies new inputs into them before a replay) and returns its outputs in tensors
that every replay overwrites.

- `CudaGraphs`: PyTorch's documented recipe (`torch.cuda.graph`): warm up on a side stream, capture (nothing
  runs), replay the recorded kernels with one launch.
- `Recorder`: no warm-up; capture runs the step eagerly once and puts back the tensors it must leave as they
  were (a CUDA capture runs nothing); a replay runs it again and copies its outputs into the ones capture
  returned.
  Inside both, reading a tensor's value on the host (`.item()`, `.tolist()`, `bool(tensor)`, `nonzero`,
  boolean indexing …) is refused, as stream capture refuses a sync. It counts captures and replays.

What the recorder cannot see (kernels, autocast's lists, memory, host-to-device copies, timing) is listed in
docs/design.md. `capture_for(device)` is the one place that decides whether work on a device is captured.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from typing import Any, TypeAlias

import torch
from torch import Tensor
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

GraphPool: TypeAlias = "torch.cuda._POOL_HANDLE"  # the memory pool torch.cuda.graph_pool_handle() names
Work = Callable[[], Tensor | None]  # a step: works on the tensors it was captured with, returns its output
WARMUP_RUNS = 1  # eager runs on a side stream before each capture (cuBLAS workspaces, lazy initialisation)


class HostReadError(RuntimeError):
    """A captured step read a tensor's value on the host."""


class Captured(ABC):
    """A captured step. `outputs`: what capture returned, overwritten by each replay."""

    outputs: Tensor | None

    @abstractmethod
    def replay(self) -> Tensor | None:
        """Run the step again on its captured inputs; returns `outputs`."""


class Capture(ABC):
    """How steps are captured and replayed on one device."""

    @abstractmethod
    def pool(self) -> GraphPool | None:
        """A memory pool that captures replayed one at a time on one stream may share."""

    @abstractmethod
    def warm_up(self, work: Work, unchanged: Sequence[Tensor]) -> None:
        """Run `work` eagerly before its capture, as the CUDA graph docs ask; the tensors `unchanged` and the
        random number generators are left as they were."""

    @abstractmethod
    def capture(self, work: Work, pool: GraphPool | None, unchanged: Sequence[Tensor]) -> Captured:
        """Capture `work` (in `pool`); the tensors `unchanged` are left as they were (a CUDA capture runs
        nothing; the recorder runs `work` and puts them back)."""

    @abstractmethod
    def synchronize(self) -> None:
        """Wait until the device has done what was queued (before a timing is read)."""


class CudaGraphs(Capture):
    """CUDA graphs (`torch.cuda.graph`) on the current CUDA device. Autocast runs without its cache of cast
    weights in both the warm-up and the capture (a cached weight must not outlive a capture)."""

    def pool(self) -> GraphPool:
        return torch.cuda.graph_pool_handle()

    def warm_up(self, work: Work, unchanged: Sequence[Tensor]) -> None:
        """On a side stream, as the CUDA graph docs ask. The side stream waits for the copies `kept` makes
        (else the warm-up could change a tensor before its copy is taken), and they are put back after it."""
        with kept(unchanged), torch.random.fork_rng(devices=[torch.cuda.current_device()]):
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream), _uncached_autocast():
                for _ in range(WARMUP_RUNS):
                    work()
            torch.cuda.current_stream().wait_stream(stream)

    def capture(self, work: Work, pool: GraphPool | None, unchanged: Sequence[Tensor]) -> Captured:
        graph = torch.cuda.CUDAGraph()
        with _uncached_autocast(), torch.cuda.graph(graph, pool=pool):
            outputs = work()
        return _CudaGraph(graph, outputs)

    def synchronize(self) -> None:
        torch.cuda.synchronize()


def _uncached_autocast() -> contextlib.AbstractContextManager:
    """The current CUDA autocast setting without its cache of cast weights."""
    return torch.autocast(
        "cuda",
        dtype=torch.get_autocast_dtype("cuda"),
        enabled=torch.is_autocast_enabled("cuda"),
        cache_enabled=False,
    )


class _CudaGraph(Captured):
    def __init__(self, graph: torch.cuda.CUDAGraph, outputs: Tensor | None) -> None:
        self.graph, self.outputs = graph, outputs

    def replay(self) -> Tensor | None:
        self.graph.replay()
        return self.outputs


class Recorder(Capture):
    """The CPU stand-in for CUDA graphs: eager steps that refuse host reads, and counts of `captures` and
    `replays`."""

    def __init__(self) -> None:
        self.captures = 0
        self.replays = 0

    def pool(self) -> None:
        return None

    def warm_up(self, work: Work, unchanged: Sequence[Tensor]) -> None:
        """Nothing to initialise on a CPU (and a capture that runs must see the inputs a warm-up would have
        advanced, as a CUDA capture, which runs nothing, leaves them)."""

    def capture(self, work: Work, pool: GraphPool | None, unchanged: Sequence[Tensor]) -> Captured:
        with kept(unchanged), torch.random.fork_rng(devices=[]), host_reads_refused():
            outputs = work()
        self.captures += 1
        return _Recording(self, work, outputs)

    def synchronize(self) -> None:
        pass


class _Recording(Captured):
    def __init__(self, recorder: Recorder, work: Work, outputs: Tensor | None) -> None:
        self.recorder, self.work, self.outputs = recorder, work, outputs

    def replay(self) -> Tensor | None:
        with host_reads_refused():
            fresh = self.work()
        self.recorder.replays += 1
        if self.outputs is not None and fresh is not None:
            self.outputs.copy_(fresh)
        return self.outputs


@contextlib.contextmanager
def kept(tensors: Sequence[Tensor]) -> Iterator[None]:
    """The `tensors` as they were before the block, afterwards."""
    saved = [tensor.detach().clone() for tensor in tensors]
    yield
    with torch.no_grad():
        for tensor, old in zip(tensors, saved, strict=True):
            tensor.copy_(old)


_STAND_IN: ContextVar[Capture | None] = ContextVar("nmt_capture_stand_in", default=None)


CUDA_GRAPHS = CudaGraphs()  # stateless: one for every CUDA device


def capture_for(device: torch.device) -> Capture | None:
    """How work on `device` is captured: CUDA graphs on a CUDA GPU; elsewhere the stand-in of `emulating`
    when one is active (tests), else None (eager, where reading a value on the host costs nothing)."""
    if device.type == "cuda":
        return CUDA_GRAPHS
    return _STAND_IN.get()


def static_steps(device: torch.device) -> bool:
    """Whether decoding steps on `device` keep their shapes from step to step, so that they can be captured
    (and a host read waits for the device): where `capture_for` gives a backend."""
    return capture_for(device) is not None


@contextlib.contextmanager
def emulating(stand_in: Capture) -> Iterator[None]:
    """Inside the block, work on a CPU is captured by `stand_in` (a Recorder), as a GPU's would be by CUDA
    graphs: the host takes every GPU-only branch. A context variable, so that the stand-in cannot leak into
    other tests or threads."""
    token = _STAND_IN.set(stand_in)
    try:
        yield
    finally:
        _STAND_IN.reset(token)


# --- host reads ------------------------------------------------------------------------------------------

_READING_METHODS = frozenset(
    {"item", "tolist", "numpy", "cpu", "__bool__", "__int__", "__float__", "__index__", "__complex__"}
)
_SYNCING_OPERATORS = frozenset(  # their output's shape or value must reach the host
    {"_local_scalar_dense", "nonzero", "masked_select", "unique", "_unique", "_unique2", "unique_dim"}
    | {"unique_consecutive", "equal", "is_nonzero", "bincount"}
)


def host_reads_refused() -> contextlib.AbstractContextManager:
    """Inside the block, a read of a tensor's value on the host raises HostReadError."""
    stack = contextlib.ExitStack()
    stack.enter_context(_RefuseReadingMethods())
    stack.enter_context(_RefuseSyncingOperators())
    return stack


class _RefuseReadingMethods(TorchFunctionMode):
    """Tensor methods that hand a value to Python."""

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        name = getattr(func, "__name__", "")
        if name in _READING_METHODS:
            raise HostReadError(f"a captured step read a tensor on the host (Tensor.{name})")
        return func(*args, **(kwargs or {}))


class _RefuseSyncingOperators(TorchDispatchMode):
    """Operators whose output the host must wait for: a value, or a shape that depends on values (boolean
    indexing and `repeat_interleave` with a tensor of repeats among them)."""

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        name = func.__name__.split(".")[0]
        boolean_index = name in ("index", "index_put", "index_put_") and any(
            isinstance(i, Tensor) and i.dtype == torch.bool for i in _indices(args)
        )
        counted = name == "repeat_interleave" and func._overloadname != "self_int"
        if name in _SYNCING_OPERATORS or boolean_index or (counted and kwargs.get("output_size") is None):
            raise HostReadError(f"a captured step waits for the device (aten.{name})")
        return func(*args, **kwargs)


def _indices(args: tuple) -> list:
    """The index tensors of an `index`/`index_put` call (its second argument, a list)."""
    return list(args[1]) if len(args) > 1 and isinstance(args[1], list | tuple) else []
