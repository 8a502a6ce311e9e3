"""RNN encoder-decoder models with attention.

`rnn-bahdanau` follows Bahdanau et al. 2015, "Neural Machine Translation by Jointly Learning to Align and
Translate"; `rnn-luong` follows Luong et al. 2015, "Effective Approaches to Attention-based Neural Machine
Translation". Both share the bidirectional GRU/LSTM encoder, the bridge to the decoder's first state and the
stacked decoder RNN; they differ only where the papers do: when attention is computed, what enters the
recurrent cell and what the output layer sees.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from nmt.errors import ConfigError
from nmt.models.attention import AdditiveAttention, Attention, luong_attention
from nmt.models.base import Memory, Output, Seq2Seq, State, Step, Wanted, make_embeddings
from nmt.models.config import ModelConfig


def make_rnn(cfg: ModelConfig, input_size: int, layers: int) -> nn.RNNBase:
    """A batch-first GRU or LSTM stack (`cfg.rnn.cell`) with dropout between its layers."""
    rnn = nn.LSTM if cfg.rnn_settings.cell == "lstm" else nn.GRU
    dropout, hidden = (cfg.dropout if layers > 1 else 0.0), cfg.rnn_settings.hidden_size
    return rnn(input_size, hidden, layers, batch_first=True, dropout=dropout)


def run_rnn(rnn: nn.RNNBase, x: Tensor, hx: Tensor | tuple[Tensor, Tensor] | None = None) -> tuple:
    """Call `rnn` in its own dtype, also under autocast: autocast would run cuDNN RNNs in float16 (not the
    requested bfloat16), re-casting the weights on every call, with gradients that underflow unscaled."""
    with torch.autocast(x.device.type, enabled=False):
        return rnn(x, hx)


def reversal_within_length(lengths: Tensor, length: int) -> Tensor:
    """Gather indices that reverse each sentence within its own length and leave its padding in place:
    (batch, length). Applied twice, they restore the order."""
    positions = torch.arange(length, device=lengths.device)  # (length,)
    reversed_positions = lengths.unsqueeze(1) - 1 - positions  # (batch, length)
    return torch.where(positions < lengths.unsqueeze(1), reversed_positions, positions)


def along_time(x: Tensor, index: Tensor) -> Tensor:
    """x (batch, length, features) with its time steps taken from `index` (batch, length)."""
    return x.gather(1, index.unsqueeze(2).expand(-1, -1, x.size(2)))


def final_cell(rnn: nn.LSTM, x: Tensor, outputs: Tensor, lengths: Tensor) -> Tensor:
    """The cell state of a one-layer LSTM after each sentence's last word (batch, hidden), recomputed from its
    inputs x (batch, length, input) and outputs (batch, length, hidden), which are exact up to that word (the
    recurrence read padding only after it, and cuDNN returns only the cell state after the padding).

    c_T = Σ_t i_t g_t Π_{t<s≤T} f_s, with the gates of every step from x_t and h_{t-1} in one matmul."""
    before = torch.cat([outputs.new_zeros(outputs[:, :1].shape), outputs[:, :-1]], dim=1)  # h_{t-1}
    weight_ih, weight_hh, bias_ih, bias_hh = rnn.all_weights[0]  # its `weight_ih_l0`, … `bias_hh_l0`
    gates = F.linear(x, weight_ih, bias_ih) + F.linear(before, weight_hh, bias_hh)
    i, f, g, _ = gates.chunk(4, dim=-1)  # (batch, length, hidden) each
    positions = torch.arange(x.size(1), device=x.device)  # (length,)
    inside = (positions < lengths.unsqueeze(1)).unsqueeze(2)  # (batch, length, 1)
    forget = torch.where(inside, torch.sigmoid(f), 1.0)
    kept_after = torch.cat([forget[:, 1:], forget.new_ones(forget[:, :1].shape)], dim=1)  # f_{t+1}
    decay = kept_after.flip(1).cumprod(1).flip(1)  # Π_{s>t} f_s (1 past the end)
    return (torch.sigmoid(i) * torch.tanh(g) * decay * inside).sum(dim=1)


class Direction(nn.Module):
    """One direction of one encoder layer: a one-layer GRU/LSTM run over the whole padded batch by cuDNN."""

    def __init__(self, cfg: ModelConfig, input_size: int) -> None:
        super().__init__()
        self.rnn = make_rnn(cfg, input_size, 1)

    def forward(self, x: Tensor, lengths: Tensor) -> tuple[Tensor, list[Tensor]]:
        """Outputs (batch, length, hidden), exact up to each sentence's length, and the final states after its
        last word: hidden (and cell for LSTM), (batch, hidden) each."""
        outputs = run_rnn(self.rnn, x)[0]
        last = (lengths - 1).clamp(min=0).view(-1, 1)  # (batch, 1)
        finals = [along_time(outputs, last).squeeze(1)]
        if isinstance(self.rnn, nn.LSTM):
            with torch.autocast(x.device.type, enabled=False):
                finals.append(final_cell(self.rnn, x, outputs, lengths))
        return outputs, finals


class Encoder(nn.Module):
    """Embeddings → a bidirectional GRU/LSTM on the padded batch, one layer at a time: the forward direction
    reads each sentence from its first word, the backward direction reads it reversed within its own length,
    so that padding never enters a state that a word's output depends on. Nothing is read back to the host
    (no packing): the training step can be captured in a CUDA graph.

    Parameters are named `layers.<l>.ahead.rnn.*` (forward direction) and `layers.<l>.back.rnn.*` (backward);
    checkpoints of the single bidirectional `rnn.*_l<l>[_reverse]` load unchanged
    (`split_bidirectional_weights`).
    """

    def __init__(self, cfg: ModelConfig, embedding: nn.Embedding) -> None:
        super().__init__()
        self.embedding, self.dropout = embedding, nn.Dropout(cfg.dropout)
        hidden = cfg.rnn_settings.hidden_size
        self.layers = nn.ModuleList(
            nn.ModuleDict({"ahead": Direction(cfg, size), "back": Direction(cfg, size)})
            for size in [cfg.rnn_settings.embedding_size] + [2 * hidden] * (cfg.encoder_layers - 1)
        )
        self.register_load_state_dict_pre_hook(split_bidirectional_weights)

    def forward(self, src: Tensor, src_mask: Tensor) -> tuple[Tensor, list[Tensor]]:
        """Encoder states (batch, src_len, 2*hidden), zero at padding, and the final states: hidden (and cell
        for LSTM), each (batch, layers, 2, hidden) with the forward direction first."""
        mask = src_mask.squeeze(1).unsqueeze(2)  # (batch, src_len, 1)
        lengths = src_mask.sum(dim=(1, 2))  # (batch,), on the device
        reverse = reversal_within_length(lengths, src.size(1))  # (batch, src_len)
        x, finals = self.dropout(self.embedding(src)), []  # (batch, src_len, embedding)
        for i, layer in enumerate(cast(Iterable[nn.ModuleDict], self.layers)):
            if i:
                x = self.dropout(x)  # between layers, as a stacked RNN applies it
            ahead, ahead_finals = layer["ahead"](x, lengths)
            back, back_finals = layer["back"](along_time(x, reverse), lengths)
            x = torch.cat([ahead, along_time(back, reverse)], dim=-1) * mask  # (batch, src_len, 2*hidden)
            finals.append([torch.stack(pair, dim=1) for pair in zip(ahead_finals, back_finals, strict=True)])
        return x, [
            torch.stack(kind, dim=1) for kind in zip(*finals, strict=True)
        ]  # (batch, layers, 2, hidden) each


def split_bidirectional_weights(module: nn.Module, state_dict: dict, prefix: str, *_: object) -> None:
    """Load-time migration: the weights of a checkpoint's bidirectional `rnn` (`weight_ih_l1_reverse`, …)
    become those of the layers' directions (`layers.1.back.rnn.weight_ih_l0`), in place in `state_dict`."""
    for key in [k for k in state_dict if k.startswith(f"{prefix}rnn.")]:
        name = key.removeprefix(f"{prefix}rnn.")
        kind, layer = name.removesuffix("_reverse").rsplit("_l", 1)
        direction = "back" if name.endswith("_reverse") else "ahead"
        state_dict[f"{prefix}layers.{layer}.{direction}.rnn.{kind}_l0"] = state_dict.pop(key)


