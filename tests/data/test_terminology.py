"""Trained annotation: the terms a word-aligned pair offers, their annotation (deterministic per seed and
line), the markers as whole pieces of the trained vocabulary, and the annotated training split (cached)."""

from __future__ import annotations

import random
import shutil
import unicodedata
from pathlib import Path

import pytest

from nmt.align.eflomal import PROGRAM
from nmt.config.terminology import TerminologyConfig
from nmt.data.corpus import Pairs
from nmt.data.glossary import TermFinder, parse_glossary
from nmt.data.terminology import (
    Annotation,
    annotate,
    annotate_pair,
    annotated_chunks,
    candidate_terms,
    glossary_annotations,
)
from nmt.errors import ConfigError, UserError
from tests.conftest import ROOT, prepared

MARKERS = ("｟term｠", "｟trans｠", "｟/term｠")
SRC, TGT = "Der Mann fährt heute nach Berlin.", "The man drives to Berlin today ."
LINKS = [(0, 0), (1, 1), (2, 2), (3, 5), (4, 3), (5, 4), (5, 6)]


def test_candidates_are_contiguous_linked_groups_without_edge_punctuation() -> None:
    found = [(SRC[a.start : a.end], a.target) for a in candidate_terms(SRC, TGT, LINKS, max_words=3)]
    # "Berlin." links "Berlin" and "." around "today": its target words are not contiguous, so no term
    assert found == [("Der", "The"), ("Mann", "man"), ("fährt", "drives"), ("heute", "today"), ("nach", "to")]
    links = [*LINKS[:-1]]  # without the link to ".": "Berlin." is "Berlin", its period outside the markers
    assert (SRC[26:32], "Berlin") in [
        (SRC[a.start : a.end], a.target) for a in candidate_terms(SRC, TGT, links, 3)
    ]


def test_a_group_over_max_words_or_with_a_gap_is_no_term() -> None:
    links = [(0, 0), (0, 2), (1, 1)]  # word 0 links target words 0 and 2, around word 1's link
    assert [a.target for a in candidate_terms("a b", "x y z", links, max_words=3)] == ["y"]
    crossed = [(0, 1), (1, 0), (1, 1)]  # one group of both words on each side
    assert [a.target for a in candidate_terms("a c", "x z", crossed, max_words=2)] == ["x z"]
    assert candidate_terms("a c", "x z", crossed, max_words=1) == []


def test_annotation_writes_each_term_then_its_translation_between_the_markers() -> None:
    text = "wir fahren nach Berlin, heute"
    annotations = [Annotation(16, 22, "Berlín"), Annotation(0, 3, "we")]
    assert annotate(text, annotations, MARKERS) == (
        "｟term｠ wir ｟trans｠ we ｟/term｠ fahren nach ｟term｠ Berlin ｟trans｠ Berlín ｟/term｠, heute"
    )
    assert annotate(text, [], MARKERS) == text


def test_a_glossary_annotates_every_occurrence_and_an_empty_one_nothing() -> None:
    terms = TermFinder(
        parse_glossary(["Berlin\tBerlín"], "g.tsv"), lambda w: unicodedata.normalize("NFKC", w)
    )
    text = "Berlin und berlin"
    assert annotate(text, glossary_annotations(text, terms), MARKERS) == (
        "｟term｠ Berlin ｟trans｠ Berlín ｟/term｠ und ｟term｠ berlin ｟trans｠ Berlín ｟/term｠"
    )
    empty = TermFinder([], str)
    assert annotate(text, glossary_annotations(text, empty), MARKERS) == text


def test_pair_annotation_is_deterministic_per_seed_and_respects_probability_and_max_terms() -> None:
    cfg = TerminologyConfig(probability=1.0, max_terms=2)
    draws = {annotate_pair(SRC, TGT, LINKS, cfg, random.Random(f"7 de-en {line}")) for line in range(40)}
    again = {annotate_pair(SRC, TGT, LINKS, cfg, random.Random(f"7 de-en {line}")) for line in range(40)}
    assert draws == again and len(draws) > 5  # the same seed and lines, the same draws; and they vary
    assert all(1 <= text.count("｟term｠") <= 2 for text in draws)
    never = TerminologyConfig(probability=0.0)
    assert annotate_pair(SRC, TGT, LINKS, never, random.Random(0)) == SRC


