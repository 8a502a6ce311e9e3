"""Greedy and beam search against a scripted model whose best answers are worked out by hand."""

import math

import pytest
import torch
from torch import Tensor

from nmt.config import ModelConfig
from nmt.data.tokenizer import EOS
from nmt.models.base import Memory, Seq2Seq, State, Step
from nmt.models.transformer import TransformerSeq2Seq
from nmt.search import beam_search, greedy, length_penalty, output_limits

A, B = 4, 5
# next-token probabilities after each prefix; anything unlisted ends with eos
SCRIPT = {
    (): {A: 0.6, B: 0.4},
    (A,): {A: 0.4, B: 0.3, EOS: 0.3},
    (B,): {EOS: 0.9, A: 0.1},
    (A, A): {EOS: 1.0},
}


class ScriptedModel(Seq2Seq):
    """Log-probabilities come from SCRIPT; the state carries the tokens fed so far (bos first)."""

    def encode(self, src: Tensor, src_mask: Tensor) -> Memory:
        return {"src_mask": src_mask}

    def init_state(self, memory: Memory) -> State:
        return {"fed": torch.zeros(memory["src_mask"].size(0), 0, dtype=torch.long)}

    def decode_step(self, tokens: Tensor, memory: Memory, state: State) -> Step:
        fed = torch.cat([state["fed"], tokens.unsqueeze(1)], dim=1)  # (batch, steps)
        log_probs = torch.full((tokens.size(0), 8), float("-inf"))
        for row, seq in enumerate(fed.tolist()):
            for token, p in SCRIPT.get(tuple(seq[1:]), {EOS: 1.0}).items():
                log_probs[row, token] = math.log(p)
        return Step(log_probs, {"fed": fed})


def one_sentence() -> tuple[Tensor, Tensor]:
    src = torch.tensor([[6, 7, EOS]])
    return src, src != 0


def test_greedy_follows_the_locally_best_token() -> None:
    src, mask = one_sentence()
    assert greedy(ScriptedModel(), src, mask.unsqueeze(1), 2.0, 5) == [[A, A]]  # p = 0.6 * 0.4 * 1.0 = 0.24


def test_beam_search_finds_the_better_hypothesis() -> None:
    src, mask = one_sentence()
    assert beam_search(ScriptedModel(), src, mask.unsqueeze(1), 2, 0.0, 2.0, 5) == [
        [B]
    ]  # p = 0.4 * 0.9 = 0.36


def test_beam_one_equals_greedy_on_the_script() -> None:
    src, mask = one_sentence()
    assert beam_search(ScriptedModel(), src, mask.unsqueeze(1), 1, 1.0, 2.0, 5) == [[A, A]]


def random_transformer(seed: int) -> TransformerSeq2Seq:
    torch.manual_seed(seed)
    cfg = ModelConfig(d_model=16, heads=2, ff_dim=32, encoder_layers=1, decoder_layers=2, dropout=0.0)
    return TransformerSeq2Seq(cfg, 12, 12, joint_vocab=True).eval()


def random_batch(seed: int) -> tuple[Tensor, Tensor]:
    generator = torch.Generator().manual_seed(seed)
    src = torch.randint(4, 12, (6, 7), generator=generator)
    src[2, 4:] = 0
    src[4, 2:] = 0
    return src, (src != 0).unsqueeze(1)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_beam_one_equals_greedy_on_random_models(seed: int) -> None:
    model, (src, mask) = random_transformer(seed), random_batch(seed)
    assert beam_search(model, src, mask, 1, 1.0, 1.5, 3) == greedy(model, src, mask, 1.5, 3)


@pytest.mark.parametrize("beam", [2, 4])
def test_batched_beam_search_equals_one_sentence_at_a_time(beam: int) -> None:
    """Sentences finishing early leave the batch; that must not change anyone's result."""
    model, (src, mask) = random_transformer(3), random_batch(3)
    batched = beam_search(model, src, mask, beam, 1.0, 1.5, 3)
    alone = [
        beam_search(model, src[i : i + 1], mask[i : i + 1], beam, 1.0, 1.5, 3)[0] for i in range(src.size(0))
    ]
    assert batched == alone


def test_outputs_respect_the_length_limit() -> None:
    model, (src, mask) = random_transformer(4), random_batch(4)
    limits = output_limits(mask, 0.5, 1).tolist()
    for hyps in (greedy(model, src, mask, 0.5, 1), beam_search(model, src, mask, 3, 1.0, 0.5, 1)):
        assert all(len(h) <= limit for h, limit in zip(hyps, limits, strict=True))
        assert all(EOS not in h for h in hyps)


def test_length_penalty_is_gnmt() -> None:
    assert length_penalty(1, 0.0) == 1.0
    assert length_penalty(7, 1.0) == pytest.approx(2.0)
