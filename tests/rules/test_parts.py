"""The search parts beyond beam search and sampling, each against the loop with random models: n-gram
blocking, a minimum length and diverse beam search; and how a search config derives from every part's
declarations and asks for them."""

import dataclasses
import math

import pytest
import torch

from nmt.config.sections import SearchConfig
from nmt.data.special_tokens import EOS
from nmt.decode.search import Hypothesis, SearchOptions, output_limits, score, search
from nmt.errors import ConfigError
from nmt.rules.beam import BeamSearch, Greedy
from nmt.rules.diverse_beam import DiverseBeamSearch
from nmt.rules.min_length import MinLength
from nmt.rules.no_repeat_ngram import NoRepeatNGram
from nmt.rules.registry import PARTS, processors_of, rule_of
from nmt.rules.target_vocabulary import TargetVocabulary
from tests.decode.test_search import A, B, ScriptedModel, random_model

LIMITS = {"max_len_a": 2.0, "max_len_b": 12}


def sources(count: int = 12) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(4)
    src = torch.randint(4, 12, (count, 6), generator=generator)
    return src, (src != 0).unsqueeze(1)


def outputs(found: list[list[Hypothesis]]) -> list[list[list[int]]]:
    return [[h.tokens for h in hyps] for hyps in found]


def ngrams(tokens: list[int], n: int) -> list[tuple[int, ...]]:
    return [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]


@pytest.mark.parametrize("kind", ["transformer", "rnn-bahdanau"])
@pytest.mark.parametrize(("n", "beam"), [(1, 1), (2, 1), (2, 4), (3, 4)])
def test_no_output_repeats_an_ngram(kind: str, n: int, beam: int) -> None:
    """A random model's outputs repeat tokens at every step; blocked, none holds an n-gram twice, and the
    blocking is what changed them (without it they repeat)."""
    model, (src, mask) = random_model(kind, 7), sources()
    rule = Greedy() if beam == 1 else BeamSearch(beam_size=beam)
    free = search(model, src, mask, rule, SearchOptions(nbest=beam, **LIMITS))
    options = SearchOptions(nbest=beam, processors=(NoRepeatNGram(no_repeat_ngram_size=n),), **LIMITS)
    blocked = search(model, src, mask, rule, options)
    assert any(len(set(ngrams(t, n))) < len(ngrams(t, n)) for hyps in outputs(free) for t in hyps)
    for hyps in outputs(blocked):
        for tokens in hyps:
            assert len(set(ngrams(tokens, n))) == len(ngrams(tokens, n)), tokens


def test_no_output_is_shorter_than_the_minimum_length() -> None:
    """Eos comes no sooner than the minimum length (the output limit still ends a search)."""
    model, (src, mask) = random_model("transformer", 3), sources()
    eos_first = model.decode_step
    model.decode_step = lambda *args: favour_eos(eos_first(*args))  # type: ignore[method-assign]
    found = outputs(search(model, src, mask, Greedy(), SearchOptions(**LIMITS)))
    assert all(hyps == [[]] for hyps in found)  # eos at once without the minimum
    options = SearchOptions(processors=(MinLength(min_length=4),), **LIMITS)
    assert all(len(hyps[0]) == 4 for hyps in outputs(search(model, src, mask, Greedy(), options)))


def favour_eos(step):  # type: ignore[no-untyped-def]
    step.log_probs[:, EOS] = 0.0
    return step


@pytest.mark.parametrize("kind", ["transformer", "rnn-bahdanau"])
def test_a_diverse_beam_of_one_group_is_beam_search(kind: str) -> None:
    model, (src, mask) = random_model(kind, 5), sources()
    options = SearchOptions(nbest=4, **LIMITS)
    beam = search(model, src, mask, BeamSearch(beam_size=4), options)
    diverse = search(model, src, mask, DiverseBeamSearch(beam_size=4, diverse_groups=1), options)
    assert outputs(diverse) == outputs(beam)
    assert [h.score for hyps in diverse for h in hyps] == pytest.approx(
        [h.score for hyps in beam for h in hyps]
    )


