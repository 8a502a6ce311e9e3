"""benchmarks/multilingual_bench.py without training anything: each bilingual's vocabulary chosen on
validation, the two tables from results.json, and the JSON Lines corpora of the zero-shot remedies (no de–fr
pair but the few ones and the synthetic ones)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from benchmarks import multilingual_bench
from tests.conftest import ROOT

PUBLISHED = (ROOT / "docs" / "multilingual.md").read_text(encoding="utf-8").splitlines()


def bench(work: Path, data: Path | None = None, **results: object) -> object:
    args = argparse.Namespace(work=work, data=data)
    work.mkdir(parents=True, exist_ok=True)
    (work / "results.json").write_text(json.dumps(results))
    return multilingual_bench.Bench(args)


def scores(bleu: float) -> dict:
    return {"bleu": bleu, "chrf": bleu + 20, "off_target": 0.5, "hypotheses": "h"}


def test_each_bilingual_takes_its_best_vocabulary_and_the_tables_show_the_means(tmp_path: Path) -> None:
    trained = {}
    for i, direction in enumerate(multilingual_bench.TRAINED):
        trained[f"bi-{direction}-v4000"] = {"updates": 600, "valid_bleu": 20.0 + 1.5 * i, "cpu": 150}
        trained[f"bi-{direction}-v8000"] = {"updates": 400, "valid_bleu": 22.0, "cpu": 150}
    trained |= {
        f"multi-{tags}": {"updates": 2300, "valid_bleu": 25.0, "cpu": 900} for tags in ("encoder", "decoder")
    }
    found = {
        f"{system}/{d}": scores(30.0 if system == "bilingual" else 33.0)
        for d in multilingual_bench.TRAINED
        for system in multilingual_bench.SYSTEMS
    }
    found |= {f"multi-encoder-zero-shot/{d}": scores(1.0) for d in multilingual_bench.ZERO_SHOT}
    work = bench(tmp_path / "work", trained=trained, scores=found)
    assert [multilingual_bench.best_bilingual(work, d) for d in multilingual_bench.TRAINED[:4]] == [
        "bi-en-de-v8000",
        "bi-de-en-v8000",
        "bi-en-fr-v4000",  # 23.0 > 22.0
        "bi-fr-en-v4000",
    ]
    table = multilingual_bench.one_vs_six_table(work).splitlines()
    assert table[2].startswith("| en-de | 4k 20.00, 8k 22.00 | 30.00 | 50.00 | 0.5 | 33.00 |")
    assert "| **mean** | | 30.00 | 50.00 | 0.5 | 33.00 | 53.00 | 0.5 | 33.00 | 53.00 | 0.5 |" in table
    assert any(line.startswith("| updates | | 3,200 | | | 2,300 |") for line in table)  # 2 × 400 + 4 × 600
    zero_shot = multilingual_bench.zero_shot_table(work).splitlines()
    assert zero_shot[2] == "| zero-shot, encoder tags | 1.00 | 21.00 | 0.5 | 1.00 | 21.00 | 0.5 | 33.00 |"
    assert zero_shot[3].endswith("| — | — | — | — | — | — | 33.00 |")  # zero-shot not measured
    assert table[0] in PUBLISHED and zero_shot[0] in PUBLISHED  # the tables of docs/multilingual.md


def test_the_remedies_corpora_hold_de_fr_pairs_only_where_meant(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(multilingual_bench, "FEW_PAIRS", 2)  # of 6 lines
    monkeypatch.setattr(multilingual_bench, "SYNTHETIC_PAIRS", 1)
    data = tmp_path / "data"
    data.mkdir()
    for lang in multilingual_bench.LANGUAGES:
        (data / f"train.{lang}").write_text("".join(f"{lang} {i}\n" for i in range(6)))
    work = bench(tmp_path / "work", data)
    few = [json.loads(line) for line in multilingual_bench.write_few_pairs(work).read_text().splitlines()]
    assert [r for r in few if "de" in r and "fr" in r] == [
        {lang: f"{lang} {i}" for lang in multilingual_bench.LANGUAGES}
        for i in (0, 1)  # the first --few-pairs lines
    ]
    monkeypatch.setattr(
        multilingual_bench, "sampled", lambda _, src, tgt, lines: [f"{tgt} of {line}" for line in lines]
    )
    synthetic = [
        json.loads(line) for line in multilingual_bench.write_synthetic_pairs(work).read_text().splitlines()
    ]
    pairs = [r for r in synthetic if "de" in r and "fr" in r]
    assert len(pairs) == 2 and all(" of " in r["de"] or " of " in r["fr"] for r in pairs)
    real = {r["fr"] if " of " in r["de"] else r["de"] for r in pairs}
    assert not real & {"fr 0", "fr 1", "de 0", "de 1"}  # not lines the few-pairs run sees as pairs
    for records in (few, synthetic):  # every English-centric pair once
        for direction in multilingual_bench.TRAINED:
            src, tgt = direction.split("-")
            assert sum(src in r and tgt in r for r in records) == 6
