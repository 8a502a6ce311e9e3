"""benchmarks/markup_bench.py on the session's tiny reordering run: tags injected as they should be, and the
whole measurement (three placements, spans, BLEU) on a few synthetic pairs whose true links are known; the
benchmark itself is run by hand (it trains two models)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch

from benchmarks import markup_bench as bench
from nmt.align.pharaoh import Link, SentenceLinks
from nmt.decode.loading import load_trained


def test_injected_tags_are_one_to_three_nested_or_apart_and_well_formed() -> None:
    rng = random.Random(0)
    words = list("abcdefgh")
    samples = [bench.inject(words, rng) for _ in range(300)]
    assert {len(s.tags) for s in samples} == {1, 2, 3}
    nested = 0
    for sample in samples:
        reader = bench.read_tags(sample.page)
        assert not reader.problems and not reader.open and reader.words == words
        for k, tag in enumerate(sample.tags):
            assert 1 <= tag.last - tag.first + 1 <= 4
            assert reader.word_span(f"t{k}") == (tag.first, tag.last)
        nested += any(
            o.first <= t.first and t.last <= o.last for t in sample.tags for o in sample.tags if o is not t
        )
    assert 30 < nested < 270  # some nested, not all


def test_the_text_node_baseline_translates_each_text_alone_and_keeps_the_tags() -> None:
    page = 'a <b id="t0">b &amp; c</b> d'
    written = bench.text_node_pages([page], lambda texts: [f"[{t}]" for t in texts])
    assert written == ['[a] <b id="t0">[b &amp; c]</b> [d]']


def test_a_projected_span_uses_sure_links_first_then_possible_ones() -> None:
    links = SentenceLinks(frozenset({(0, 2)}), frozenset({(0, 2), (0, 5), (1, 1), (1, 3)}))
    assert bench.projected(bench.Tag("b", 0, 0), links) == (2, 2)
    assert bench.projected(bench.Tag("b", 1, 1), links) == (1, 3)
    assert bench.projected(bench.Tag("b", 2, 2), links) is None


def reversed_links(pairs: list[tuple[list[str], list[str]]]) -> list[list[set[Link]]]:
    """The reordering task's true links, standing in for eflomal's: source word i is target word n-1-i."""
    return [
        [{(i, len(t.split()) - 1 - i) for i in range(len(t.split()))} for t in targets]
        for _, targets in pairs
    ]


def test_the_benchmark_measures_every_placement_on_a_tiny_run(corpus: Path, trained_run: Path) -> None:
    sources = (corpus / "test.src").read_text().splitlines()[:12]
    references = (corpus / "test.tgt").read_text().splitlines()[:12]
    human = [
        SentenceLinks(frozenset(links), frozenset(links)) for links in reversed_links([([], references)])[0]
    ]
    run = load_trained([trained_run], torch.device("cpu"))
    sets = {"reordering": bench.Pairs(sources, references, human)}
    results = bench.measure({"tiny": run}, sets, reversed_links)["tiny"]["reordering"]
    nmt, text_nodes, eflomal = (results[placement] for placement in bench.PLACEMENTS)
    for found, pages in ((nmt, 24), (text_nodes, 12), (eflomal, 24)):
        assert found["kept"] == found["pages"] == pages  # translations (and the references) well-formed
    assert nmt["bleu_stripped"] == pytest.approx(nmt["bleu_plain"])  # the same sentences translated
    assert text_nodes["on_reference"] is None
    spans = eflomal["on_reference"]  # placed by the true links: every tag on its projected span
    assert spans["exact"] == spans["overlap"] == spans["projectable"] == spans["tags"] >= 12
    ceiling = results[bench.CEILING]["on_reference"]  # the true links are all sure here
    assert ceiling["exact"] == ceiling["projectable"] == spans["projectable"]
    table = bench.report({"tiny": {"reordering": results}})
    assert table.count("\n") == 5 + len(bench.PLACEMENTS)
    assert table.endswith(
        f"Tags injected: reordering {spans['tags']} ({spans['tags']} with a projected span).\n"
    )
    assert "| reordering | tiny | text nodes (Argos Translate's way) | 12 / 12 | n/a | n/a |" in table


def test_without_the_shared_data_the_benchmark_says_so_and_stops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(
        "sys.argv", ["markup_bench", "--work", str(tmp_path / "work"), "--data", str(tmp_path)]
    )
    with pytest.raises(SystemExit) as stopped:
        bench.main()
    assert stopped.value.code == 0
    assert capsys.readouterr().err.startswith("skipped: the markup benchmark needs the shared data")
    assert not (tmp_path / "work").exists()


def test_runs_measured_before_are_kept_and_only_new_ones_measured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A second call with another --run measures that run alone, keeps the first in markup.json and reports
    the runs asked for (the measurement itself stands in: it is tested above)."""
    measured: list[list[str]] = []

    def measure(runs: dict, sets: dict, aligner: object) -> dict:
        measured.append(list(runs))
        return {name: {"set": f"measured {path}"} for name, path in runs.items()}

    monkeypatch.setattr(bench.alignment_bench, "ready", lambda *args: None)
    monkeypatch.setattr(bench, "load_trained", lambda paths, device: str(paths[0]))
    monkeypatch.setattr(bench, "load_sets", lambda work, sentences: {})
    monkeypatch.setattr(bench, "eflomal_aligner", lambda work: None)
    monkeypatch.setattr(bench, "measure", measure)
    monkeypatch.setattr(bench, "report", lambda results: " ".join(results))
    work = tmp_path / "work"
    work.mkdir()
    for runs in (["first=A"], ["second=B", "first=A"]):
        argv = ["markup_bench", "--work", str(work), *[arg for run in runs for arg in ("--run", run)]]
        monkeypatch.setattr("sys.argv", argv)
        bench.main()
    assert measured == [["first"], ["second"]]
    assert json.loads((work / "markup.json").read_text()) == {
        "first": {"set": "measured A"},
        "second": {"set": "measured B"},
    }
    assert capsys.readouterr().out.splitlines() == ["first", "second first"]
