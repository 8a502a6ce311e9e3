"""RNN encoder-decoder models: attention scores by hand, the decoding contract, the pack-free encoder,
bridges, learning."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from nmt.data.special_tokens import BOS, EOS, PAD
from nmt.errors import ConfigError
from nmt.models.attention import AdditiveAttention, MultiplicativeAttention, luong_attention
from nmt.models.base import Wanted
from nmt.models.build import build_model
from nmt.models.config import ModelConfig, RNNConfig
from nmt.models.rnn import Decoder, RNNSeq2Seq

VOCAB = 13
QUERIES = [[1.0, 2.0], [-1.0, 1.0]]  # 2 target positions, d = 2
KEYS = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]  # 3 source positions, d = 2


def tiny(**fields: object) -> ModelConfig:
    """A small RNN config, `fields` shared or of the `rnn` section: embeddings (8) and hidden size (6) differ,
    so dimension mix-ups fail loudly."""
    names = {field.name for field in dataclasses.fields(RNNConfig)}
    rnn = {"embedding_size": 8, "hidden_size": 6} | {k: v for k, v in fields.items() if k in names}
    shared = {"type": "rnn-luong", "encoder_layers": 2, "decoder_layers": 2, "dropout": 0.3}
    return ModelConfig(**shared | {k: v for k, v in fields.items() if k not in names}, rnn=RNNConfig(**rnn))


def make_model(seed: int = 0, **fields: object) -> RNNSeq2Seq:
    torch.manual_seed(seed)
    return RNNSeq2Seq(tiny(**fields), VOCAB, VOCAB, joint_vocab=True, pad=PAD).eval()


def padded_batch() -> tuple[Tensor, Tensor, Tensor]:
    """Source (3, 5) with lengths 5, 3, 1, its mask (3, 1, 5) and a target prefix (3, 4) starting with bos."""
    src = torch.tensor([[4, 5, 6, 7, EOS], [8, 9, EOS, PAD, PAD], [EOS, PAD, PAD, PAD, PAD]])
    tgt_in = torch.tensor([[BOS, 5, 6, 7], [BOS, 9, 10, PAD], [BOS, 4, PAD, PAD]])
    return src, (src != PAD).unsqueeze(1), tgt_in


def set_weights(layer: nn.Linear, weight: list[list[float]]) -> None:
    with torch.no_grad():
        layer.weight.copy_(torch.tensor(weight))
        if layer.bias is not None:
            layer.bias.zero_()


def additive_by_hand(w_h: list[list[float]], v: list[float]) -> list[list[float]]:
    """vᵀ tanh(W_s q + W_h h) with W_s = I, written out element by element."""
    projected = [[sum(w * x for w, x in zip(row, key, strict=True)) for row in w_h] for key in KEYS]
    return [
        [sum(vk * math.tanh(qk + pk) for vk, qk, pk in zip(v, q, p, strict=True)) for p in projected]
        for q in QUERIES
    ]


def check_scores(attention: nn.Module, expected: list[list[float]]) -> None:
    query, memory = torch.tensor([QUERIES]), torch.tensor([KEYS])  # (1, 2, 2), (1, 3, 2)
    keys, values = attention.prepare(memory)
    torch.testing.assert_close(attention.score(query, keys), torch.tensor([expected]))
    rows = [[math.exp(s) / sum(math.exp(x) for x in row) for s in row] for row in expected]
    _, weights = attention(query, keys, values, None)
    torch.testing.assert_close(weights, torch.tensor([[rows]]))  # (batch, heads, tgt_len, src_len)


def test_bahdanau_additive_score_by_hand() -> None:
    attention = AdditiveAttention(query_dim=2, key_dim=2, hidden_dim=2)
    set_weights(attention.query_proj, [[1.0, 0.0], [0.0, 1.0]])
    set_weights(attention.key_proj, [[1.0, 0.0], [0.0, -1.0]])
    set_weights(attention.energy, [[1.0, -2.0]])
    check_scores(attention, additive_by_hand([[1.0, 0.0], [0.0, -1.0]], [1.0, -2.0]))


def test_luong_concat_score_by_hand() -> None:
    attention = luong_attention("concat", 2, 2)
    set_weights(attention.query_proj, [[1.0, 0.0], [0.0, 1.0]])
    set_weights(attention.key_proj, [[0.5, 1.0], [2.0, 0.0]])
    set_weights(attention.energy, [[0.5, 1.5]])
    check_scores(attention, additive_by_hand([[0.5, 1.0], [2.0, 0.0]], [0.5, 1.5]))


@pytest.mark.parametrize("scale", [False, True])
def test_luong_dot_score_by_hand(scale: bool) -> None:
    factor = 2**-0.5 if scale else 1.0
    expected = [[1.0, 2.0, 3.0], [-1.0, 1.0, 0.0]]  # q · h
    check_scores(luong_attention("dot", 2, 2, scale), [[s * factor for s in row] for row in expected])


def test_luong_general_score_by_hand() -> None:
    attention = luong_attention("general", 2, 2)
    assert isinstance(attention, MultiplicativeAttention)
    set_weights(attention.key_proj, [[2.0, 0.0], [1.0, 1.0]])  # W_a h = [2, 1], [0, 1], [2, 2]
    check_scores(attention, [[4.0, 2.0, 6.0], [-1.0, 1.0, 0.0]])


VARIANTS = [
    {"type": "rnn-bahdanau"},
    *(
        {"luong_score": score, "input_feeding": feed}
        for score in ("dot", "general", "concat")
        for feed in (True, False)
    ),
]


@pytest.mark.parametrize("cell", ["gru", "lstm"])
@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: "-".join(map(str, v.values())))
def test_steps_equal_teacher_forcing(cell: str, variant: dict) -> None:
    model = make_model(cell=cell, **variant)
    src, src_mask, tgt_in = padded_batch()
    with torch.no_grad():
        memory = model.encode(src, src_mask)
        forced = model.decode(tgt_in, memory, Wanted(attention=True))
        state, stepped = model.init_state(memory, tgt_in.size(1)), []
        for t in range(tgt_in.size(1)):
            before = {name: tensor.clone() for name, tensor in state.items()}
            step = model.decode_step(tgt_in[:, t], memory, state)
            assert all(torch.equal(before[name], state[name]) for name in state)  # input state untouched
            assert step.log_probs.dtype == torch.float32 and step.log_probs.shape == (3, VOCAB)
            stepped.append(step.log_probs)
            state = step.state
    assert forced.logits.shape == (3, 4, VOCAB)
    torch.testing.assert_close(torch.stack(stepped, dim=1), forced.logits.log_softmax(-1), atol=1e-5, rtol=0)
    weights = forced.attention
    assert weights.shape == (3, 1, 1, 4, 5)
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, 1, 1, 4))
    assert weights[1, ..., 3:].eq(0).all() and weights[2, ..., 1:].eq(0).all()
    assert weights[0].gt(0).all()


@pytest.mark.parametrize(
    ("variant", "depends"), [(VARIANTS[0], False), (VARIANTS[1], True)], ids=["bahdanau", "luong"]
)
def test_attention_query_timing(variant: dict, depends: bool) -> None:
    """Bahdanau attends with s_{t-1} (before reading y_{t-1}), Luong with h_t (after the RNN step)."""
    model = make_model(**variant)
    src, src_mask, tgt_in = padded_batch()
    with torch.no_grad():
        memory = model.encode(src, src_mask)
        first = model.decode(tgt_in[:, :1], memory, Wanted(attention=True)).attention
        other = model.decode(torch.full_like(tgt_in[:, :1], 7), memory, Wanted(attention=True)).attention
    assert torch.allclose(first, other) != depends


@pytest.mark.parametrize("variant", [{"type": "rnn-bahdanau"}, {"cell": "lstm"}], ids=["bahdanau", "luong"])
def test_state_dtype_stable_under_autocast(variant: dict) -> None:
    """Under bf16 autocast the recurrent state keeps the RNN's float32 from the first step on."""
    model = make_model(**variant)
    src, src_mask, tgt_in = padded_batch()
    with torch.no_grad(), torch.autocast("cpu", torch.bfloat16):
        memory = model.encode(src, src_mask)
        state = model.init_state(memory, tgt_in.size(1))
        for t in range(tgt_in.size(1)):
            step = model.decode_step(tgt_in[:, t], memory, state)
            assert {name: tensor.dtype for name, tensor in step.state.items()} == dict.fromkeys(
                state, torch.float32
            )
            state = step.state
    assert step.log_probs.dtype == torch.float32


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: "-".join(map(str, v.values())))
def test_teacher_forcing_trains_under_autocast(variant: dict) -> None:
    """Training's forward and backward under bf16 autocast: the RNNs run in float32, the rest in bf16."""
    model = make_model(cell="lstm", **variant)
    src, src_mask, tgt_in = padded_batch()
    with torch.autocast("cpu", torch.bfloat16):
        logits = model(src, src_mask, tgt_in).logits
    logits.float().sum().backward()
    assert logits.shape == (3, 4, VOCAB)
    assert all(p.grad is not None and p.grad.isfinite().all() for p in model.decoder.rnn.parameters())


