"""The decoding step replayed from CUDA graphs (`search.cuda_graphs`), one captured per shape of its inputs.

A CUDA graph replays a recorded sequence of kernels with one launch, removing the host's per-kernel launch
cost and Python overhead, which bound decoding at Multi30k's batch sizes. The price is static shapes (the
Transformer's decoding step writes into a key/value cache of fixed size) and no host syncs inside the
captured region. The recipe is PyTorch's documented one (`torch.cuda.graph`): warm up on a side stream,
capture, then copy new inputs into the captured (static) input tensors before each replay. A capture that
fails falls back to eager decoding with a warning; nothing captures on CPU.

tests/test_gpu.py (run on a GPU) checks the captured decoder against eager decoding.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import torch
from torch import Tensor

from nmt.device import uncached_autocast, warm_up
from nmt.models.base import Memory, Seq2Seq, State, Step

log = logging.getLogger(__name__)

DecodeStep = Callable[[Tensor, Memory, State], Step]


def decoder_steps(model: Seq2Seq, cuda_graphs: bool) -> DecodeStep:
    """`model.decode_step`, replayed from CUDA graphs when `cuda_graphs` and the model is on a GPU."""
    if cuda_graphs and torch.cuda.is_available() and model.device.type == "cuda":
        return GraphedDecoder(model)
    return model.decode_step


class GraphedDecoder:
    """`model.decode_step` replayed from CUDA graphs, one captured on first use per shape of its inputs (one
    per search, plus one per batch size that beam search shrinks to)."""

    def __init__(self, model: Seq2Seq) -> None:
        self.model, self.graphs = model, {}
        self.eager = False  # a capture failed: decode eagerly from then on

    def __call__(self, tokens: Tensor, memory: Memory, state: State) -> Step:
        if self.eager:
            return self.model.decode_step(tokens, memory, state)
        key = tuple(
            (name, t.shape, t.dtype) for name, t in [("tokens", tokens), *memory.items(), *state.items()]
        )
        if key not in self.graphs:
            try:
                self.graphs[key] = _CapturedStep(self.model, tokens, memory, state)
            except Exception as err:  # graph capture is a beta API: any failure means eager decoding
                log.warning("decoding without CUDA graphs: capturing the decoder step failed (%s)", err)
                self.eager = True
                return self.model.decode_step(tokens, memory, state)
        return self.graphs[key](tokens, memory, state)


class _CapturedStep:
    """One decoding step captured for fixed input shapes; its outputs are overwritten by the next replay."""

    def __init__(self, model: Seq2Seq, tokens: Tensor, memory: Memory, state: State) -> None:
        self.tokens, self.memory_of = tokens.clone(), memory
        self.memory = {name: tensor.clone() for name, tensor in memory.items()}
        self.state = {name: tensor.clone() for name, tensor in state.items()}
        with uncached_autocast():  # no cast weights cached from the side stream either
            warm_up(lambda: model.decode_step(self.tokens, self.memory, self.state), [])
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self.out = model.decode_step(self.tokens, self.memory, self.state)

    def __call__(self, tokens: Tensor, memory: Memory, state: State) -> Step:
        self.tokens.copy_(tokens)
        if memory is not self.memory_of:  # the encoder memory changes once per search (or when beams shrink)
            for name, tensor in memory.items():
                self.memory[name].copy_(tensor)
            self.memory_of = memory
        for name, tensor in state.items():
            if tensor is not self.state[name]:  # greedy search hands back the state of the last replay
                self.state[name].copy_(tensor)
        self.graph.replay()
        return Step(self.out.log_probs, dict(self.out.state), self.out.attention)