class Bridge(nn.Module):
    """Encoder final states → the decoder's initial states, one per decoder layer (`cfg.rnn.bridge`).

    `learned`: tanh(W [h→; h←] + b) of the top encoder layer's final forward and backward states, one linear
    map giving every decoder layer's state (Bahdanau et al. use tanh(W_s h←_1)). `zero`: zeros. `last`:
    decoder layer i starts from the mean of the final forward and backward states of the encoder layer at the
    same depth from the top, without parameters; it needs decoder_layers <= encoder_layers.
    """

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        kind, hidden = cfg.rnn_settings.bridge, cfg.rnn_settings.hidden_size
        if kind == "last" and cfg.decoder_layers > cfg.encoder_layers:
            raise ConfigError("model.rnn.bridge=last needs model.decoder_layers <= model.encoder_layers")
        self.kind, self.layers, self.hidden = kind, cfg.decoder_layers, hidden
        self.proj = nn.Linear(2 * hidden, cfg.decoder_layers * hidden) if kind == "learned" else None

    def forward(self, final: Tensor) -> Tensor:
        """(batch, encoder_layers, 2, hidden) → (batch, decoder_layers, hidden)."""
        if self.kind == "zero":
            return final.new_zeros(final.size(0), self.layers, self.hidden)
        if self.proj is None:  # last
            return final[:, -self.layers :].mean(dim=2)
        hidden = torch.tanh(self.proj(final[:, -1].flatten(1)))  # (batch, decoder_layers * hidden)
        return hidden.view(-1, self.layers, self.hidden).to(final.dtype)  # the RNN's dtype under autocast too