@pytest.mark.parametrize(
    ("fields", "input_size"),
    [
        ({"input_feeding": True}, 2 * 8),  # embedding + h̃_{t-1} (embedding size)
        ({"input_feeding": False}, 8),
        ({"type": "rnn-bahdanau"}, 8 + 2 * 6),  # embedding + context (2 * hidden)
    ],
)
def test_decoder_rnn_input_size(fields: dict, input_size: int) -> None:
    model = make_model(**fields)
    assert model.decoder.rnn.input_size == input_size
    src, src_mask, _ = padded_batch()
    state = model.init_state(model.encode(src, src_mask), 1)
    assert ("feed" in state) == (fields.get("input_feeding") is True)


@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_encoder_gives_each_sentence_what_it_gives_it_alone(cell: str) -> None:
    model = make_model(cell=cell, bridge="last")
    src, src_mask, _ = padded_batch()
    with torch.no_grad():
        states, finals = model.encoder(src, src_mask)
        memory = model.encode(src, src_mask)
        for row, length in enumerate(src_mask.sum(dim=(1, 2)).tolist()):
            alone = src[row : row + 1, :length]
            states_alone, finals_alone = model.encoder(alone, torch.ones(1, 1, length, dtype=torch.bool))
            torch.testing.assert_close(states[row, :length], states_alone[0])
            for final, final_alone in zip(finals, finals_alone, strict=True):
                torch.testing.assert_close(final[row], final_alone[0])
            hidden_alone = model.encode(alone, torch.ones(1, 1, length, dtype=torch.bool))["init_hidden"]
            torch.testing.assert_close(memory["init_hidden"][row], hidden_alone[0])
    assert states[1, 3:].eq(0).all() and states[2, 1:].eq(0).all()


