"""Lexically constrained beam search (nmt/rules/constrained.py) on random models: every term appears, a term
given twice appears twice, eos waits for the terms until the length limit (then the best hypothesis comes
back, met or not, as fairseq's does), a beam of 1 is greedy search under the rule (checked against a plain
loop written here), no terms rank as beam search, and a batch gives each sentence what it gets alone."""

from __future__ import annotations

import pytest
import torch
from torch import Tensor

from nmt.data.special_tokens import BOS, EOS, PAD
from nmt.decode.search import Hypothesis, SearchOptions, output_limits, search
from nmt.models.base import Seq2Seq
from nmt.rules.beam import BeamSearch
from nmt.rules.constrained import ConstrainedBeamSearch, Terms, unmet
from tests.decode.test_captured_search import Ending
from tests.decode.test_search import random_batch, random_model

OPTIONS = SearchOptions(max_len_a=1.5, max_len_b=6, nbest=1)
TERMS: tuple[Terms, ...] = (  # one sentence's terms each, for random_batch's six sentences
    ((7,),),
    ((5, 9), (11,)),
    (),
    ((8, 8, 6),),
    ((10,), (10,)),  # the same term twice: it must appear twice
    ((4, 6), (6, 4), (9,)),
)


def constrained(beam: int, terms: tuple[Terms, ...] = TERMS) -> ConstrainedBeamSearch:
    return ConstrainedBeamSearch(beam_size=beam, length_penalty=1.0, terms=terms)


def outputs(found: list[list[Hypothesis]]) -> list[list[int]]:
    return [hyps[0].tokens for hyps in found]


def test_unmet_counts_each_appearance() -> None:
    assert unmet([4, 5, 6, 5, 6], ((5, 6), (5, 6), (6, 4))) == [2]
    assert unmet([4, 5, 6], ((5, 6), (5, 6))) == [1]
    assert unmet([], ((5,),)) == [0]
    assert unmet([7, 7, 7], ((7, 7),)) == []  # overlapping appearances count, as search counts them


@pytest.mark.parametrize("kind", ["transformer", "rnn-luong"])
@pytest.mark.parametrize("beam", [1, 4])
def test_every_term_appears(kind: str, beam: int) -> None:
    """Outputs that would end after 2 to 6 tokens hold their terms instead."""
    model, (src, mask) = Ending(random_model(kind, 3), longest=6), random_batch(3)
    found = outputs(search(model, src, mask, constrained(beam), OPTIONS))
    limits = output_limits(mask, OPTIONS.max_len_a, OPTIONS.max_len_b).tolist()
    assert all(len(out) <= limit for out, limit in zip(found, limits, strict=True))
    assert [unmet(out, terms) for out, terms in zip(found, TERMS, strict=True)] == [[]] * len(TERMS)
    assert found[4].count(10) >= 2


def test_the_length_limit_ends_a_search_with_terms_unmet() -> None:
    """Three terms of four subwords cannot fit in the limit: the best hypothesis still comes back."""
    model, (src, mask) = random_model("transformer", 4), random_batch(4)
    terms = ((4, 5, 6, 7), (8, 9, 10, 11), (5, 5, 5, 5))
    options = SearchOptions(max_len_a=0.0, max_len_b=6)
    found = search(model, src[:1], mask[:1], constrained(3, (terms,)), options)
    assert len(found[0]) == 1 and len(found[0][0].tokens) == 6
    assert unmet(found[0][0].tokens, terms)


@pytest.mark.parametrize("beam", [2, 3])
def test_no_terms_rank_as_beam_search(beam: int) -> None:
    model, (src, mask) = random_model("transformer", 5), random_batch(5)
    options = SearchOptions(max_len_a=1.5, max_len_b=6, nbest=beam)
    plain = search(model, src, mask, BeamSearch(beam_size=beam), options)
    none = search(model, src, mask, constrained(beam, ((),) * 6), options)
    assert [[h.tokens for h in hyps] for hyps in none] == [[h.tokens for h in hyps] for hyps in plain]
    assert [[h.score for h in hyps] for hyps in none] == [[h.score for h in hyps] for hyps in plain]


@pytest.mark.parametrize("beam", [1, 3])
def test_a_batch_gives_each_sentence_what_it_gets_alone(beam: int) -> None:
    model, (src, mask) = random_model("transformer", 6), random_batch(6)
    batched = outputs(search(model, src, mask, constrained(beam), OPTIONS))
    alone = [
        outputs(search(model, src[i : i + 1], mask[i : i + 1], constrained(beam, (TERMS[i],)), OPTIONS))[0]
        for i in range(len(TERMS))
    ]
    assert batched == alone


def greedy_constrained(model: Seq2Seq, src: Tensor, mask: Tensor, terms: Terms, limit: int) -> list[int]:
    """Constrained search of width 1 written as a plain loop: of the best token and the token that continues
    (or starts) each unmet term, the one that leaves the most term subwords produced (then the likelier)."""
    memory = model.encode(src, mask)
    state = model.init_state(memory, limit + 1)
    output: list[int] = []
    last = torch.tensor([BOS])
    for _ in range(limit):
        step = model.decode_step(last, memory, state)
        state, log_probs = step.state, step.log_probs[0].clone()
        log_probs[[PAD, BOS]] = float("-inf")
        if unmet(output, terms):
            log_probs[EOS] = float("-inf")
        choices = {int(log_probs.argmax())} | {continuation(output, terms[i]) for i in unmet(output, terms)}
        token = max(choices, key=lambda t: (produced([*output, t], terms), float(log_probs[t])))
        if token == EOS:
            return output
        output.append(token)
        last = torch.tensor([token])
    return output


def continuation(output: list[int], term: tuple[int, ...]) -> int:
    """The token after the longest prefix of `term` that `output` ends with (its first where none)."""
    return term[max(p for p in range(len(term)) if p == 0 or tuple(output[-p:]) == term[:p])]


def produced(output: list[int], terms: Terms) -> int:
    """Term subwords produced: those of the terms met, and the longest prefix of an unmet one it ends with."""
    missing = unmet(output, terms)
    done = sum(len(term) for i, term in enumerate(terms) if i not in missing)
    partial = [p for i in missing for p in range(1, len(terms[i])) if tuple(output[-p:]) == terms[i][:p]]
    return done + max(partial, default=0)


@pytest.mark.parametrize("seed", [3, 7])
def test_a_beam_of_one_is_greedy_constrained_search(seed: int) -> None:
    model, (src, mask) = random_model("transformer", seed), random_batch(seed)
    limits = output_limits(mask, OPTIONS.max_len_a, OPTIONS.max_len_b).tolist()
    distinct = tuple(tuple(dict.fromkeys(terms)) for terms in TERMS)  # the loop counts each term once
    found = outputs(search(model, src, mask, constrained(1, distinct), OPTIONS))
    with torch.inference_mode():
        expected = [
            greedy_constrained(model, src[i : i + 1], mask[i : i + 1], distinct[i], limits[i])
            for i in range(len(TERMS))
        ]
    assert found == expected
