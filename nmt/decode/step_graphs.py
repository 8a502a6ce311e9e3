"""Decoding steps replayed from captured graphs (`search.cuda_graphs`).

A search step (the model's decoding step and the search's bookkeeping after it) works in place on a dict of
tensors, its buffers, so that a CUDA graph can replay the whole step with one launch: the host neither pays a
launch per kernel nor runs the bookkeeping's Python, which bound decoding at Multi30k's batch sizes. A graph
is captured once per kind of step and shapes of its buffers and kept for the model's later searches (at most
`MAX_GRAPHS`, the least recently used dropped): repeated batches of one shape, as a server's or validation's,
replay at once. Before a replay, new inputs are copied into the captured buffers. A capture that fails falls
back to eager decoding with a warning.

Capture is a backend (nmt/device/capture.py): CUDA graphs on a GPU, the recorder in CPU tests
(tests/decode/test_captured_search.py); tests/test_gpu.py checks the real graphs against eager on a GPU.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Mapping
from types import MappingProxyType

import torch
from torch import Tensor

from nmt.device.capture import Capture, Captured, GraphPool
from nmt.models.base import Seq2Seq

log = logging.getLogger(__name__)

Buffers = dict[str, Tensor]
StepFunction = Callable[[Mapping[str, Tensor]], None]  # advances the buffers in place
MAX_GRAPHS = 16  # captured steps kept per model; each holds a copy of its buffers (a beam's caches: ~1 GB)


def run_step(
    capture: Capture | None, model: Seq2Seq, kind: tuple, step: StepFunction, buffers: Buffers
) -> Buffers:
    """`step(buffers)`, replayed from a graph captured by `capture` (eagerly when None); returns the buffers
    that hold the result (a graph's own ones, to pass back at the next step: then nothing is copied).
    `kind` names the step function and every setting it bakes in."""
    if capture is None:
        step(buffers)
        return buffers
    graphs = getattr(model, "decoding_graphs", None)
    if not isinstance(graphs, StepGraphs) or graphs.capture is not capture:
        graphs = model.decoding_graphs = StepGraphs(capture)  # kept with the model for its later searches
    return graphs.run(kind, step, buffers)


class StepGraphs:
    """The captured steps of one model, by kind of step and shapes of the buffers."""

    def __init__(self, capture: Capture) -> None:
        self.capture = capture
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
                self.pool = self.pool or self.capture.pool()
                self.graphs[key] = _CapturedStep(self.capture, step, buffers, self.pool)
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
    """One step captured for fixed buffer shapes; it works in place on its own copies of the buffers, which
    it sees read-only (a step that put a new tensor in the dict would do so only while captured)."""

    def __init__(
        self, capture: Capture, step: StepFunction, buffers: Buffers, pool: GraphPool | None
    ) -> None:
        self.buffers = {name: tensor.clone() for name, tensor in buffers.items()}
        view = MappingProxyType(self.buffers)
        capture.warm_up(lambda: step(view), [])  # changes the copies only: replays copy the inputs in
        self.graph: Captured = capture.capture(lambda: step(view), pool, [])

    def __call__(self, buffers: Buffers) -> Buffers:
        for name, tensor in buffers.items():
            if tensor is not self.buffers[name]:  # new inputs (a search's first step, after a shrink)
                self.buffers[name].copy_(tensor)
        self.graph.replay()
        return self.buffers
