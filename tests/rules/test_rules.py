"""Search rules: the beam rule's block-wise ranking equals a plain top-k, the config names the rule, and
sampling draws what its settings allow, the same draws for the same seed."""

import pytest
import torch

from nmt.config.sections import SearchConfig
from nmt.data.special_tokens import EOS
from nmt.decode.search import SearchOptions, search
from nmt.rules.beam import BLOCK, BeamSearch, Greedy
from nmt.rules.contract import StepView
from nmt.rules.registry import rule_of
from nmt.rules.sampling import Sampling
from tests.decode.test_search import random_batch, random_model, tokens


def first_step(rows: int, state: dict | None = None) -> StepView:
    """A first step's view of `rows` hypotheses (`state`: a part's own buffers)."""
    return StepView(torch.tensor(0), torch.full((rows, 4), EOS), 1, EOS, state or {})


@pytest.mark.parametrize("vocab", [7, BLOCK, 3 * BLOCK + 5, 1000])
@pytest.mark.parametrize("k", [1, 3, 5])
def test_beam_rule_ranks_as_a_plain_top_k(vocab: int, k: int) -> None:
    generator = torch.Generator().manual_seed(vocab * 10 + k)
    n = 4
    log_probs = torch.randn(n * k, vocab, generator=generator).log_softmax(dim=-1)
    scores = torch.randn(n, k, generator=generator)
    scores[0, 1:] = float("-inf")  # a sentence with one live hypothesis, as at the first step
    found = BeamSearch(beam_size=k).extend(log_probs, scores, first_step(n * k))
    width = min(2 * k, k * vocab)
    expected, index = (scores.unsqueeze(-1) + log_probs.view(n, k, vocab)).view(n, -1).topk(width, dim=1)
    torch.testing.assert_close(found.scores, expected)
    finite = expected.isfinite()  # the -inf ones tie: any order, any token of the vocabulary
    assert found.parents is not None and found.tokens.lt(vocab).all()
    assert torch.equal(found.parents[finite], (index // vocab)[finite])
    assert torch.equal(found.tokens[finite], (index % vocab)[finite])


def test_the_config_names_the_rule() -> None:
    assert rule_of(SearchConfig(beam_size=1)) == Greedy(length_penalty=1.0)
    assert rule_of(SearchConfig(beam_size=4, length_penalty=0.2)) == BeamSearch(
        beam_size=4, length_penalty=0.2
    )
    sampled = rule_of(SearchConfig(sampling=True, nbest=3, top_k=5, seed=9))
    assert isinstance(sampled, Sampling) and (sampled.width, sampled.top_k, sampled.seed) == (3, 5, 9)


def sample(rule: Sampling, kind: str = "transformer", seed: int = 11) -> list[list[list[int]]]:
    model, (src, mask) = random_model(kind, seed), random_batch(seed)
    options = SearchOptions(nbest=rule.width, max_len_a=1.5, max_len_b=4)
    return [[h.tokens for h in hyps] for hyps in search(model, src, mask, rule, options)]


@pytest.mark.parametrize("kind", ["transformer", "rnn-bahdanau"])
def test_the_same_seed_draws_the_same_samples(kind: str) -> None:
    drawn = sample(Sampling(samples=4, seed=3), kind)
    assert drawn == sample(Sampling(samples=4, seed=3), kind)
    assert drawn != sample(Sampling(samples=4, seed=4), kind)
    assert all(len(hyps) == 4 for hyps in drawn)  # nbest = the samples drawn, each of them finished


def test_the_most_probable_token_alone_is_greedy() -> None:
    model, (src, mask) = random_model("transformer", 12), random_batch(12)
    options = SearchOptions(max_len_a=1.5, max_len_b=4)
    greedy = tokens(search(model, src, mask, Greedy(), options))
    for narrow in (
        Sampling(top_k=1, seed=5),
        Sampling(top_p=1e-6, seed=5),
        Sampling(top_p=1e-100, seed=5),  # 0 in float32: the most probable token must still stay
        Sampling(temperature=1e-4, seed=5),
    ):
        assert tokens(search(model, src, mask, narrow, options)) == greedy


def test_top_k_and_top_p_keep_the_most_probable_tokens() -> None:
    log_probs = torch.tensor([[0.5, 0.3, 0.15, 0.05]]).log()
    kept = Sampling(top_k=2).filtered(log_probs).isfinite()
    assert kept.tolist() == [[True, True, False, False]]
    kept = Sampling(top_p=0.7).filtered(log_probs).isfinite()  # 0.5 falls short of 0.7; 0.5 + 0.3 reaches it
    assert kept.tolist() == [[True, True, False, False]]
    kept = Sampling(top_p=0.96).filtered(log_probs).isfinite()
    assert kept.tolist() == [[True, True, True, True]]
    kept = Sampling(top_p=1e-100).filtered(log_probs).isfinite()  # below float32's smallest number
    assert kept.tolist() == [[True, False, False, False]]


def test_samples_follow_the_distribution() -> None:
    """Two tokens of probability 0.8 and 0.2 (eos): about 80% of 2,000 one-token draws take the first."""
    log_probs = torch.full((2000, 6), float("-inf"))
    log_probs[:, 4], log_probs[:, EOS] = torch.tensor(0.8).log(), torch.tensor(0.2).log()
    rule = Sampling(samples=2000, seed=1)
    state = rule.buffers(torch.tensor([[5, 6, EOS]]), 2000)
    found = rule.extend(log_probs, torch.zeros(1, 2000), first_step(2000, state))
    share = found.tokens.eq(4).float().mean().item()
    assert 0.75 < share < 0.85  # binomial standard deviation ~0.009
    assert found.parents is None  # every sample continues its own row
