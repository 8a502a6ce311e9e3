"""The decoding contract every model fulfils for search: hypotheses of one sentence share its memory, beam
search moves them with `reorder_state`, finished sentences leave with `select_sentences`, and a step of the
moved state gives what a teacher-forced pass over each hypothesis' own tokens gives."""

import pytest
import torch
from torch import Tensor

from nmt.data.special_tokens import BOS, EOS, PAD
from nmt.models.base import Seq2Seq
from nmt.models.build import build_model
from nmt.models.config import ModelConfig, RNNConfig, TransformerConfig

VOCAB = 15


def random_model(kind: str, cell: str = "gru") -> Seq2Seq:
    torch.manual_seed(3)
    family = (
        {"transformer": TransformerConfig(d_model=16, heads=2, ff_dim=32)}
        if kind == "transformer"
        else {"rnn": RNNConfig(embedding_size=8, hidden_size=6, cell=cell)}
    )
    cfg = ModelConfig(type=kind, encoder_layers=2, decoder_layers=2, dropout=0.0, **family)
    return build_model(cfg, VOCAB, VOCAB, joint_vocab=True, pad=PAD).eval()


def sources() -> tuple[Tensor, Tensor]:
    src = torch.tensor([[4, 5, 6, 7, EOS], [8, 9, EOS, PAD, PAD], [10, EOS, PAD, PAD, PAD]])
    return src, (src != PAD).unsqueeze(1)


def forced_log_probs(model: Seq2Seq, src: Tensor, mask: Tensor, histories: Tensor) -> Tensor:
    """The next-token log-probabilities after each history (rows, length), whose sentence is row // k."""
    k = histories.size(0) // src.size(0)
    sentence = torch.arange(histories.size(0)) // k
    return model(src[sentence], mask[sentence], histories).logits[:, -1].log_softmax(-1)


MODELS = [("transformer", "gru"), ("rnn-bahdanau", "gru"), ("rnn-luong", "lstm")]


@pytest.mark.parametrize(("kind", "cell"), MODELS)
def test_reordered_hypotheses_decode_as_their_parents_continued(kind: str, cell: str) -> None:
    model, (src, mask), k = random_model(kind, cell), sources(), 3
    tokens = torch.randint(4, VOCAB, (4, 3 * k))  # four steps of tokens for every hypothesis
    parents = torch.tensor([2, 0, 0, 4, 4, 3, 8, 6, 7])  # within each sentence's rows
    with torch.no_grad():
        memory = model.encode(src, mask)
        state = model.init_state(memory, 6, k)
        histories = torch.full((3 * k, 1), BOS)
        for t, step_tokens in enumerate([histories[:, 0], *tokens[:3]]):
            step = model.decode_step(step_tokens, memory, state)
            histories = torch.cat([histories, step_tokens.unsqueeze(1)], dim=1) if t else histories
            expected = forced_log_probs(model, src, mask, histories)
            torch.testing.assert_close(step.log_probs, expected, atol=1e-5, rtol=0)
            state = model.reorder_state(step.state, parents) if t == 1 else step.state
            histories = histories[parents] if t == 1 else histories


@pytest.mark.parametrize(("kind", "cell"), MODELS)
def test_sentences_that_leave_take_their_hypotheses_along(kind: str, cell: str) -> None:
    model, (src, mask), k = random_model(kind, cell), sources(), 2
    kept, rows = torch.tensor([0, 2]), torch.tensor([0, 1, 4, 5])
    tokens = torch.randint(4, VOCAB, (2, 3 * k))
    with torch.no_grad():
        memory = model.encode(src, mask)
        step = model.decode_step(torch.full((3 * k,), BOS), memory, model.init_state(memory, 4, k))
        everyone = model.decode_step(tokens[0], memory, step.state).log_probs
        memory = model.encode(src, mask)  # the first call wrote into the state: start again
        step = model.decode_step(torch.full((3 * k,), BOS), memory, model.init_state(memory, 4, k))
        memory, state = model.select_sentences(memory, step.state, kept)
        survivors = model.decode_step(tokens[0, rows], memory, state).log_probs
    torch.testing.assert_close(survivors, everyone[rows], atol=1e-5, rtol=0)
