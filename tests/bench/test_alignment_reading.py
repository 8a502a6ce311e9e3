"""benchmarks/alignment_reading.py on the session's tiny reordering run, whose true links are known: every
reading scored (AER, tags on the references and on the translations), and the table printed; the benchmark
itself is run by hand (it trains three models)."""

from __future__ import annotations

from pathlib import Path

import torch

from benchmarks import alignment_reading as bench
from benchmarks import markup_bench
from nmt.align.pharaoh import SentenceLinks
from nmt.decode.loading import load_trained
from tests.bench.test_markup_bench import reversed_links


def test_every_reading_of_a_tiny_run_is_scored_and_tabled(corpus: Path, trained_run: Path) -> None:
    sources = (corpus / "test.src").read_text().splitlines()[:12]
    references = (corpus / "test.tgt").read_text().splitlines()[:12]
    human = [
        SentenceLinks(frozenset(links), frozenset(links)) for links in reversed_links([([], references)])[0]
    ]
    run = load_trained([trained_run], torch.device("cpu"))
    sets = {"reordering": markup_bench.Pairs(sources, references, human)}
    results = bench.measure({"tiny": run}, sets, reversed_links)["tiny"]
    layers = run.cfg.model.decoder_layers
    assert list(results) == [
        f"layer {layer}{' (last)' if layer == layers - 1 else ''}, {rule}"
        for layer in range(layers)
        for rule in ("argmax", "shift")
    ]
    for entry in results.values():
        assert set(entry["aer"]) == {"first 100", "447"} and 0 <= entry["aer"]["447"] <= 100  # 12 pairs
        for where in ("reference", "translation"):
            spans = entry["reordering"][where]
            assert spans["tags"] >= 12 and 0 <= spans["exact"] <= spans["overlap"] <= spans["projectable"]
            assert 0 <= spans["empty"] <= spans["tags"] and 0 <= spans["unlinked"] <= spans["tags"]
    table = bench.report({"tiny": results})
    assert table.count("\n") == 2 + len(results)
    assert "| tiny | layer 0, argmax |" in table
    timed = bench.timing_report({"tiny": run}, sources[:4])  # the run reads its penultimate layer
    assert timed.count("\n") == 4 and "| tiny | beam 5 |" in timed and "(search's)" not in timed
