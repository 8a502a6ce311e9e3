"""The contract every translation model fulfils, so search, training and plotting never ask which model runs.

A model encodes a source batch into a `Memory`, starts a decoder `State` from it, and advances that state one
target token at a time with `decode_step`. Memory and state are flat dicts of tensors whose first dimension is
the batch, so search can expand, reorder and shrink them with one `select_rows` for every model. A step keeps
every shape of the state it is given (no tensor grows), and reads nothing back to the host, so that search
can run it in a CUDA graph.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

Memory = dict[str, Tensor]  # encoder output and whatever the decoder precomputes from it; batch first
State = dict[str, Tensor]  # decoder state between steps (hidden states, key/value caches); batch first


def select_rows(tensors: dict[str, Tensor], index: Tensor) -> dict[str, Tensor]:
    """The dict with every tensor's batch rows picked by `index` (beam expansion, reordering, pruning)."""
    return {name: tensor.index_select(0, index) for name, tensor in tensors.items()}


@dataclass
class Step:
    """One decoding step: log-probabilities of the next token, the advanced state, and the encoder-decoder
    attention the step paid (RNN models: their one attention; Transformer: the last layer's cross-attention,
    mean of its heads), which search collects into heatmaps when asked."""

    log_probs: Tensor  # (batch, vocab)
    state: State
    attention: Tensor | None = None  # (batch, src_len); None only for models without attention (test stubs)


@dataclass
class Output:
    """Teacher-forced pass: next-token logits and, when asked, encoder-decoder attention weights."""

    logits: Tensor  # (batch, tgt_len, vocab)
    attention: Tensor | None = None  # (batch, layers, heads, tgt_len, src_len); RNN models: 1 layer, 1 head


class Seq2Seq(nn.Module):
    """Encoder-decoder translation model.

    Masks are bool with True = real token; `src_mask` is (batch, 1, src_len). `reads_lengths_on_host`: the
    forward pass reads something back to the host (so a training step cannot be captured in a CUDA graph).
    """

    reads_lengths_on_host = False

    def encode(self, src: Tensor, src_mask: Tensor) -> Memory:
        """Encode source ids (batch, src_len); the memory holds 'src_mask' among its tensors."""
        raise NotImplementedError

    def init_state(self, memory: Memory, max_len: int) -> State:
        """Decoder state before the first target token, with room for `max_len` decoding steps (the
        Transformer allocates its key/value cache once, so that every step has the same shapes)."""
        raise NotImplementedError

    def decode_step(self, tokens: Tensor, memory: Memory, state: State) -> Step:
        """Advance by one token: `tokens` (batch,) are the previous outputs (bos at the start). The step may
        write into the tensors of `state` (the Transformer's key/value caches): use each state once."""
        raise NotImplementedError

    def decode(self, tgt_in: Tensor, memory: Memory, return_attention: bool = False) -> Output:
        """Teacher-forced decoder pass over the whole target prefix `tgt_in` (batch, tgt_len)."""
        raise NotImplementedError

    def forward(
        self, src: Tensor, src_mask: Tensor, tgt_in: Tensor, return_attention: bool = False
    ) -> Output:
        return self.decode(tgt_in, self.encode(src, src_mask), return_attention)

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device


def make_embeddings(
    dim: int, src_vocab: int, tgt_vocab: int, share: bool, pad: int
) -> tuple[nn.Embedding, nn.Embedding]:
    """Source and target embeddings (one shared matrix when `share`), Normal(0, dim^-1/2) with a zero pad row.

    The scale follows Vaswani et al. 2017, who multiply embeddings by sqrt(dim) on the way in.
    """
    tgt = nn.Embedding(tgt_vocab, dim, padding_idx=pad)
    src = tgt if share else nn.Embedding(src_vocab, dim, padding_idx=pad)
    for embedding in dict.fromkeys([src, tgt]):  # ordered: the same init for the same seed
        nn.init.normal_(embedding.weight, std=dim**-0.5)
        with torch.no_grad():
            embedding.weight[pad].zero_()
    return src, tgt