class Decoder(nn.Module):
    """A stack of GRU/LSTM layers advanced one token at a time, attending with any attention module.

    State: 'hidden' (and 'cell' for LSTM), each (rows, layers, hidden), a row per hypothesis (the hypotheses
    of a sentence on consecutive rows, sharing its memory); subclasses may add keys. `forward` maps the
    embedded previous tokens (rows, embedding) to the pre-output vectors (rows, embedding), the attention
    weights (sentences, 1, hypotheses, src_len) and the new state."""

    def __init__(self, cfg: ModelConfig, input_size: int, attention: Attention) -> None:
        super().__init__()
        self.rnn = make_rnn(cfg, input_size, cfg.decoder_layers)
        self.rnn_keys = ("hidden", "cell") if cfg.rnn_settings.cell == "lstm" else ("hidden",)
        self.bridges = nn.ModuleList(Bridge(cfg) for _ in self.rnn_keys)
        self.attention, self.dropout = attention, nn.Dropout(cfg.dropout)

    def prepare(self, states: Tensor, finals: list[Tensor]) -> Memory:
        """Attention keys and values (computed once per sentence) and the bridged initial states."""
        keys, values = self.attention.prepare(states)
        memory = {"keys": keys, "values": values}
        for name, bridge, final in zip(self.rnn_keys, self.bridges, finals, strict=True):
            memory[f"init_{name}"] = bridge(final)  # (batch, layers, hidden)
        return memory

    def init_state(self, memory: Memory, hypotheses: int = 1) -> State:
        """Each hypothesis starts from its sentence's bridged states."""
        return {name: memory[f"init_{name}"].repeat_interleave(hypotheses, dim=0) for name in self.rnn_keys}

    def rnn_state(self, state: State) -> Tensor | tuple[Tensor, Tensor]:
        """The decoder state as the RNN takes it: hidden (GRU), or hidden and cell (LSTM), each
        (layers, batch, hidden)."""
        hx = [state[name].transpose(0, 1).contiguous() for name in self.rnn_keys]  # (layers, batch, hidden)
        return (hx[0], hx[1]) if len(hx) == 2 else hx[0]

    def recur(self, x: Tensor, state: State) -> tuple[Tensor, State]:
        """One RNN step on x (batch, input_size): the top layer's output (batch, hidden) and its new state."""
        output, hn = run_rnn(self.rnn, x.unsqueeze(1), self.rnn_state(state))
        hn = hn if isinstance(hn, tuple) else (hn,)  # (layers, batch, hidden) each
        return output.squeeze(1), {name: h.transpose(0, 1) for name, h in zip(self.rnn_keys, hn, strict=True)}

    def attend(self, query: Tensor, memory: Memory) -> tuple[Tensor, Tensor]:
        """Context (rows, d_value) and weights (sentences, 1, hypotheses, src_len) for the queries (rows,
        d_query): the hypotheses of a sentence query its memory together."""
        sentences = memory["src_mask"].size(0)
        queries = query.view(sentences, -1, query.size(-1))  # (sentences, hypotheses, d_query)
        context, weights = self.attention(queries, memory["keys"], memory["values"], memory["src_mask"])
        return context.reshape(query.size(0), -1), weights

    def forward(self, embedded: Tensor, memory: Memory, state: State) -> tuple[Tensor, Tensor, State]:
        raise NotImplementedError

    def teacher_forced(self, embedded: Tensor, memory: Memory, state: State) -> tuple[Tensor, Tensor]:
        """All target positions of embedded (batch, tgt_len, embedding) given the reference prefixes:
        pre-output vectors (batch, tgt_len, embedding) and attention weights (batch, 1, tgt_len, src_len). One
        step at a time here, as each step's input depends on the previous step's attention."""
        outputs, weights = [], []
        for embedded_t in embedded.unbind(1):  # unbind: one gradient stack, not a zero-filled tensor per step
            out, step_weights, state = self(embedded_t, memory, state)
            outputs.append(out)
            weights.append(step_weights)
        return torch.stack(outputs, dim=1), torch.cat(weights, dim=2)