def packed_reference(rnn: nn.RNNBase, x: Tensor, lengths: Tensor) -> tuple[Tensor, tuple[Tensor, ...]]:
    """A bidirectional RNN over packed sequences, as the encoder ran before it went without packing: outputs
    (batch, length, 2*hidden) zero at padding, final states (layers*2, batch, hidden) each."""
    packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
    outputs, finals = rnn(packed)
    outputs, _ = pad_packed_sequence(outputs, batch_first=True, total_length=x.size(1))
    return outputs, finals if isinstance(finals, tuple) else (finals,)


@pytest.mark.parametrize("cell", ["gru", "lstm"])
@pytest.mark.parametrize("layers", [1, 2])
def test_pack_free_encoder_equals_the_packed_one(cell: str, layers: int) -> None:
    """On a ragged batch: the same states (zero at padding) and final states in both directions, from the
    weights of a bidirectional RNN as checkpoints before held them (loaded through the migration)."""
    torch.manual_seed(1)
    model = make_model(cell=cell, encoder_layers=layers)
    packed_rnn = (nn.LSTM if cell == "lstm" else nn.GRU)(8, 6, layers, batch_first=True, bidirectional=True)
    old_weights = {f"encoder.rnn.{name}": tensor for name, tensor in packed_rnn.state_dict().items()}
    weights = {k: v for k, v in model.state_dict().items() if not k.startswith("encoder.layers.")}
    model.load_state_dict(weights | old_weights)
    src = torch.randint(4, VOCAB, (4, 9))
    lengths = torch.tensor([9, 4, 1, 6])
    src[torch.arange(9) >= lengths.unsqueeze(1)] = PAD
    src_mask = (src != PAD).unsqueeze(1)
    with torch.no_grad():
        states, finals = model.encoder(src, src_mask)
        expected, expected_finals = packed_reference(packed_rnn, model.encoder.embedding(src), lengths)
    torch.testing.assert_close(states, expected, atol=1e-6, rtol=0)
    for final, reference in zip(finals, expected_finals, strict=True):  # hidden (and cell)
        reference = reference.view(layers, 2, 4, 6).permute(2, 0, 1, 3)  # (batch, layers, 2, hidden)
        torch.testing.assert_close(final, reference, atol=1e-6, rtol=0)


