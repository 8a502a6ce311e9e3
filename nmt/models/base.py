"""The contract every translation model fulfils, so search, training and plotting never ask which model runs.

A model encodes a batch of source sentences into a `Memory`, starts a decoder `State` for a number of
hypotheses per sentence (one for greedy search, the beam size for beam search), and advances every hypothesis
one target token at a time with `decode_step`. Memory and state are flat dicts of tensors. The memory is per
sentence (batch first); the state is per hypothesis, a sentence's hypotheses on consecutive rows, except what
a model keeps per sentence and manages itself (the Transformer's key/value caches). Search moves the state
only through `reorder_state` (after a beam step) and `select_sentences` (when finished sentences leave the
batch), so a model decides what moving its state costs. A step keeps every shape of the state it is given (no
tensor grows), and reads nothing back to the host, so that search can run it in a CUDA graph."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import Tensor, nn

Memory = dict[str, Tensor]  # per sentence: encoder output and what the decoder precomputes from it
State = dict[str, Tensor]  # per hypothesis (sentences × hypotheses per sentence rows), unless a model says


def select_rows(tensors: dict[str, Tensor], index: Tensor) -> dict[str, Tensor]:
    """The dict with every tensor's batch rows picked by `index` (reordering, pruning)."""
    return {name: tensor.index_select(0, index) for name, tensor in tensors.items()}


def prefixed(tensors: dict[str, Tensor], prefix: str) -> dict[str, Tensor]:
    """The entries with `prefix` before their names (an ensemble member's `0.`, a search's `memory.`)."""
    return {prefix + name: t for name, t in tensors.items()}


def unprefixed(tensors: Mapping[str, Tensor], prefix: str) -> dict[str, Tensor]:
    """The entries whose names start with `prefix`, without it: what `prefixed` stored."""
    return {name.removeprefix(prefix): t for name, t in tensors.items() if name.startswith(prefix)}


def hypothesis_rows(sentences: Tensor, per_sentence: int) -> Tensor:
    """The state rows of the hypotheses of `sentences` (indices), `per_sentence` consecutive rows each."""
    offsets = torch.arange(per_sentence, device=sentences.device)
    return (sentences.unsqueeze(1) * per_sentence + offsets).view(-1)  # (sentences * per_sentence,)


@dataclass
class Step:
    """One decoding step: log-probabilities of the next token, the advanced state, and the encoder-decoder
    attention the step paid (RNN models: their one attention; Transformer: the last layer's cross-attention,
    mean of its heads), which search collects into heatmaps when asked."""

    log_probs: Tensor  # (batch, vocab)
    state: State
    attention: Tensor | None = None  # (batch, src_len); None only for models without attention (test stubs)


@dataclass(frozen=True)
class Wanted:
    """What a teacher-forced pass puts in its `Output`: the vocabulary logits (not when attention alone is
    wanted), the encoder-decoder attention of every layer, and the `alignment` of the one decoder layer
    `align_layer` (from 0; the RNNs have one attention, whatever it says) that guided alignment supervises,
    computed with `full_context` (Transformer only) in a second pass where each target position sees the
    whole target (Garg et al. 2019)."""

    logits: bool = True
    attention: bool = False
    align_layer: int | None = None
    full_context: bool = False


@dataclass
class Output:
    """Teacher-forced pass: next-token logits and, when `Wanted`, encoder-decoder attention weights: of every
    layer (`attention`), or of the one layer that guided alignment supervises (`align_layer`)."""

    logits: Tensor | None  # (batch, tgt_len, vocab); None when not wanted (attention alone)
    attention: Tensor | None = None  # (batch, layers, heads, tgt_len, src_len); RNN models: 1 layer, 1 head
    alignment: Tensor | None = None  # (batch, heads, tgt_len, src_len)


class Seq2Seq(nn.Module):
    """Encoder-decoder translation model.

    Masks are bool with True = real token; `src_mask` is (batch, 1, src_len).
    """

    decoding_graphs: object  # set by nmt/decode/step_graphs.py: the captured search steps kept with the model
    output: nn.Module | None  # the vocabulary projection; None: tied to the target embedding

    def target_embedding(self) -> nn.Embedding:
        """The target-side embedding (tgt_vocab, d), which is the output projection where `output` is None."""
        raise NotImplementedError

    def encode(self, src: Tensor, src_mask: Tensor) -> Memory:
        """Encode source ids (batch, src_len); the memory holds 'src_mask' among its tensors."""
        raise NotImplementedError

    def init_state(self, memory: Memory, max_len: int, hypotheses: int = 1) -> State:
        """Decoder state before the first target token for `hypotheses` hypotheses per sentence of `memory`,
        with room for `max_len` decoding steps (the Transformer allocates its key/value cache once, so that
        every step has the same shapes)."""
        raise NotImplementedError

    def decode_step(self, tokens: Tensor, memory: Memory, state: State) -> Step:
        """Advance every hypothesis by one token: `tokens` (sentences * hypotheses,) are the previous outputs
        (bos at the start). The step may write into the tensors of `state` (the Transformer's key/value
        caches): use each state once."""
        raise NotImplementedError

    def reorder_state(self, state: State, parents: Tensor) -> State:
        """The state after a beam step: hypothesis row r continues the hypothesis on row `parents[r]`, a row
        of the same sentence. (rows,)"""
        return select_rows(state, parents)

    def select_sentences(self, memory: Memory, state: State, sentences: Tensor) -> tuple[Memory, State]:
        """Memory and state of the sentences `sentences` (indices, in order) alone, with all their
        hypotheses."""
        rows = hypothesis_rows(sentences, hypotheses_per_sentence(memory, state))
        return select_rows(memory, sentences), select_rows(state, rows)

    def decode(self, tgt_in: Tensor, memory: Memory, wanted: Wanted = Wanted()) -> Output:
        """Teacher-forced decoder pass over the whole target prefix `tgt_in` (batch, tgt_len), computing what
        is `wanted`."""
        raise NotImplementedError

    def forward(self, src: Tensor, src_mask: Tensor, tgt_in: Tensor, wanted: Wanted = Wanted()) -> Output:
        return self.decode(tgt_in, self.encode(src, src_mask), wanted)

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


def hypotheses_per_sentence(memory: Memory, state: State) -> int:
    """How many hypotheses the state holds per sentence of the memory (its rows over the sentences)."""
    return next(iter(state.values())).size(0) // memory["src_mask"].size(0)
