"""The Transformer of Vaswani et al. 2017, "Attention Is All You Need": pre-norm by default (post-norm
option), sinusoidal positions, tied embeddings, and incremental decoding with a key/value cache of fixed size
(allocated once per search, written at the current position), so that every decoding step has the same
shapes and can be captured in a CUDA graph."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from nmt.device.capture import static_steps
from nmt.models.attention import MultiHeadAttention, SelfAttention
from nmt.models.base import (
    Memory,
    Output,
    Seq2Seq,
    State,
    Step,
    Wanted,
    hypothesis_rows,
    make_embeddings,
    select_rows,
)
from nmt.models.config import ModelConfig, TransformerConfig


def sinusoidal_positions(length: int, d_model: int) -> Tensor:
    """(length, d_model) float32 table on the CPU: sin on even dimensions, cos on odd ones. Computed in
    float64 as transformers computes its own (pos / 10000^(2i/d)), so that the two agree bit for bit:
    transformers' Marian rebuilds its table when loading a model exported by `nmt export --to huggingface`.
    On the CPU also inside a device context (a model built on the meta device, whose `arange` runs torch's
    Python reference and imports torch._dynamo: seconds)."""
    cpu = torch.device("cpu")
    position = torch.arange(length, dtype=torch.float64, device=cpu).unsqueeze(1)  # (length, 1)
    exponent = torch.arange(0, d_model, 2, dtype=torch.float64, device=cpu) / d_model  # (d_model / 2,)
    angle = position / 10000.0**exponent  # (length, d_model / 2)
    table = torch.zeros(length, d_model, device=cpu)
    table[:, 0::2] = torch.sin(angle)
    table[:, 1::2] = torch.cos(angle)
    return table


SLOT_MULTIPLE = 8  # cache lengths are rounded up to this (71 slots ran on slow unaligned cuBLAS kernels)


class Embedder(nn.Module):
    """Token embedding × sqrt(d) (unless not `scale`) + sinusoidal position, then dropout. With `start` (the
    decoder's, where model.transformer.decoder_start is pad) the token at position 0, the decoder's first
    input, is read as `start` whatever it is (bos, as batches and search place it)."""

    positions: Tensor  # (max_positions, d_model), a buffer

    def __init__(
        self,
        embedding: nn.Embedding,
        max_positions: int,
        dropout: float,
        scale: bool = True,
        start: int | None = None,
    ) -> None:
        super().__init__()
        self.embedding, self.start = embedding, start
        self.scale = math.sqrt(embedding.embedding_dim) if scale else 1.0
        table = sinusoidal_positions(max_positions, embedding.embedding_dim)
        self.register_buffer("positions", table.to(embedding.weight.device), persistent=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, tokens: Tensor, offset: int = 0) -> Tensor:
        """Embed tokens (batch, length) sitting at positions offset, offset + 1, …"""
        length = tokens.size(1)
        if offset + length > self.positions.size(0):
            raise ValueError(
                f"sequence of {offset + length} tokens exceeds "
                f"model.transformer.max_positions={self.positions.size(0)}"
            )
        if self.start is not None and offset == 0 and length:
            tokens = torch.cat([torch.full_like(tokens[:, :1], self.start), tokens[:, 1:]], dim=1)
        x = self.embedding(tokens) * self.scale + self.positions[offset : offset + length]
        return self.dropout(x)  # (batch, length, d_model)

    def at(self, tokens: Tensor, position: Tensor) -> Tensor:
        """Embed one token per sentence, tokens (batch,), each at its own position (batch,), read on the
        device (no host sync); positions must be below max_positions (checked by the caller)."""
        if self.start is not None:
            tokens = tokens.masked_fill(position == 0, self.start)
        x = self.embedding(tokens) * self.scale + self.positions.index_select(0, position)
        return self.dropout(x).unsqueeze(1)  # (batch, 1, d_model)


class Sublayer(nn.Module):
    """Residual connection around `fn` (unless not `residual`) with layer norm before (pre-norm) or after
    (post-norm) it."""

    def __init__(self, d_model: int, dropout: float, pre_norm: bool, residual: bool = True) -> None:
        super().__init__()
        self.norm, self.dropout, self.pre_norm = nn.LayerNorm(d_model), nn.Dropout(dropout), pre_norm
        self.residual = residual

    def forward(self, x: Tensor, fn: Callable[[Tensor], Tensor]) -> Tensor:
        if self.pre_norm:
            found = self.dropout(fn(self.norm(x)))
            return x + found if self.residual else found
        found = self.dropout(fn(x))
        return self.norm(x + found if self.residual else found)


ACTIVATIONS: dict[str, Callable[[], nn.Module]] = {"relu": nn.ReLU, "gelu": nn.GELU, "swish": nn.SiLU}


class FeedForward(nn.Sequential):
    def __init__(self, d_model: int, ff_dim: int, dropout: float, activation: str = "relu") -> None:
        super().__init__(
            nn.Linear(d_model, ff_dim),
            ACTIVATIONS[activation](),
            nn.Dropout(dropout),
            nn.Linear(ff_dim, d_model),
        )


class EncoderLayer(nn.Module):
    def __init__(self, cfg: TransformerConfig, dropout: float, residual: bool = True) -> None:
        super().__init__()
        pre = cfg.norm == "pre"
        self.self_attn = SelfAttention(cfg.d_model, cfg.heads, cfg.attention_dropout)
        self.feed_forward = FeedForward(cfg.d_model, cfg.ff_dim, dropout, cfg.activation)
        self.attn_block = Sublayer(cfg.d_model, dropout, pre, residual)  # residual=False: Liu et al. 2021
        self.ff_block = Sublayer(cfg.d_model, dropout, pre)

    def forward(self, x: Tensor, src_mask: Tensor) -> Tensor:
        x = self.attn_block(x, lambda h: self.self_attn.attend(*self.self_attn.project(h), src_mask)[0])
        return self.ff_block(x, self.feed_forward)  # (batch, src_len, d_model)


@dataclass
class Cache:
    """One layer's self-attention keys and values during decoding. Each hypothesis writes its keys and values
    into slots of its own, (sentences, heads, max_len * hypotheses, d_head) position-major (position p of
    hypothesis h in slot p * hypotheses + h), that never move when beam search reorders its hypotheses:
    `slots` (sentences, heads, hypotheses, d_head) index where this step's go, and `visible` (sentences,
    hypotheses, used) is True at the slots of each hypothesis' history among the first `used` slots (the
    positions written so far; the rest is not attended to). On a CPU every hypothesis is at the same position,
    whose slots are the block `used - hypotheses` … `used`: a slice is written instead of scattered (no
    `slots`), and one hypothesis a sentence sees every slot written (no `visible` mask)."""

    keys: Tensor
    values: Tensor
    slots: Tensor | None
    visible: Tensor | None
    used: int
    one_position: bool

    def write(self, keys: Tensor, values: Tensor) -> tuple[Tensor, Tensor]:
        """The cache with this step's keys and values (sentences, heads, hypotheses, d_head) written into
        their slots, in place: copying the whole cache at every step would cost more than attending to it."""
        if self.one_position:
            block = slice(self.used - keys.size(2), self.used)
            self.keys[:, :, block], self.values[:, :, block] = keys, values
            return self.keys, self.values
        assert self.slots is not None  # where steps are static
        return self.keys.scatter_(2, self.slots, keys), self.values.scatter_(2, self.slots, values)

    def written(self) -> tuple[Tensor, Tensor]:
        """The keys and values of the slots attended to. (sentences, heads, used, d_head) each"""
        return self.keys[:, :, : self.used], self.values[:, :, : self.used]


class DecoderLayer(nn.Module):
    """Causal self-attention (optionally over a key/value cache), cross-attention, feed-forward."""

    def __init__(self, cfg: TransformerConfig, dropout: float) -> None:
        super().__init__()
        pre = cfg.norm == "pre"
        self.self_attn = SelfAttention(cfg.d_model, cfg.heads, cfg.attention_dropout)
        self.cross_attn = MultiHeadAttention(cfg.d_model, cfg.heads, cfg.attention_dropout)
        self.feed_forward = FeedForward(cfg.d_model, cfg.ff_dim, dropout, cfg.activation)
        self.self_block, self.cross_block, self.ff_block = (
            Sublayer(cfg.d_model, dropout, pre) for _ in range(3)
        )

    def forward(
        self,
        x: Tensor,
        cross_kv: tuple[Tensor, Tensor],
        src_mask: Tensor,
        cache: Cache | None = None,
        need_weights: bool = False,
        self_mask: Tensor | None = None,
    ) -> tuple[Tensor, tuple[Tensor, Tensor] | None, Tensor | None]:
        """x (batch, tgt_len, d_model) → same shape, the updated self-attention cache, cross-attention
        weights.

        Without a `cache`, `x` is the whole target prefix and a causal mask applies, unless `self_mask`
        (batch, 1, tgt_len) lets every position see every real target position instead (full context). With
        a cache, `x` (sentences, hypotheses, d_model) holds the current token of each hypothesis: its keys and
        values are written into its slots and it attends to its own history. A few queries attend faster
        through two matmuls than through the flash kernels built for long query blocks, so decoding always
        computes the weights.
        """
        need_weights = need_weights or cache is not None
        new_kv = None

        def self_attention(h: Tensor) -> Tensor:
            nonlocal new_kv
            q, keys, values = self.self_attn.project(h)  # (batch, heads, tgt_len, d_head) each
            if cache is None:
                causal = self_mask is None and h.size(1) > 1
                return self.self_attn.attend(q, keys, values, self_mask, causal=causal)[0]
            new_kv = cache.write(keys, values)
            return self.self_attn.attend(q, *cache.written(), cache.visible, need_weights=True)[0]

        weights = None

        def cross_attention(h: Tensor) -> Tensor:
            nonlocal weights
            context, weights = self.cross_attn(h, *cross_kv, src_mask, need_weights=need_weights)
            return context

        x = self.self_block(x, self_attention)
        x = self.cross_block(x, cross_attention)
        return self.ff_block(x, self.feed_forward), new_kv, weights


class TransformerSeq2Seq(Seq2Seq):
    """Encoder-decoder Transformer. Memory holds the encoder states and each layer's cross-attention keys and
    values (projected once); the decoding state holds each layer's self-attention key/value cache (per
    sentence: beam search never moves it, see `Cache`) and each hypothesis' position and history. A decoding
    step treats the hypotheses of a sentence as a short sequence of queries: they share its memory.

    Built from the shared model settings and their `transformer` section."""

    def __init__(self, cfg: ModelConfig, src_vocab: int, tgt_vocab: int, joint_vocab: bool, pad: int) -> None:
        super().__init__()
        arch, share = cfg.transformer_settings, cfg.shares_embeddings(joint_vocab)
        src_embedding, tgt_embedding = make_embeddings(arch.d_model, src_vocab, tgt_vocab, share, pad)
        scale, start = arch.scale_embeddings, pad if arch.decoder_start == "pad" else None
        self.src_embed = Embedder(src_embedding, arch.max_positions, cfg.dropout, scale)
        self.tgt_embed = Embedder(tgt_embedding, arch.max_positions, cfg.dropout, scale, start)
        self.encoder_layers = nn.ModuleList(
            EncoderLayer(arch, cfg.dropout, residual=i != arch.residual_free_layer)
            for i in range(cfg.encoder_layers)
        )
        self.decoder_layers = nn.ModuleList(
            DecoderLayer(arch, cfg.dropout) for _ in range(cfg.decoder_layers)
        )
        final_norm = nn.LayerNorm if arch.norm == "pre" else nn.Identity
        self.encoder_norm, self.decoder_norm = final_norm(arch.d_model), final_norm(arch.d_model)
        self.output = None if cfg.tie_embeddings else nn.Linear(arch.d_model, tgt_vocab, bias=False)
        self.output_bias = nn.Parameter(torch.zeros(tgt_vocab)) if arch.output_bias else None
        self.pad = pad

    def encode(self, src: Tensor, src_mask: Tensor) -> Memory:
        x = self.src_embed(src)  # (batch, src_len, d_model)
        for layer in self.encoder_layers:
            x = layer(x, src_mask)
        states = self.encoder_norm(x)
        memory = {"states": states, "src_mask": src_mask}
        for i, layer in enumerate(cast(Iterable[DecoderLayer], self.decoder_layers)):
            keys, values = layer.cross_attn.prepare(states)  # (batch, heads, src, d_head) each
            memory[f"cross_k{i}"], memory[f"cross_v{i}"] = keys, values
        return memory

    def target_embedding(self) -> nn.Embedding:
        return self.tgt_embed.embedding

    def logits(self, x: Tensor) -> Tensor:
        """Decoder states (…, d_model) → vocabulary logits (…, tgt_vocab)."""
        x = self.decoder_norm(x)
        logits = F.linear(x, self.target_embedding().weight) if self.output is None else self.output(x)
        return logits if self.output_bias is None else logits + self.output_bias

    def decode(self, tgt_in: Tensor, memory: Memory, wanted: Wanted = Wanted()) -> Output:
        """Only the layers whose weights are wanted compute them explicitly; the others run in the fused
        attention kernels."""
        x = self.tgt_embed(tgt_in)  # (batch, tgt_len, d_model)
        in_pass = None if wanted.full_context else wanted.align_layer  # the layer this pass gives weights of
        attention, alignment = [], None
        for i, layer in enumerate(self.decoder_layers):
            cross_kv = memory[f"cross_k{i}"], memory[f"cross_v{i}"]
            need_weights = wanted.attention or i == in_pass
            x, _, weights = layer(x, cross_kv, memory["src_mask"], need_weights=need_weights)
            attention.append(weights)
            alignment = weights if i == in_pass else alignment
        if wanted.full_context and wanted.align_layer is not None:
            alignment = self.full_context_attention(tgt_in, memory, wanted.align_layer)
        # (batch, layers, heads, tgt, src) when wanted
        stacked = torch.stack(attention, dim=1) if wanted.attention else None
        return Output(self.logits(x) if wanted.logits else None, stacked, alignment)

    def full_context_attention(self, tgt_in: Tensor, memory: Memory, layer: int) -> Tensor:
        """The cross-attention of decoder layer `layer` when every target position sees the whole target (its
        padding masked) in the self-attention of that layer and those below: Garg et al. 2019's alignment
        layer, a second pass that stops there. (batch, heads, tgt_len, src_len)"""
        x = self.tgt_embed(tgt_in)  # (batch, tgt_len, d_model)
        self_mask = (tgt_in != self.pad).unsqueeze(1)  # (batch, 1, tgt_len)
        weights = None
        for i, block in enumerate(self.decoder_layers[: layer + 1]):
            cross_kv = memory[f"cross_k{i}"], memory[f"cross_v{i}"]
            x, _, weights = block(
                x, cross_kv, memory["src_mask"], need_weights=i == layer, self_mask=self_mask
            )
        assert weights is not None
        return weights

    def init_state(self, memory: Memory, max_len: int, hypotheses: int = 1) -> State:
        """Empty key/value caches with room for `max_len` tokens of each hypothesis, kept per sentence (see
        `Cache`); per hypothesis, its next position (0) and its history: which hypothesis' slots hold each of
        its positions. `decode_step` writes into the caches and histories of the state it is given."""
        if max_len > self.tgt_embed.positions.size(0):
            raise ValueError(
                f"decoding {max_len} tokens exceeds model.transformer.max_positions="
                f"{self.tgt_embed.positions.size(0)}"
            )
        keys = memory["cross_k0"]  # (sentences, heads, src_len, d_head)
        rows, device = keys.size(0) * hypotheses, keys.device
        max_len = -(-max_len // SLOT_MULTIPLE) * SLOT_MULTIPLE  # aligned rows for the matmul kernels
        shape = (keys.size(0), keys.size(1), max_len * hypotheses, keys.size(3))
        state = {
            "position": torch.zeros(rows, dtype=torch.long, device=device),
            "history": torch.zeros(rows, max_len, dtype=torch.long, device=device),
        }
        # A static step (a GPU's) attends to every slot (masked): they must hold numbers. A CPU step reads
        # only the slots of the positions written so far: no filling (it cost more than attending).
        allocate = keys.new_zeros if static_steps(device) else keys.new_empty
        for i in range(len(self.decoder_layers)):
            state[f"self_k{i}"], state[f"self_v{i}"] = allocate(shape), allocate(shape)
        return state  # caches: (sentences, heads, max_len * hypotheses, d_head)

    def decode_step(self, tokens: Tensor, memory: Memory, state: State) -> Step:
        """Where steps are static (a GPU: nmt/device/capture.py `static_steps`) each hypothesis attends to
        every slot, masked: the same shapes at every step, for CUDA graphs. On a CPU, where reading a value
        costs nothing, only the slots of the positions written so far are attended to
        (`written_positions`)."""
        position, history = state["position"], state["history"]  # (rows,), (rows, max_len)
        sentences, (rows, max_len) = memory["src_mask"].size(0), history.shape
        hypotheses, heads = rows // sentences, memory["cross_k0"].size(1)
        own = torch.arange(hypotheses, device=tokens.device).repeat(sentences)  # (rows,) each row's slots
        history.scatter_(1, position.unsqueeze(1), own.unsqueeze(1))  # this position is the row's own
        x = self.tgt_embed.at(tokens, position).view(sentences, hypotheses, -1)  # (sentences, hyps, d_model)
        static = static_steps(tokens.device)
        slots = None  # eager (a CPU): each step writes one block of slots (`Cache.write`)
        if static:
            d_head = memory["cross_k0"].size(3)
            slots = (position * hypotheses + own).view(sentences, 1, hypotheses, 1)
            slots = slots.expand(-1, heads, -1, d_head)  # (sentences, heads, hyps, d_head)
        positions = max_len if static else written_positions(position)
        visible = None  # one hypothesis a sentence on a CPU sees every slot written so far: no mask
        if static or hypotheses > 1:
            visible = self.visible_slots(history[:, :positions], position, sentences)
        new_state = {"position": position + 1, "history": history}
        for i, layer in enumerate(self.decoder_layers):
            cross_kv = memory[f"cross_k{i}"], memory[f"cross_v{i}"]
            caches = state[f"self_k{i}"], state[f"self_v{i}"]
            cache = Cache(*caches, slots, visible, positions * hypotheses, not static)
            x, (new_state[f"self_k{i}"], new_state[f"self_v{i}"]), weights = layer(
                x, cross_kv, memory["src_mask"], cache
            )
        log_probs = self.logits(x).float().log_softmax(dim=-1).view(rows, -1)  # (rows, tgt_vocab)
        attention = weights.mean(dim=1).reshape(rows, -1)  # mean of heads: (rows, src_len)
        return Step(log_probs, new_state, attention)

    @staticmethod
    def visible_slots(history: Tensor, position: Tensor, sentences: int) -> Tensor:
        """Which cache slots each hypothesis attends to: for every position up to its current one, the slot of
        the hypothesis that wrote it. history (rows, positions), position (rows,) → (sentences, hypotheses,
        positions * hypotheses), slots position-major."""
        rows, positions = history.shape
        hypotheses = rows // sentences
        writer = history.view(sentences, hypotheses, positions, 1)
        slot_owner = torch.arange(hypotheses, device=history.device).view(1, 1, 1, hypotheses)
        up_to_now = torch.arange(positions, device=history.device).view(1, 1, positions, 1)
        seen = up_to_now <= position.view(sentences, hypotheses, 1, 1)
        return ((writer == slot_owner) & seen).view(sentences, hypotheses, positions * hypotheses)

    def reorder_state(self, state: State, parents: Tensor) -> State:
        """Only the positions and histories move; the caches stay where the hypotheses wrote them."""
        moved = {name: state[name].index_select(0, parents) for name in ("position", "history")}
        return state | moved

    def select_sentences(self, memory: Memory, state: State, sentences: Tensor) -> tuple[Memory, State]:
        """Where steps are not static (a CPU) only the written slots of the caches move (the others are never
        read there)."""
        position = state["position"]
        hypotheses = position.size(0) // memory["src_mask"].size(0)
        rows = hypothesis_rows(sentences, hypotheses)
        used = None if static_steps(position.device) else written_positions(position) * hypotheses
        kept = {
            name: moved_cache(t, sentences, used) if name.startswith("self_") else t.index_select(0, rows)
            for name, t in state.items()
        }
        return select_rows(memory, sentences), kept


def written_positions(position: Tensor) -> int:
    """How many positions of the caches have been written: every hypothesis advances at every step, so all
    slots of these positions hold keys and values. position (rows,), on the host."""
    return int(position.max()) + 1 if position.numel() else 0


def moved_cache(cache: Tensor, sentences: Tensor, used: int | None) -> Tensor:
    """The cache rows of `sentences`, all its slots, or (`used`) only the first `used` ones copied."""
    if used is None:
        return cache.index_select(0, sentences)
    kept = cache.new_empty(sentences.size(0), *cache.shape[1:])  # (sentences, heads, slots, d_head)
    torch.index_select(cache[:, :, :used], 0, sentences, out=kept[:, :, :used])
    return kept
