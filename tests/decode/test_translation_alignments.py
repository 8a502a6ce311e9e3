"""A translation's word alignment reads the run's alignment attention: for a plain run its penultimate decoder
layer's mean of heads by argmax (search's own where that is the last layer: an RNN's, a one-layer decoder's),
and for a guided run the attention guided alignment supervised, by the rule and null slot it trained — the
same on both engines (the CTranslate2 export returns that attention)."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from nmt.align.attention import attended_subwords, most_attended
from nmt.align.forced_attention import teacher_forced_attention
from nmt.align.reading import Reading, translation_reading
from nmt.config.yaml_file import load_config
from nmt.decode.search import Hypothesis
from nmt.decode.trained_run import load_run
from nmt.decode.translator import TorchTranslator
from tests.conftest import run_cli
from tests.ties import assert_equal_but_for_ties

GUIDED_READING = Reading(0, (0, 1), "shift", null=True)  # what the run below trains: layer 0, 2 heads


def test_each_token_links_its_most_attended_source_subword_or_the_null_slot_by_hand() -> None:
    # rows: 3 target subwords × (3 source subwords + eos); the eos column is never a link
    rows = np.array([[0.5, 0.2, 0.1, 0.2], [0.1, 0.2, 0.3, 0.4], [0.1, 0.1, 0.1, 0.7]], dtype=np.float32)
    assert most_attended(rows) == [0, 2, 0]  # the first of equal ones
    assert most_attended(rows, null=True) == [0, None, None]  # eos beats every source subword in rows 1, 2
    # a whole attention matrix: shift reads row t + 1; a skipped column (a language tag) is never a link
    weights = np.vstack([rows, [[0.2, 0.6, 0.1, 0.1]]])  # (3 + 1 rows, 3 + 1 columns)
    assert attended_subwords(weights, "argmax", False) == [0, 2, 0]
    assert attended_subwords(weights, "shift", False) == [2, 0, 1]
    assert attended_subwords(weights, "shift", True, np.array([False, True, False])) == [None, None, 0]


def test_a_run_aligns_translations_with_search_unless_guided_alignment_trained_other_attention(
    tiny: Path,
) -> None:
    two = ["model.decoder_layers=2", "model.transformer.heads=2", "train.alignment.links=train.links"]
    assert translation_reading(load_config(tiny, [])) is None  # one decoder layer: search's own
    assert translation_reading(load_config(tiny, ["model.type=rnn-luong", "model.transformer="])) is None
    plain = load_config(tiny, ["model.decoder_layers=3"])
    assert translation_reading(plain) == Reading(1, None)  # the penultimate layer, not the last
    assert translation_reading(load_config(tiny, [*two, "train.alignment.layer=-1"])) == Reading(1, (0,))
    every_head = [*two, "train.alignment.layer=1", "train.alignment.heads=2"]
    assert translation_reading(load_config(tiny, every_head)) is None  # search's own attention
    assert translation_reading(load_config(tiny, [*every_head, "train.alignment.shift=true"])) == Reading(
        1, (0, 1), "shift"
    )


def test_a_plain_runs_translations_align_with_its_penultimate_layer_not_its_last(
    trained_run: Path, corpus: Path
) -> None:
    """Measured (docs/alignment.md, benchmarks/alignment_reading.py): a Transformer trained without guided
    alignment aligns best with its penultimate decoder layer's mean of heads by argmax; its translations'
    links read it, after search, from a teacher-forced pass (they read the last layer's, search's own)."""
    run = load_run(trained_run, torch.device("cpu"))
    translator = TorchTranslator.of_run(run)
    assert run.cfg.model.decoder_layers == 2 and translator.reading == Reading(0, None)
    searching = translator.with_search(beam_size=3, nbest=3)
    sources = searching.encode((corpus / "test.src").read_text().splitlines()[:20])
    found = searching.search(sources, alignments=True)
    differ = 0
    for src, hyps in zip(sources, found, strict=True):
        forced = teacher_forced_attention(translator.model, [src] * len(hyps), [h.tokens for h in hyps])
        for hypothesis, paid in zip(hyps, forced, strict=True):
            first, last = (
                paid[layer].mean(dim=0)[: len(hypothesis.tokens), : len(src)].argmax(dim=1).tolist()
                for layer in (0, -1)
            )
            assert hypothesis.alignment == first
            differ += first != last
    assert differ > 0  # the layers align differently here: the test can tell them apart


def by_hand(paid: torch.Tensor, tokens: int, source: int) -> list[int | None]:
    """GUIDED_READING of a hypothesis' attention (layers, heads, tokens + 1, source + 1), worked out with
    torch: layer 0, the mean of heads 0 and 1, row t + 1 for token t, eos when it beats every source token."""
    rows = paid[0, :2].mean(dim=0)[1 : tokens + 1]  # (tokens, source + 1)
    best, eos = rows[:, :source].max(dim=1), rows[:, source]
    return [int(s) if w >= e else None for s, w, e in zip(best.indices, best.values, eos, strict=True)]


@pytest.mark.slow  # guided_run trains for these two alone: 8 s
def test_a_guided_runs_translations_align_with_the_attention_it_trained(
    guided_run: Path, labelled: Path
) -> None:
    translator = TorchTranslator.of_run(load_run(guided_run, torch.device("cpu")))
    assert translator.reading == GUIDED_READING
    searching = translator.with_search(beam_size=3, nbest=3)
    sources = searching.encode((labelled / "valid.src").read_text().splitlines()[:20])
    found = searching.search(sources, alignments=True)
    differ = 0
    for src, hyps in zip(sources, found, strict=True):
        forced = teacher_forced_attention(translator.model, [src] * len(hyps), [h.tokens for h in hyps])
        for hypothesis, paid in zip(hyps, forced, strict=True):
            assert hypothesis.alignment == by_hand(paid, len(hypothesis.tokens), len(src))
            searched = paid[-1].mean(dim=0)[: len(hypothesis.tokens), : len(src)].argmax(dim=1).tolist()
            differ += hypothesis.alignment != searched
    assert differ > 0  # the reading is not search's: the test can tell them apart


@pytest.mark.slow  # guided_run
def test_the_ctranslate2_export_aligns_as_the_guided_run(
    guided_run: Path, labelled: Path, tmp_path: Path
) -> None:
    """The export returns the supervised heads' attention and reads it by the run's rule and null slot: the
    same alignments as torch's but at near ties."""
    pytest.importorskip("ctranslate2")
    from nmt.decode.exported import META, load_export

    out = tmp_path / "ct2"
    code, _, err = run_cli("export", str(guided_run), str(out))
    assert code == 0, err
    meta = json.loads((out / META).read_text())
    assert meta["alignment"] == {"layer": 0, "heads": [0, 1], "rule": "shift", "null": True}
    exported = load_export(out, "cpu").with_search(beam_size=1, nbest=1)
    assert exported.reading == GUIDED_READING
    run = load_run(guided_run, torch.device("cpu"), meta["checkpoint"])
    translator = TorchTranslator.of_run(run).with_search(beam_size=1, nbest=1)
    sources = translator.encode((labelled / "valid.src").read_text().splitlines()[:40])
    ours: list[Hypothesis] = [hyps[0] for hyps in translator.search(sources, alignments=True)]
    theirs = [hyps[0] for hyps in exported.search(sources, alignments=True)]
    differ = assert_equal_but_for_ties(run.model, sources, ours, theirs, reading=GUIDED_READING)
    assert len(differ) < len(sources) // 2, differ
