"""RNN encoder-decoder models with attention.

`rnn-bahdanau` follows Bahdanau et al. 2015, "Neural Machine Translation by Jointly Learning to Align and
Translate"; `rnn-luong` follows Luong et al. 2015, "Effective Approaches to Attention-based Neural Machine
Translation". Both share the bidirectional GRU/LSTM encoder, the bridge to the decoder's first state and the
stacked decoder RNN; they differ only where the papers do: when attention is computed, what enters the
recurrent cell and what the output layer sees.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

from nmt.data.special_tokens import PAD
from nmt.errors import ConfigError
from nmt.limits import check_at_least_one
from nmt.models.attention import AdditiveAttention, Attention, luong_attention
from nmt.models.base import Memory, Output, Seq2Seq, State, Step, make_embeddings

if TYPE_CHECKING:  # the model section holds this family's section: a type hint only, not an import cycle
    from nmt.models.config import ModelConfig


@dataclass(frozen=True)
class RNNConfig:
    """The settings of the RNN models (`model.rnn`); the Luong ones do not apply to rnn-bahdanau."""

    cell: Literal["gru", "lstm"] = "gru"
    embedding_size: int = 512
    hidden_size: int = 512  # per direction in the encoder
    bridge: Literal["learned", "zero", "last"] = "learned"
    luong_score: Literal["dot", "general", "concat"] = "general"
    input_feeding: bool = True
    scale_scores: bool = False  # Luong dot/general scores divided by sqrt(d)

    def check(self) -> None:
        """Raise ConfigError for a value out of range (run by ModelConfig, as TransformerConfig.check is)."""
        check_at_least_one(self, "model.rnn.", ("embedding_size", "hidden_size"))


def make_rnn(cfg: ModelConfig, input_size: int, layers: int, bidirectional: bool = False) -> nn.RNNBase:
    """A batch-first GRU or LSTM stack (`cfg.rnn.cell`) with dropout between its layers."""
    rnn = nn.LSTM if cfg.rnn.cell == "lstm" else nn.GRU
    dropout, hidden = (cfg.dropout if layers > 1 else 0.0), cfg.rnn.hidden_size
    return rnn(input_size, hidden, layers, batch_first=True, dropout=dropout, bidirectional=bidirectional)


def run_rnn(
    rnn: nn.RNNBase, x: Tensor | PackedSequence, hx: Tensor | tuple[Tensor, Tensor] | None = None
) -> tuple:
    """Call `rnn` in its own dtype, also under autocast: autocast would run cuDNN RNNs in float16 (not the
    requested bfloat16), re-casting the weights on every call, with gradients that underflow unscaled."""
    device = (x.data if isinstance(x, PackedSequence) else x).device
    with torch.autocast(device.type, enabled=False):
        return rnn(x, hx)


class Encoder(nn.Module):
    """Embeddings → bidirectional GRU/LSTM over packed sequences, so padding never enters the recurrence."""

    def __init__(self, cfg: ModelConfig, embedding: nn.Embedding) -> None:
        super().__init__()
        self.embedding, self.dropout = embedding, nn.Dropout(cfg.dropout)
        self.rnn = make_rnn(cfg, cfg.rnn.embedding_size, cfg.encoder_layers, bidirectional=True)

    def forward(self, src: Tensor, src_mask: Tensor) -> tuple[Tensor, list[Tensor]]:
        """Encoder states (batch, src_len, 2*hidden), zero at padding, and the final states: hidden (and cell
        for LSTM), each (batch, layers, 2, hidden) with the forward direction first."""
        lengths = src_mask.sum(dim=(1, 2)).cpu()  # packing needs the lengths on the host
        embedded = self.dropout(self.embedding(src))  # (batch, src_len, embedding)
        packed = pack_padded_sequence(embedded, lengths, batch_first=True, enforce_sorted=False)
        packed_states, final = run_rnn(self.rnn, packed)
        states, _ = pad_packed_sequence(packed_states, batch_first=True, total_length=src.size(1))
        finals = final if isinstance(final, tuple) else (final,)  # (layers*2, batch, hidden) each
        split = [f.view(-1, 2, *f.shape[1:]) for f in finals]  # (layers, 2, batch, hidden) each
        return states, [f.permute(2, 0, 1, 3) for f in split]  # (batch, layers, 2, hidden) each


class Bridge(nn.Module):
    """Encoder final states → the decoder's initial states, one per decoder layer (`cfg.rnn.bridge`).

    `learned`: tanh(W [h→; h←] + b) of the top encoder layer's final forward and backward states, one linear
    map giving every decoder layer's state (Bahdanau et al. use tanh(W_s h←_1)). `zero`: zeros. `last`:
    decoder layer i starts from the mean of the final forward and backward states of the encoder layer at the
    same depth from the top, without parameters; it needs decoder_layers <= encoder_layers.
    """

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        kind, hidden = cfg.rnn.bridge, cfg.rnn.hidden_size
        if kind == "last" and cfg.decoder_layers > cfg.encoder_layers:
            raise ConfigError("model.rnn.bridge=last needs model.decoder_layers <= model.encoder_layers")
        self.kind, self.layers, self.hidden = kind, cfg.decoder_layers, hidden
        self.proj = nn.Linear(2 * hidden, cfg.decoder_layers * hidden) if kind == "learned" else None

    def forward(self, final: Tensor) -> Tensor:
        """(batch, encoder_layers, 2, hidden) → (batch, decoder_layers, hidden)."""
        if self.kind == "zero":
            return final.new_zeros(final.size(0), self.layers, self.hidden)
        if self.kind == "last":
            return final[:, -self.layers :].mean(dim=2)
        hidden = torch.tanh(self.proj(final[:, -1].flatten(1)))  # (batch, decoder_layers * hidden)
        return hidden.view(-1, self.layers, self.hidden).to(final.dtype)  # the RNN's dtype under autocast too


class Decoder(nn.Module):
    """A stack of GRU/LSTM layers advanced one token at a time, attending with any attention module.

    State: 'hidden' (and 'cell' for LSTM), each (batch, layers, hidden); subclasses may add keys. `forward`
    maps the embedded previous token (batch, embedding) to the pre-output vector (batch, embedding), the
    attention weights (batch, 1, 1, src_len) and the new state.
    """

    def __init__(self, cfg: ModelConfig, input_size: int, attention: Attention) -> None:
        super().__init__()
        self.rnn = make_rnn(cfg, input_size, cfg.decoder_layers)
        self.rnn_keys = ("hidden", "cell") if cfg.rnn.cell == "lstm" else ("hidden",)
        self.bridges = nn.ModuleList(Bridge(cfg) for _ in self.rnn_keys)
        self.attention, self.dropout = attention, nn.Dropout(cfg.dropout)

    def prepare(self, states: Tensor, finals: list[Tensor]) -> Memory:
        """Attention keys and values (computed once per sentence) and the bridged initial states."""
        keys, values = self.attention.prepare(states)
        memory = {"keys": keys, "values": values}
        for name, bridge, final in zip(self.rnn_keys, self.bridges, finals, strict=True):
            memory[f"init_{name}"] = bridge(final)  # (batch, layers, hidden)
        return memory

    def init_state(self, memory: Memory) -> State:
        return {name: memory[f"init_{name}"] for name in self.rnn_keys}

    def recur(self, x: Tensor, state: State) -> tuple[Tensor, State]:
        """One RNN step on x (batch, input_size): the top layer's output (batch, hidden) and its new state."""
        hx = [state[name].transpose(0, 1).contiguous() for name in self.rnn_keys]  # (layers, batch, hidden)
        output, hn = run_rnn(self.rnn, x.unsqueeze(1), tuple(hx) if len(hx) == 2 else hx[0])
        hn = hn if isinstance(hn, tuple) else (hn,)  # (layers, batch, hidden) each
        return output.squeeze(1), {name: h.transpose(0, 1) for name, h in zip(self.rnn_keys, hn, strict=True)}

    def attend(self, query: Tensor, memory: Memory) -> tuple[Tensor, Tensor]:
        """Context (batch, d_value) and weights (batch, 1, 1, src_len) for one query (batch, d_query)."""
        context, weights = self.attention(
            query.unsqueeze(1), memory["keys"], memory["values"], memory["src_mask"]
        )
        return context.squeeze(1), weights

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
        hidden, context, embedding = cfg.rnn.hidden_size, 2 * cfg.rnn.hidden_size, cfg.rnn.embedding_size
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
        rnn = cfg.rnn
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

    def init_state(self, memory: Memory) -> State:
        state = super().init_state(memory)
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
        hx = [state[name].transpose(0, 1).contiguous() for name in self.rnn_keys]  # (layers, batch, hidden)
        output, _ = run_rnn(self.rnn, embedded, tuple(hx) if len(hx) == 2 else hx[0])  # (batch, tgt, hidden)
        context, weights = self.attention(output, memory["keys"], memory["values"], memory["src_mask"])
        combined = torch.cat([context, output], dim=-1)  # (batch, tgt, 2*hidden)
        attentional = torch.tanh(self.combine(combined))  # (batch, tgt, embedding)
        return self.dropout(attentional), weights


