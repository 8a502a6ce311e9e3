"""The Translator's steps on a trained run: encode is the one place text becomes ids, search cuts overlong
sources once and carries each hypothesis' alignment, decode labels attention rows and columns with the
subwords."""

from pathlib import Path

import pytest
import torch

from nmt.align.forced_attention import teacher_forced_attention
from nmt.decode.search import Hypothesis
from nmt.decode.trained_run import load_run
from nmt.decode.translator import TorchTranslator
from nmt.errors import ConfigError


@pytest.fixture(scope="module")
def translator(trained_run: Path) -> TorchTranslator:
    return TorchTranslator.of_run(load_run(trained_run, torch.device("cpu")))


def test_encode_normalises_then_splits_into_subwords(translator: TorchTranslator) -> None:
    spaced, plain = translator.encode(["  kalo\u00a0 mi\r", "kalo mi"])
    assert spaced == plain == translator.tokenizers.src.encode(["kalo mi"])[0]


def test_an_empty_output_of_a_sentence_has_the_eos_row_its_attention_has(translator: TorchTranslator) -> None:
    (ids,) = translator.encode(["a b"])
    weights = torch.full((1, 1, 1, len(ids) + 1), 1 / (len(ids) + 1))  # (layers, heads, eos row, src + eos)
    (line,) = translator.decode([ids], [[Hypothesis([], -1.0, weights)]])
    (found,) = line.hypotheses
    assert found.text == "" and found.pieces == ["</s>"]
    assert len(line.source_pieces) == weights.shape[-1]


def test_a_blank_line_has_no_subwords(translator: TorchTranslator) -> None:
    (line,) = translator.decode([[]], [[Hypothesis([], 0.0)]])
    assert line.source_pieces == [] and line.hypotheses[0].pieces == []


def test_an_overlong_source_is_cut_once_and_decoded_as_searched(
    translator: TorchTranslator, caplog: pytest.LogCaptureFixture
) -> None:
    short = translator.with_search(beam_size=1)
    short.max_source_len = 3
    (ids,) = short.encode(["kalo mi su te kalo mi su te"])
    found = short.search([ids])
    assert "1 source lines exceed 3 subwords and were truncated" in caplog.text
    assert found == short.search([ids[:3]])
    (line,) = short.decode([ids], found)
    assert len(line.source_pieces) == 3 + 1


def test_a_text_cut_for_its_heatmap_is_reported_once(
    translator: TorchTranslator, caplog: pytest.LogCaptureFixture
) -> None:
    short = translator.with_search(beam_size=1)
    short.max_source_len = 3
    (translated,) = short.translated(["kalo mi su te kalo mi su te"], attention=True)
    assert len(translated.source_pieces) == 3 + 1
    cut = [record for record in caplog.records if "subwords" in record.getMessage()]
    assert len(cut) == 1, caplog.text


def test_search_settings_are_given_for_the_call_as_keywords(translator: TorchTranslator) -> None:
    """As fairseq's `generate` and CTranslate2's `translate_batch` take them: the call's settings replace the
    translator's for that call alone, and a value out of range is the config's error."""
    sources = translator.encode(["kalo mi su", "te kalo"])
    two = translator.search(sources, beam_size=3, nbest=2)
    assert [len(hyps) for hyps in two] == [2, 2]
    assert two == translator.with_search(beam_size=3, nbest=2).search(sources)
    assert translator.settings.nbest == 1 and [len(h) for h in translator.search(sources)] == [1, 1]
    with pytest.raises(ConfigError, match="nbest"):
        translator.search(sources, nbest=0)


def test_attention_of_every_hypothesis_on_request(translator: TorchTranslator) -> None:
    """Every layer and head, rows the output pieces, columns the source pieces (both ending with '</s>')."""
    (translated,) = translator.with_search(beam_size=3, nbest=2).translated(["kalo mi su"], attention=True)
    assert len(translated.hypotheses) == 2
    for hypothesis in translated.hypotheses:
        assert hypothesis.attention is not None
        layers, heads, rows, columns = hypothesis.attention.shape
        assert (rows, columns) == (len(hypothesis.pieces), len(translated.source_pieces))
        torch.testing.assert_close(hypothesis.attention.sum(dim=-1), torch.ones(layers, heads, rows))


def test_alignments_follow_each_hypothesis_through_beam_search(
    translator: TorchTranslator, corpus: Path
) -> None:
    """The source position each token attended most, carried by search with its hypothesis through every
    reordering of the beam, is the argmax (eos left out) of the last layer's mean of heads in a teacher-forced
    pass over the finished hypothesis (search's own alignments: the translator's reading left out)."""
    searching = translator.with_search(beam_size=4, nbest=4)
    searching.reading = None  # the run's reads its penultimate layer after search
    sources = searching.encode((corpus / "test.src").read_text().splitlines()[:20])
    found = searching.search(sources, alignments=True)
    assert sum(len(hyps) for hyps in found) == 80
    for src, hyps in zip(sources, found, strict=True):
        forced = teacher_forced_attention(translator.model, [src] * len(hyps), [h.tokens for h in hyps])
        for hypothesis, weights in zip(hyps, forced, strict=True):
            paid = weights[-1].mean(dim=0)[: len(hypothesis.tokens), : len(src)]  # last layer, without eos
            assert hypothesis.alignment == paid.argmax(dim=1).tolist()
