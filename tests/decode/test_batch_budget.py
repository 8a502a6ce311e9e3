"""One batching unit for every search and teacher-forced pass, `search.batch_tokens` (nmt/data/batching.py
`search_cost`: sentences × (longest source + eos) × beam): batched outputs equal each sentence's alone under a
budget that makes many small batches and under one that makes one batch, batches go longest first within the
budget, and a sentence over the budget is searched alone, as the server's batcher decodes it."""

from pathlib import Path

import pytest
import torch

from nmt.data.batching import search_cost
from nmt.decode.aligner import teacher_forced
from nmt.decode.search import Hypothesis
from nmt.decode.trained_run import load_run
from nmt.decode.translator import TorchTranslator
from nmt.limits import MAX_SIZE

BEAM = 3
SMALL = 2 * 8 * BEAM  # two to four sentences of the test split (3 to 7 subwords) a batch at beam 3
BUDGETS = pytest.mark.parametrize("budget", [SMALL, MAX_SIZE], ids=["many-small-batches", "one-batch"])


@pytest.fixture(scope="module")
def translator(trained_run: Path) -> TorchTranslator:
    run = load_run(trained_run, torch.device("cpu"))
    return TorchTranslator.of_run(run).with_search(beam_size=BEAM, nbest=2)


@pytest.fixture(scope="module")
def pairs(corpus: Path) -> tuple[list[str], list[str]]:
    return tuple((corpus / f"test.{side}").read_text().splitlines()[:24] for side in ("src", "tgt"))  # type: ignore[return-value]


def assert_same(found: list[list[Hypothesis]], expected: list[list[Hypothesis]]) -> None:
    """The same hypotheses: tokens, and scores and attention to rounding (other batches pad otherwise)."""
    assert [[h.tokens for h in hyps] for hyps in found] == [[h.tokens for h in hyps] for hyps in expected]
    scores = [h.score for hyps in found for h in hyps]
    assert scores == pytest.approx([h.score for hyps in expected for h in hyps], abs=1e-4)
    for hyps, others in zip(found, expected, strict=True):
        for h, other in zip(hyps, others, strict=True):
            if h.attention is not None:
                torch.testing.assert_close(h.attention, other.attention, rtol=1e-4, atol=1e-5)


@BUDGETS
def test_batched_translations_equal_each_sentence_alone(
    translator: TorchTranslator,
    pairs: tuple[list[str], list[str]],
    budget: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Beam search and the teacher-forced attention of its n-best lists, batched within `budget`."""
    batched = translator.with_search(batch_tokens=budget)
    sources = batched.encode(pairs[0])
    alone = [translator.search([source], attention=True)[0] for source in sources]
    batches: list[list[int]] = []  # the source lengths of each batch searched
    search_batch = batched.search_batch

    def recorded(batch: list[list[int]], *args: object) -> list[list[Hypothesis]]:
        batches.append([len(source) for source in batch])
        return search_batch(batch, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(batched, "search_batch", recorded)
    assert_same(batched.search(sources, attention=True), alone)
    lengths = [length for batch in batches for length in batch]
    assert lengths == sorted(map(len, sources), reverse=True)  # longest first, each sentence once
    if budget == SMALL:
        assert len(batches) >= 6
        assert all(search_cost(len(b), max(b), BEAM) <= budget for b in batches if len(b) > 1)
        assert any(len(b) > 1 for b in batches)
    else:
        assert len(batches) == 1


def test_a_sentence_over_the_budget_is_translated_alone(translator: TorchTranslator, pairs: tuple) -> None:
    """A budget smaller than any sentence: each is a batch of its own (the server's batcher decodes such a
    line alone too), translated as it is alone."""
    sources = translator.encode(pairs[0][:6])
    sizes: list[int] = []
    found = translator.search(sources, progress=sizes.append, batch_tokens=1)
    assert sizes == [1] * 6
    assert_same(found, [translator.search([source])[0] for source in sources])


@BUDGETS
def test_teacher_forced_pairs_in_batches_equal_each_pair_alone(
    translator: TorchTranslator, pairs: tuple[list[str], list[str]], budget: int
) -> None:
    """`nmt align`'s teacher-forced attention (nmt/align/forced_attention.py `forced_pairs`), batched within
    `budget`, a pair counting its source and target at width 1."""
    src, tgt = (
        [w.ids for w in translator.encode_words(lines, side)]
        for lines, side in zip(pairs, ("source", "target"), strict=True)
    )
    sizes: list[int] = []
    batched = teacher_forced(translator.with_search(batch_tokens=budget), src, tgt, sizes.append)
    alone = [teacher_forced(translator, [s], [t])[0] for s, t in zip(src, tgt, strict=True)]
    for found, expected in zip(batched, alone, strict=True):
        torch.testing.assert_close(found, expected, rtol=1e-4, atol=1e-5)
    assert sum(sizes) == len(src)
    assert len(sizes) >= 4 if budget == SMALL else sizes == [len(src)]
