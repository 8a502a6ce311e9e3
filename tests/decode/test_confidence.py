"""How far to trust a translation (nmt/decode/confidence.py): the mean log-probability per token that both
engines return (the search's score with its length penalty undone, equal to the model's own log-probability
of the output, computed here by a teacher-forced pass or CTranslate2's `score_batch`), and the signs that
flag an output as suspect."""

import dataclasses
from pathlib import Path

import pytest
import torch

from nmt.data.batching import collate
from nmt.data.special_tokens import PAD
from nmt.decode.confidence import LONG_RATIO, longest_repeat, mean_log_prob, suspicions
from nmt.decode.exported import load_export
from nmt.decode.search import length_penalty
from nmt.decode.trained_run import load_run
from nmt.decode.translator import TorchTranslator
from tests.conftest import run_cli


def test_the_longest_repeat_counts_an_n_gram_following_itself() -> None:
    assert longest_repeat([]) == longest_repeat([1, 2, 3]) == 1
    assert longest_repeat([7, 7, 7, 7]) == 4  # "salad salad salad salad"
    assert longest_repeat([1, 5, 6, 5, 6, 5, 6, 2]) == 3  # "cada vez cada vez cada vez"
    assert longest_repeat([5, 6, 5, 6, 5]) == 2  # the third "5 6" is cut short
    assert longest_repeat([1, 2, 3, 4, 5, 6, 7] * 3) == 1  # an n-gram longer than 6 is not counted
    assert longest_repeat([1, 2, 3, 4, 5, 6] * 3) == 3


def test_a_loop_is_suspect_whatever_the_source() -> None:
    assert suspicions([4, 5, 6], [8, 9, 9, 9, 10]) == ["loop"]
    assert suspicions([4, 4, 4, 5], [9, 9, 9, 10]) == ["loop"]  # "Händen Händen Händen" → "her her her hands"
    assert suspicions([4, 5, 6], [8, 9, 9, 10]) == []  # twice is not a loop
    assert suspicions([4, 5, 6], [8, 9, 10] * 3) == ["loop"]


def test_an_output_far_longer_than_its_source_is_suspect() -> None:
    source = [4, 5]
    longest_allowed = int(LONG_RATIO * (len(source) + 1)) - 1
    assert suspicions(source, list(range(10, 10 + longest_allowed))) == []
    assert suspicions(source, list(range(10, 11 + longest_allowed))) == ["long"]


def test_coverage_is_judged_only_with_an_alignment_and_a_long_enough_source() -> None:
    source = list(range(10, 30))  # 20 subwords
    output = list(range(40, 45))
    assert suspicions(source, output) == []
    assert suspicions(source, output, [0, 0, 1, 1, None]) == ["uncovered"]  # 2 of 20 positions
    assert suspicions(source, output, [0, 3, 6, 9, 12]) == []  # 5 of 20: a quarter
    assert suspicions(source[:5], output[:2], [0, 0]) == []  # a short source: not judged


def test_the_mean_log_probability_undoes_the_penalty() -> None:
    assert mean_log_prob(-6.0, 2, 1.0) == -2.0
    assert mean_log_prob(-3.0, 2, length_penalty(3, 1.0)) == pytest.approx(-3.0 * (8 / 6) / 3)


def teacher_forced_means(
    translator: TorchTranslator, sources: list[list[int]], outputs: list[list[int]]
) -> list[float]:
    """The model's mean log-probability of each output and eos given its source, by a teacher-forced pass."""
    batch = collate(sources, outputs, range(len(sources)))
    with torch.inference_mode():
        logits = translator.model(batch.src, batch.src_mask, batch.tgt_in).logits  # (batch, tgt_len, vocab)
    picked = logits.log_softmax(dim=-1).gather(2, batch.tgt_out.unsqueeze(2)).squeeze(2)  # (batch, tgt_len)
    real = batch.tgt_out != PAD
    return ((picked * real).sum(dim=1) / real.sum(dim=1)).tolist()


@pytest.mark.parametrize("settings", [{"beam_size": 1}, {"beam_size": 3, "length_penalty": 0.6}])
def test_the_torch_engine_returns_the_model_s_mean_log_probability(
    trained_run: Path, corpus: Path, settings: dict[str, float]
) -> None:
    translator = TorchTranslator.of_run(load_run(trained_run, torch.device("cpu"))).with_search(**settings)
    texts = (corpus / "test.src").read_text().splitlines()[:8]
    translated = translator.translated([*texts, ""])
    assert translated[-1].best.mean_log_prob == 0.0  # a blank line: nothing searched
    outputs = [line.best.tokens for line in translated[:-1]]
    expected = teacher_forced_means(translator, translator.encode(texts), outputs)
    found = [line.best.mean_log_prob for line in translated[:-1]]
    assert found == pytest.approx(expected, abs=1e-4)


def test_the_ctranslate2_engine_returns_the_model_s_mean_log_probability(
    trained_run: Path, corpus: Path, tmp_path: Path
) -> None:
    """CTranslate2 divides its scores by (length + 1) ** alpha, in greedy search too: undone, they are its
    own log-probabilities of the output (`score_batch`, which computes them apart, to 1%), and the torch
    engine's."""
    assert run_cli("export", str(trained_run), str(tmp_path / "ct2"))[0] == 0
    texts = (corpus / "test.src").read_text().splitlines()[:8]
    torch_engine = TorchTranslator.of_run(load_run(trained_run, torch.device("cpu")))
    for settings in ({"beam_size": 1}, {"beam_size": 3, "length_penalty": 0.6}):
        exported = load_export(tmp_path / "ct2", "cpu").with_search(**settings)
        sources = exported.encode(texts)
        translated = exported.decode(sources, exported.search(sources))
        pieces = [exported.tokenizers.src.pieces(ids) for ids in sources]
        outputs = [line.best.pieces[:-1] for line in translated]  # without '</s>'
        scored = exported.translator.score_batch(pieces, outputs)
        expected = [sum(s.log_probs) / len(s.log_probs) for s in scored]  # its tokens and eos
        found = [line.best.mean_log_prob for line in translated]
        assert found == pytest.approx(expected, rel=1e-2)  # off by one token in the length: ~10%
        torch_means = teacher_forced_means(torch_engine, sources, [line.best.tokens for line in translated])
        assert found == pytest.approx(torch_means, rel=1e-2)


def test_suspicions_reach_every_translation_and_read_the_alignment(trained_run: Path) -> None:
    """The translator flags a decoded hypothesis from its source and output ids (and its alignment, where
    search returned one)."""
    translator = TorchTranslator.of_run(load_run(trained_run, torch.device("cpu")))
    sources = translator.encode(["nopaju kaju zufete giholo"])
    found = translator.search(sources, alignments=True)
    hypothesis = found[0][0]
    tokens = [*hypothesis.tokens, *[hypothesis.tokens[0]] * 6]
    looped = dataclasses.replace(hypothesis, tokens=tokens, alignment=[0] * len(tokens))
    (translated,) = translator.decode(sources, [[hypothesis, looped]])
    expected = suspicions(sources[0], hypothesis.tokens, hypothesis.alignment)
    assert translated.hypotheses[0].suspect == tuple(expected)
    assert "loop" in translated.hypotheses[1].suspect