class BahdanauDecoder(Decoder):
    """Bahdanau et al. 2015: the previous top-layer state s_{t-1} queries the encoder states with the additive
    score vᵀ tanh(W_s s_{t-1} + W_h h_j); the context c_t enters the cell with the previous target embedding
    y_{t-1}; the output layer sees [s_t; c_t; y_{t-1}].

    The paper's maxout deep output is a linear + tanh layer to the embedding size here, so that the vocabulary
    projection can be tied to the target embedding. `input_feeding` and the Luong options do not apply.
    """

    def __init__(self, cfg: ModelConfig) -> None:
        rnn = cfg.rnn_settings
        hidden, context, embedding = rnn.hidden_size, 2 * rnn.hidden_size, rnn.embedding_size
        super().__init__(cfg, embedding + context, AdditiveAttention(hidden, context, hidden))
        self.pre_output = nn.Linear(hidden + context + embedding, embedding)

    def recurrence(
        self, embedded: Tensor, memory: Memory, state: State
    ) -> tuple[Tensor, Tensor, Tensor, State]:
        """One step of the recurrence: s_t (batch, hidden), c_t (batch, 2*hidden), the attention weights and
        the new state."""
        context, weights = self.attend(state["hidden"][:, -1], memory)  # (batch, 2*hidden)
        output, new_state = self.recur(torch.cat([embedded, context], dim=-1), state)
        return output, context, weights, new_state

    def deep_output(self, output: Tensor, context: Tensor, embedded: Tensor) -> Tensor:
        """tanh(W [s_t; c_t; y_{t-1}] + b) → (…, embedding), for one step or for all positions at once."""
        return self.dropout(torch.tanh(self.pre_output(torch.cat([output, context, embedded], dim=-1))))

    def forward(self, embedded: Tensor, memory: Memory, state: State) -> tuple[Tensor, Tensor, State]:
        output, context, weights, new_state = self.recurrence(embedded, memory, state)
        return self.deep_output(output, context, embedded), weights, new_state

    def teacher_forced(self, embedded: Tensor, memory: Memory, state: State) -> tuple[Tensor, Tensor]:
        """Only the recurrence goes one position at a time (each input holds the previous state's context);
        the deep output, which feeds nothing back, then runs over all positions in one matmul."""
        outputs, contexts, weights = [], [], []
        for embedded_t in embedded.unbind(1):
            output, context, step_weights, state = self.recurrence(embedded_t, memory, state)
            outputs.append(output)
            contexts.append(context)
            weights.append(step_weights)
        deep = self.deep_output(torch.stack(outputs, dim=1), torch.stack(contexts, dim=1), embedded)
        return deep, torch.cat(weights, dim=2)  # (batch, tgt_len, embedding), (batch, 1, tgt_len, src_len)


