"""Decoding steps replayed from CUDA graphs (`search.cuda_graphs`).

A search step (the model's decoding step and the search's bookkeeping after it) works in place on a dict of
tensors, its buffers, so that a CUDA graph can replay the whole step with one launch: the host neither pays a
launch per kernel nor runs the bookkeeping's Python, which bound decoding at Multi30k's batch sizes. A graph
is captured once per kind of step and shapes of its buffers and kept for the model's later searches (at most
`MAX_GRAPHS`, the least recently used dropped): repeated batches of one shape, as a server's, replay at once.
The recipe is PyTorch's documented one (`torch.cuda.graph`): warm up on a side stream, capture, then copy new
inputs into the captured (static) buffers before a replay. A capture that fails falls back to eager decoding
with a warning; nothing captures on CPU.

tests/test_gpu.py (run on a GPU) checks the replayed searches against eager ones."""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable

import torch
from torch import Tensor

from nmt.device import GraphPool, uncached_autocast, warm_up
from nmt.models.base import Seq2Seq

log = logging.getLogger(__name__)

Buffers = dict[str, Tensor]
StepFunction = Callable[[Buffers], None]  # advances the buffers in place
MAX_GRAPHS = 8  # captured steps kept per model; each holds a copy of its buffers (a beam's caches: ~1 GB)


def run_step(model: Seq2Seq, cuda_graphs: bool, kind: tuple, step: StepFunction, buffers: Buffers) -> Buffers:
    """`step(buffers)`, replayed from a CUDA graph when `cuda_graphs` and the model is on a GPU; returns the
    buffers that hold the result (a graph's own ones, to pass back at the next step: then nothing is copied).
    `kind` names the step function and every setting it bakes in."""
    if not cuda_graphs or model.device.type != "cuda":
        step(buffers)
        return buffers
    graphs = getattr(model, "decoding_graphs", None)
    if not isinstance(graphs, StepGraphs):
        graphs = model.decoding_graphs = StepGraphs()  # kept with the model: later searches replay its graphs
    return graphs.run(kind, step, buffers)


class StepGraphs:
    """The captured steps of one model, by kind of step and shapes of the buffers."""

    def __init__(self) -> None:
        self.graphs: OrderedDict[tuple, _CapturedStep] = OrderedDict()
        self.pool: GraphPool | None = None  # one memory pool: the graphs replay one at a time
        self.eager = False  # a capture failed: decode eagerly from then on

    def run(self, kind: tuple, step: StepFunction, buffers: Buffers) -> Buffers:
        if self.eager:
            step(buffers)
            return buffers
        shapes = tuple(sorted((name, tensor.shape, tensor.dtype) for name, tensor in buffers.items()))
        key = (kind, torch.is_autocast_enabled("cuda"), shapes)
        if key not in self.graphs:
            try:
                self.pool = self.pool or torch.cuda.graph_pool_handle()
                self.graphs[key] = _CapturedStep(step, buffers, self.pool)
            except Exception as err:  # graph capture is a beta API: any failure means eager decoding
                log.warning("decoding without CUDA graphs: capturing the search step failed (%s)", err)
                self.eager = True
                step(buffers)
                return buffers
            if len(self.graphs) > MAX_GRAPHS:
                self.graphs.popitem(last=False)
        self.graphs.move_to_end(key)
        return self.graphs[key](buffers)


class _CapturedStep:
    """One step captured for fixed buffer shapes; it works in place on its own copies of the buffers."""

    def __init__(self, step: StepFunction, buffers: Buffers, pool: GraphPool) -> None:
        self.buffers = {name: tensor.clone() for name, tensor in buffers.items()}
        with uncached_autocast():  # no cast weights cached from the side stream either
            warm_up(lambda: step(self.buffers), [])  # changes the copies only: replays copy the inputs in
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph, pool=pool):
                step(self.buffers)

    def __call__(self, buffers: Buffers) -> Buffers:
        for name, tensor in buffers.items():
            if tensor is not self.buffers[name]:  # new inputs (a search's first step, after a shrink)
                self.buffers[name].copy_(tensor)
        self.graph.replay()
        return self.buffers