def test_diverse_groups_find_other_outputs_scored_as_beam_search_scores() -> None:
    """Two groups with a strong diversity penalty: each sentence's n-best list holds more distinct first
    tokens than beam search's, and every score is the hypothesis' own length-normalised log-probability
    (the penalty only ranks)."""
    model, (src, mask) = random_model("transformer", 5), sources()
    options = SearchOptions(nbest=4, **LIMITS)
    beam = search(model, src, mask, BeamSearch(beam_size=4), options)
    rule = DiverseBeamSearch(beam_size=4, diverse_groups=2, diversity_strength=5.0)
    diverse = search(model, src, mask, rule, options)

    def firsts(found: list[list[Hypothesis]]) -> int:
        return sum(len({tuple(h.tokens[:1]) for h in hyps}) for hyps in found)

    assert firsts(diverse) > firsts(beam)
    limits = output_limits(mask, LIMITS["max_len_a"], LIMITS["max_len_b"]).tolist()
    for sentence, hyps in enumerate(diverse):
        for hyp in hyps:
            at_limit = len(hyp.tokens) == limits[sentence]
            forced = forced_score(model, src[sentence : sentence + 1], hyp.tokens, at_limit)
            assert hyp.score == pytest.approx(forced, abs=1e-4)


C, D = 6, 7
# group 0 finishes at every step; group 1, kept off group 0's tokens, finishes later
GROUPS_SCRIPT = {
    (): {A: 0.5, B: 0.3, C: 0.2},
    (A,): {EOS: 0.6, D: 0.4},
    (A, D): {EOS: 0.6, D: 0.4},
    (A, D, D): {EOS: 0.6, D: 0.4},
    (C,): {D: 0.9, EOS: 0.1},
    (C, D): {D: 0.9, EOS: 0.1},
}


def test_each_diverse_group_finishes_on_its_own_and_the_n_best_list_holds_each_group_s_best() -> None:
    """Group 0 ends `A` at step 1 and would end `A D` at step 2, before group 1 ends `C D D` at step 3: a
    sentence that stopped once two hypotheses of any group finished returned only group 0's. Each group's
    best: `A` (p 0.3), then `C D D` (0.2 × 0.9 × 0.9 = 0.162); scores are the hypotheses' own."""
    src = torch.tensor([[A, B, EOS]])
    rule = DiverseBeamSearch(beam_size=2, diverse_groups=2, diversity_strength=5.0, length_penalty=0.0)
    options = SearchOptions(nbest=2, max_len_a=2.0, max_len_b=5)
    (found,) = search(ScriptedModel(GROUPS_SCRIPT), src, (src != 0).unsqueeze(1), rule, options)
    assert [h.tokens for h in found] == [[A], [C, D, D]]
    assert [h.score for h in found] == pytest.approx([math.log(0.3), math.log(0.162)])


def forced_score(model, src, tokens, at_limit):  # type: ignore[no-untyped-def]
    """The length-normalised log-probability (alpha 1) of `tokens` and eos after `src`, step by step (an eos
    forced at the output limit adds nothing)."""
    with torch.inference_mode():
        memory = model.encode(src, (src != 0).unsqueeze(1))
        state = model.init_state(memory, len(tokens) + 2)
        total, last = 0.0, torch.tensor([2])
        for token in tokens if at_limit else [*tokens, EOS]:
            step = model.decode_step(last, memory, state)
            total += float(step.log_probs[0, token])  # banned tokens are never in a hypothesis
            state, last = step.state, torch.tensor([token])
    return score(total, len(tokens), 1.0)


def test_a_search_config_takes_every_part_s_settings_and_asks_for_the_parts() -> None:
    names = {f.name for f in dataclasses.fields(SearchConfig)}
    assert {f.name for part in PARTS for f in part.settings()} <= names
    settings = SearchConfig(diverse_groups=2, beam_size=4, no_repeat_ngram_size=3, min_length=2)
    assert rule_of(settings) == DiverseBeamSearch(beam_size=4, diverse_groups=2)
    found = (NoRepeatNGram(no_repeat_ngram_size=3), MinLength(min_length=2), TargetVocabulary())
    assert processors_of(settings) == found  # the translator binds or drops the vocabulary, by direction
    assert rule_of(SearchConfig(beam_size=1)) == Greedy()
    with pytest.raises(ConfigError, match=r"search.no_repeat_ngram_size=-1 must be 0 \(off\) or positive"):
        SearchConfig(no_repeat_ngram_size=-1)
    with pytest.raises(ConfigError, match=r"search.beam_size=5 is not a multiple of search.diverse_groups=2"):
        SearchConfig(diverse_groups=2)
