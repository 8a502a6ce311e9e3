"""benchmarks/alignment_bench.py's fixed parts: its preprocessing of Multi30k, the position-only baseline and
the gold set read from the shared data (skipped where ../shared/data is absent); the benchmark itself is run
by hand (it trains a dozen models)."""

from pathlib import Path

import pytest

from benchmarks import alignment_bench as bench


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