class LuongDecoder(Decoder):
    """Luong et al. 2015 global attention: the RNN steps first, then its top state h_t queries the encoder
    states with the `dot`, `general` or `concat` score, and the attentional vector h̃_t = tanh(W_c [c_t; h_t])
    feeds the output layer and, with input feeding, the next step's input next to the target embedding.

    The bidirectional encoder states (2*hidden) are projected to `hidden` once per sentence, so that `dot`
    works and every score compares vectors of the decoder's size; h̃_t has the embedding size, so that the
    output projection can be tied to the target embedding. State key 'feed' (batch, embedding) holds h̃_{t-1}.
    """

    def __init__(self, cfg: ModelConfig) -> None:
        rnn = cfg.rnn_settings
        if rnn.luong_score == "concat" and rnn.scale_scores:
            raise ConfigError(
                "model.rnn.scale_scores applies to model.rnn.luong_score dot or general, not concat"
            )
        hidden, self.input_feeding = rnn.hidden_size, rnn.input_feeding
        input_size = 2 * rnn.embedding_size if rnn.input_feeding else rnn.embedding_size
        super().__init__(cfg, input_size, luong_attention(rnn.luong_score, hidden, hidden, rnn.scale_scores))
        self.memory_proj = nn.Linear(2 * hidden, hidden, bias=False)
        self.combine = nn.Linear(2 * hidden, rnn.embedding_size, bias=False)  # W_c

    def prepare(self, states: Tensor, finals: list[Tensor]) -> Memory:
        return super().prepare(self.memory_proj(states), finals)  # keys, values from (batch, src_len, hidden)

    def init_state(self, memory: Memory, hypotheses: int = 1) -> State:
        state = super().init_state(memory, hypotheses)
        if self.input_feeding:
            hidden = state["hidden"]
            state["feed"] = hidden.new_zeros(hidden.size(0), self.combine.out_features)  # h̃_0 = 0
        return state

    def forward(self, embedded: Tensor, memory: Memory, state: State) -> tuple[Tensor, Tensor, State]:
        x = torch.cat([embedded, state["feed"]], dim=-1) if self.input_feeding else embedded
        output, new_state = self.recur(x, state)
        context, weights = self.attend(output, memory)  # (batch, hidden)
        attentional = self.dropout(torch.tanh(self.combine(torch.cat([context, output], dim=-1))))
        if self.input_feeding:
            new_state["feed"] = attentional.to(state["feed"].dtype)  # (batch, embedding)
        return attentional, weights, new_state

    def teacher_forced(self, embedded: Tensor, memory: Memory, state: State) -> tuple[Tensor, Tensor]:
        """Without input feeding nothing flows from attention back into the RNN: one cuDNN call runs it over
        every position, and all positions attend at once."""
        if self.input_feeding:
            return super().teacher_forced(embedded, memory, state)
        output, _ = run_rnn(self.rnn, embedded, self.rnn_state(state))  # (batch, tgt, hidden)
        context, weights = self.attention(output, memory["keys"], memory["values"], memory["src_mask"])
        combined = torch.cat([context, output], dim=-1)  # (batch, tgt, 2*hidden)
        attentional = torch.tanh(self.combine(combined))  # (batch, tgt, embedding)
        return self.dropout(attentional), weights