class RNNSeq2Seq(Seq2Seq):
    """Bidirectional RNN encoder, attentional RNN decoder: Bahdanau (`rnn-bahdanau`) or Luong (`rnn-luong`).

    The encoder packs its sequences, which needs their lengths on the host: a training step cannot be captured
    in a CUDA graph (`reads_lengths_on_host`); decoding steps can.

    Memory: 'src_mask', attention 'keys' and 'values', the decoder's initial 'init_hidden' (and 'init_cell'
    for LSTM), (batch, decoder_layers, hidden). State: 'hidden' (and 'cell'), (batch, decoder_layers, hidden);
    Luong with input feeding adds 'feed'. The vocabulary projection of the pre-output vector is the
    target embedding when `tie_embeddings`, which with a joint vocabulary also serves the source.
    """

    reads_lengths_on_host = True

    def __init__(self, cfg: ModelConfig, src_vocab: int, tgt_vocab: int, joint_vocab: bool) -> None:
        super().__init__()
        share, embedding = cfg.tie_embeddings and joint_vocab, cfg.rnn.embedding_size
        src_embedding, tgt_embedding = make_embeddings(embedding, src_vocab, tgt_vocab, share, PAD)
        self.encoder = Encoder(cfg, src_embedding)
        self.decoder = LuongDecoder(cfg) if cfg.type == "rnn-luong" else BahdanauDecoder(cfg)
        self.tgt_embedding, self.tgt_dropout = tgt_embedding, nn.Dropout(cfg.dropout)
        self.output = None if cfg.tie_embeddings else nn.Linear(embedding, tgt_vocab, bias=False)

    def encode(self, src: Tensor, src_mask: Tensor) -> Memory:
        states, finals = self.encoder(src, src_mask)
        return {"src_mask": src_mask, **self.decoder.prepare(states, finals)}

    def init_state(self, memory: Memory, max_len: int) -> State:
        """The bridged initial hidden states; an RNN step needs no room for earlier tokens (`max_len`)."""
        return self.decoder.init_state(memory)

    def logits(self, x: Tensor) -> Tensor:
        """Pre-output vectors (…, embedding) → vocabulary logits (…, tgt_vocab)."""
        return F.linear(x, self.tgt_embedding.weight) if self.output is None else self.output(x)

    def decode_step(self, tokens: Tensor, memory: Memory, state: State) -> Step:
        embedded = self.tgt_dropout(self.tgt_embedding(tokens))  # (batch, embedding)
        out, weights, new_state = self.decoder(embedded, memory, state)
        log_probs = self.logits(out).float().log_softmax(dim=-1)  # (batch, tgt_vocab)
        return Step(log_probs, new_state, weights.flatten(1))  # (batch, 1, 1, src_len) → (batch, src_len)

    def decode(self, tgt_in: Tensor, memory: Memory, return_attention: bool = False) -> Output:
        embedded = self.tgt_dropout(self.tgt_embedding(tgt_in))  # (batch, tgt_len, embedding)
        outputs, weights = self.decoder.teacher_forced(embedded, memory, self.decoder.init_state(memory))
        logits = self.logits(outputs)  # (batch, tgt_len, tgt_vocab)
        attention = weights.unsqueeze(1) if return_attention else None
        return Output(logits, attention)  # attention: (batch, 1, 1, tgt_len, src_len)