@pytest.mark.parametrize("cell", ["gru", "lstm"])
@pytest.mark.parametrize("bridge", ["learned", "zero", "last"])
def test_bridge_shapes(cell: str, bridge: str) -> None:
    model = make_model(cell=cell, bridge=bridge, encoder_layers=3, decoder_layers=2)
    src, src_mask, _ = padded_batch()
    with torch.no_grad():
        _, finals = model.encoder(src, src_mask)
        state = model.init_state(model.encode(src, src_mask), 1)
    assert [final.shape for final in finals] == [(3, 3, 2, 6)] * len(finals)  # (batch, layers, 2, hidden)
    assert set(state) == ({"hidden", "cell"} if cell == "lstm" else {"hidden"}) | {"feed"}
    for final, name in zip(finals, ("hidden", "cell")[: len(finals)], strict=True):
        assert state[name].shape == (3, 2, 6)  # (batch, decoder_layers, hidden)
        if bridge == "zero":
            assert state[name].eq(0).all()
        elif bridge == "last":
            torch.testing.assert_close(state[name], (final[:, 1:, 0] + final[:, 1:, 1]) / 2)
        else:
            assert state[name].abs().lt(1).all() and state[name].ne(0).all()


@pytest.mark.parametrize(
    "fields",
    [
        {"bridge": "last", "encoder_layers": 1, "decoder_layers": 2},
        {"luong_score": "concat", "scale_scores": True},
    ],
)
def test_impossible_configs_raise(fields: dict) -> None:
    with pytest.raises(ConfigError):
        RNNSeq2Seq(tiny(**fields), VOCAB, VOCAB, joint_vocab=True, pad=PAD)


@pytest.mark.parametrize("joint", [True, False])
def test_tied_embeddings(joint: bool) -> None:
    model = build_model(tiny(tie_embeddings=True), VOCAB, VOCAB + 2, joint_vocab=joint, pad=PAD)
    assert model.output is None
    assert (model.encoder.embedding is model.tgt_embedding) == joint
    assert model.tgt_embedding.weight[PAD].eq(0).all()
    untied = build_model(tiny(tie_embeddings=False), VOCAB, VOCAB, joint_vocab=True, pad=PAD)
    assert untied.encoder.embedding is not untied.tgt_embedding and untied.output is not None


def copy_loss(model: RNNSeq2Seq, src: Tensor) -> Tensor:
    """Cross-entropy of reproducing `src` (which ends with eos) from bos."""
    tgt_in = torch.cat([torch.full_like(src[:, :1], BOS), src[:, :-1]], dim=1)
    logits = model(src, (src != PAD).unsqueeze(1), tgt_in).logits
    return F.cross_entropy(logits.flatten(0, 1), src.flatten(), ignore_index=PAD)


@pytest.mark.parametrize(
    "variant", [{"type": "rnn-bahdanau"}, {"luong_score": "general"}], ids=["bahdanau", "luong"]
)
def test_learns_copy_task(variant: dict) -> None:
    model = make_model(
        embedding_size=32, hidden_size=32, encoder_layers=1, decoder_layers=1, dropout=0.0, **variant
    )
    generator = torch.Generator().manual_seed(0)
    src = torch.randint(4, VOCAB, (32, 6), generator=generator)
    src[:, -1] = EOS
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    model.train()
    initial = copy_loss(model, src).item()
    for _ in range(60):
        optimizer.zero_grad()
        copy_loss(model, src).backward()
        optimizer.step()
    assert copy_loss(model, src).item() < initial / 10


@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_bahdanau_deep_output_over_all_positions_matches_step_by_step(cell: str) -> None:
    """Teacher forcing computes the deep output once for all positions; the previous formulation computed it
    inside every step (the base class's loop over `forward`): same logits, same gradients."""
    model = make_model(type="rnn-bahdanau", cell=cell, dropout=0.0).train()
    src, src_mask, tgt_in = padded_batch()

    def logits_and_grads(teacher_forced: object) -> tuple[Tensor, list[Tensor]]:
        model.zero_grad()
        memory = model.encode(src, src_mask)
        embedded = model.tgt_embedding(tgt_in)
        outputs, _ = teacher_forced(model.decoder, embedded, memory, model.init_state(memory, tgt_in.size(1)))
        logits = model.logits(outputs)
        F.cross_entropy(logits.flatten(0, 1), tgt_in.roll(-1, 1).flatten(), ignore_index=PAD).backward()
        return logits.detach(), [p.grad.clone() for p in model.parameters()]

    logits, grads = logits_and_grads(type(model.decoder).teacher_forced)
    step_logits, step_grads = logits_and_grads(Decoder.teacher_forced)
    torch.testing.assert_close(logits, step_logits)
    for grad, step_grad in zip(grads, step_grads, strict=True):
        torch.testing.assert_close(grad, step_grad)