class RNNSeq2Seq(Seq2Seq):
    """Bidirectional RNN encoder, attentional RNN decoder: Bahdanau (`rnn-bahdanau`) or Luong (`rnn-luong`).

    Memory (per sentence): 'src_mask', attention 'keys' and 'values', the decoder's initial 'init_hidden' (and
    'init_cell' for LSTM), (sentences, decoder_layers, hidden). State (per hypothesis): 'hidden' (and 'cell'),
    (rows, decoder_layers, hidden); Luong with input feeding adds 'feed'. The vocabulary projection of the
    pre-output vector is the target embedding when `tie_embeddings`, which with a joint vocabulary also serves
    the source.
    """

    def __init__(self, cfg: ModelConfig, src_vocab: int, tgt_vocab: int, joint_vocab: bool, pad: int) -> None:
        super().__init__()
        share, embedding = cfg.shares_embeddings(joint_vocab), cfg.rnn_settings.embedding_size
        src_embedding, tgt_embedding = make_embeddings(embedding, src_vocab, tgt_vocab, share, pad)
        self.encoder = Encoder(cfg, src_embedding)
        self.decoder = LuongDecoder(cfg) if cfg.type == "rnn-luong" else BahdanauDecoder(cfg)
        self.tgt_embedding, self.tgt_dropout = tgt_embedding, nn.Dropout(cfg.dropout)
        self.output = None if cfg.tie_embeddings else nn.Linear(embedding, tgt_vocab, bias=False)

    def encode(self, src: Tensor, src_mask: Tensor) -> Memory:
        states, finals = self.encoder(src, src_mask)
        return {"src_mask": src_mask, **self.decoder.prepare(states, finals)}

    def init_state(self, memory: Memory, max_len: int, hypotheses: int = 1) -> State:
        """The bridged initial hidden states; an RNN step needs no room for earlier tokens (`max_len`)."""
        return self.decoder.init_state(memory, hypotheses)

    def target_embedding(self) -> nn.Embedding:
        return self.tgt_embedding

    def logits(self, x: Tensor) -> Tensor:
        """Pre-output vectors (…, embedding) → vocabulary logits (…, tgt_vocab)."""
        return F.linear(x, self.target_embedding().weight) if self.output is None else self.output(x)

    def decode_step(self, tokens: Tensor, memory: Memory, state: State) -> Step:
        embedded = self.tgt_dropout(self.tgt_embedding(tokens))  # (rows, embedding)
        out, weights, new_state = self.decoder(embedded, memory, state)
        log_probs = self.logits(out).float().log_softmax(dim=-1)  # (rows, tgt_vocab)
        return Step(log_probs, new_state, weights.reshape(tokens.size(0), -1))  # (rows, src_len)

    def decode(self, tgt_in: Tensor, memory: Memory, wanted: Wanted = Wanted()) -> Output:
        if wanted.full_context:
            raise ValueError("an RNN decoder has no target self-attention to give full context")
        embedded = self.tgt_dropout(self.tgt_embedding(tgt_in))  # (batch, tgt_len, embedding)
        outputs, weights = self.decoder.teacher_forced(embedded, memory, self.decoder.init_state(memory))
        logits = self.logits(outputs) if wanted.logits else None  # (batch, tgt_len, tgt_vocab)
        attention = weights.unsqueeze(1) if wanted.attention else None  # (batch, 1, 1, tgt_len, src_len)
        alignment = None if wanted.align_layer is None else weights  # (batch, 1, tgt_len, src_len)
        return Output(logits, attention, alignment)