def test_chunks_are_annotated_by_line_whatever_their_chunking() -> None:
    cfg = TerminologyConfig(probability=0.5)
    links = [frozenset(LINKS)] * 6
    whole = [Pairs([SRC] * 6, [TGT] * 6, 6, 0, list(range(6)))]
    halves = [Pairs([SRC] * 3, [TGT] * 3, 3, 0, [0, 1, 2]), Pairs([SRC] * 3, [TGT] * 3, 3, 0, [3, 4, 5])]
    one = [s for p in annotated_chunks(iter(whole), links, cfg, 1, "de-en") for s in p.src]
    two = [s for p in annotated_chunks(iter(halves), links, cfg, 1, "de-en") for s in p.src]
    assert one == two


def test_a_link_past_its_sentence_names_the_file_and_line(labelled: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    shutil.copytree(labelled, data)
    lines = (data / "train.links").read_text().splitlines()
    (data / "train.links").write_text("\n".join([lines[0], "0-99", *lines[2:]]) + "\n")
    config, links = (
        ROOT / "configs" / "tiny-transformer.yaml",
        f"data.terminology.links={data / 'train.links'}",
    )
    with pytest.raises(
        UserError, match=r"train.links line 2: link 0-99 \(from 0\) points past the sentence pair"
    ):
        prepared(config, data, tmp_path / "run", "tokenizer.vocab_size=200", links)
    (data / "train.links").write_text("\n".join(lines[:-1]) + "\n")
    with pytest.raises(
        UserError, match=r"train.links has 2999 lines but the training file .*train.src has 3000"
    ):
        prepared(config, data, tmp_path / "run2", "tokenizer.vocab_size=200", links)


@pytest.mark.parametrize(
    ("settings", "fragment"),
    [
        ({"probability": 1.5}, "data.terminology.probability=1.5 must be in [0.0, 1.0]"),
        (
            {"term_start": "a b"},
            "data.terminology.term_start='a b' must be a non-empty string without spaces",
        ),
        ({"term_end": "｟term｠"}, "must be three markers"),
    ],
)
def test_bad_settings_are_config_errors(settings: dict[str, object], fragment: str) -> None:
    with pytest.raises(ConfigError) as error:
        TerminologyConfig(**settings)  # type: ignore[arg-type]
    assert fragment in str(error.value)


def test_the_training_split_is_annotated_with_markers_as_whole_pieces(labelled: Path, tmp_path: Path) -> None:
    sets = [f"data.terminology.links={labelled / 'train.links'}", "data.terminology.probability=0.5"]
    config = ROOT / "configs" / "tiny-transformer.yaml"
    data, _ = prepared(config, labelled, tmp_path / "run", "tokenizer.vocab_size=200", *sets)
    tokenizer = data.tokenizers.src
    ids = tokenizer.ids(list(MARKERS))
    assert all(tokenizer.pieces([i]) == [m] for i, m in zip(ids, MARKERS, strict=True))  # no unknown
    assert tokenizer.encode(["a ｟term｠ b"])[0].count(ids[0]) == 1  # text holding a marker: one piece
    sources = [data.train.src[k].tolist() for k in range(len(data.train))]
    annotated = [s for s in sources if ids[0] in s]
    assert 0.3 < len(annotated) / len(sources) < 0.7
    assert all(s.count(ids[0]) == s.count(ids[1]) == s.count(ids[2]) for s in sources)
    plain, _ = prepared(config, labelled, tmp_path / "plain", "tokenizer.vocab_size=200")
    assert plain.tokenizers.src.ids(list(MARKERS)) == [1, 1, 1]  # a run without terminology: unknown


@pytest.mark.skipif(shutil.which(PROGRAM) is None, reason="eflomal is not installed")
def test_without_links_eflomal_aligns_the_split_once(
    labelled: Path, tmp_path: Path, data_cache: Path
) -> None:
    config = ROOT / "configs" / "tiny-transformer.yaml"
    data, _ = prepared(
        config, labelled, tmp_path / "run", "tokenizer.vocab_size=200", "data.terminology.max_terms=1"
    )
    marker = data.tokenizers.src.ids(["｟term｠"])[0]
    assert (
        0.2
        < sum(marker in data.train.src[k].tolist() for k in range(len(data.train))) / len(data.train)
        < 0.4
    )
    (entry,) = (data_cache / "term-links").iterdir()
    links = (entry / "links").read_text().splitlines()
    assert len(links) == 3000 and sum(bool(line) for line in links) > 2900
