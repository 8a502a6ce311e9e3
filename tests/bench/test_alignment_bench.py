"""benchmarks/alignment_bench.py's fixed parts: its preprocessing of Multi30k, the position-only baseline and
the gold set read from the shared data (skipped where ../shared/data is absent); the benchmark itself is run
by hand (it trains a dozen models); --steps' soft symmetrization of two directions' word weights, the training
text with copies of the gold text and the labels that go with it."""

from pathlib import Path

import numpy as np
import pytest

from benchmarks import alignment_bench as bench
from nmt.align.pharaoh import pharaoh_text, read_links


def test_the_preprocessing_lower_cases_and_splits_punctuation_and_clitics() -> None:
    assert bench.tokenize("Two young, White males.", "en") == "two young , white males ."
    assert bench.tokenize("A man's hat", "en") == "a man 's hat"
    assert bench.tokenize("L'homme d'affaires mange.", "fr") == "l' homme d' affaires mange ."


def test_the_diagonal_links_each_word_to_its_relative_position() -> None:
    en, fr = ["a b c d"], ["w x"]
    assert bench.diagonal(en, fr, "fr") == [{(1, 0), (3, 1)}]  # French word j → English (j + ½)·4/2
    assert bench.diagonal(en, fr, "en") == [{(0, 0), (1, 0), (2, 1), (3, 1)}]  # English i → (i + ½)·2/4


def test_without_the_shared_data_the_benchmark_says_what_it_needs(tmp_path: Path) -> None:
    message = bench.missing_data(tmp_path)
    assert message is not None and message.startswith("skipped: ")
    assert "../shared/data" in message and str(tmp_path / "multi30k" / "train.fr") in message


def test_the_gold_set_is_read_english_first_from_0() -> None:
    missing = bench.missing_data(bench.DATA)
    if missing is not None:
        pytest.skip(missing)
    en, fr, links = bench.read_gold(bench.DATA)
    assert len(en) == len(fr) == len(links) == 447
    assert (en[0], fr[0], links[0]) == ("2 .", "2 .", "1-1 0-0")  # the file: "2-2 1-1", 1-based
    assert sum("p" in line for line in links) > 400  # possible links kept as such


def test_soft_links_average_both_directions_before_the_threshold() -> None:
    en_fr = np.array([[0.9, 0.1], [0.2, 0.8]])  # (French words, English words)
    fr_en = np.array([[0.7, 0.1], [0.6, 0.3]])  # (English words, French words)
    # mean (French × English): [[0.8, 0.35], [0.15, 0.55]]
    assert bench.soft_links({"en": [en_fr], "fr": [fr_en]}, 0.5) == [{(0, 0), (1, 1)}]
    assert bench.soft_links({"en": [en_fr], "fr": [fr_en]}, 0.3) == [{(0, 0), (1, 0), (1, 1)}]


def test_gold_copies_repeat_the_gold_text_and_its_labels(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bench, "GOLD_PAIRS", 2)
    (tmp_path / "data").mkdir()
    for lang in ("en", "fr"):
        (tmp_path / "data" / f"train.{lang}").write_text("".join(f"{lang} {i}\n" for i in range(4)))
        (tmp_path / "data" / f"val.{lang}").write_text(f"{lang} v\n")
    (tmp_path / "eflomal").mkdir()
    links = [{(0, 0)}, {(0, 1)}, {(1, 0)}, {(1, 1), (0, 1)}]
    (tmp_path / "eflomal" / "grow-diag.links").write_text(pharaoh_text(links))
    data = bench.with_copies(tmp_path, 3)
    assert (data / "train.en").read_text().splitlines() == ["en 0", "en 1", "en 2", "en 3"] + [
        "en 2",
        "en 3",
    ] * 2
    assert (data / "val.fr").read_text() == "fr v\n"
    assert bench.with_copies(tmp_path, 1) == tmp_path / "data"
    forward = [set(line.possible) for line in read_links(bench.labels(tmp_path, "grow-diag", 3, "en"))]
    reverse = [set(line.possible) for line in read_links(bench.labels(tmp_path, "grow-diag", 3, "fr"))]
    assert forward == [{(0, 0)}, {(0, 1)}] + [{(1, 0)}, {(1, 1), (0, 1)}] * 3
    assert reverse == [{(j, i) for i, j in links} for links in forward]


def measured(aer: float, first: float, bleu: float) -> dict:
    """A step's saved scores, as measure_step writes them (only what seed_table reads)."""
    hard = {"aer": aer, "precision": 90.0, "recall": 80.0}
    return {
        "grow-diag": {"347": hard, "first 100": {"aer": first}},
        "bleu": {"en-fr": bleu, "fr-en": bleu - 2},
    }


def test_a_step_trained_with_other_seeds_is_summed_up_by_its_mean_and_spread() -> None:
    results = {
        "a": measured(15.0, 13.0, 40.0),
        "b": measured(16.0, 14.0, 41.0),
        "a, seed 2": measured(14.0, 12.0, 42.0),
        "a, seed 3": measured(13.0, 14.0, 38.0),
    }
    rows = bench.seed_table(results).splitlines()[2:]
    assert rows == [
        "| a (3) | 14.00 ± 1.00 | 90.00 ± 0.00 | 80.00 ± 0.00 | 13.00 ± 1.00 | 40.00 ± 2.00 / 38.00 ± 2.00 |"
    ]  # "b" has one seed: no row
