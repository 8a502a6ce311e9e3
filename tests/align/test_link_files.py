"""`nmt score-alignments` and `nmt symmetrize` refuse a file that looks misread, in one line naming the
option to change: 1-based read from 0 (and 0-based read from 1), target-first read source-first, an index
past its sentence (checked with --src/--tgt; the log says when it is not)."""

from pathlib import Path

import pytest

from tests.conftest import assert_one_line_error, run_cli

PAIRS = 6  # sentence pairs: source word i ↔ target word i + 1 of a target two words longer


@pytest.fixture
def files(tmp_path: Path) -> Path:
    """The text (src, tgt), its links as a gold set (`gold`), and those links 1-based (`one-based`),
    target-first (`reverse`), and with one link past its sentence (`past`)."""
    lengths = [3 + k for k in range(PAIRS)]

    def write(name: str, lines: list[str]) -> None:
        (tmp_path / name).write_text("".join(f"{line}\n" for line in lines))

    write("src", [" ".join(f"s{i}" for i in range(n)) for n in lengths])
    write("tgt", [" ".join(f"t{j}" for j in range(n + 2)) for n in lengths])
    write("gold", [" ".join(f"{i}-{i + 1}" for i in range(n)) + f" 0p{n + 1}" for n in lengths])
    write("one-based", [" ".join(f"{i + 1}-{i + 2}" for i in range(n)) for n in lengths])
    write("reverse", [" ".join(f"{i + 1}-{i}" for i in range(n)) for n in lengths])
    write(
        "past", [" ".join(f"{i}-{i + 1}" for i in range(n)) + (" 999-999" if n == 5 else "") for n in lengths]
    )
    return tmp_path


def score(files: Path, hypothesis: str, *flags: str) -> tuple[int, str, str]:
    return run_cli("score-alignments", str(files / hypothesis), str(files / "gold"), *flags)


def symmetrize(files: Path, forward: str, reverse: str, *flags: str) -> tuple[int, str, str]:
    return run_cli("symmetrize", str(files / forward), str(files / reverse), "--method", "union", *flags)


def with_text(files: Path) -> list[str]:
    return ["--src", str(files / "src"), "--tgt", str(files / "tgt")]


def test_the_files_read_right_score_and_symmetrize(files: Path) -> None:
    code, out, _ = score(files, "one-based", "--hyp-one-based", *with_text(files))
    assert code == 0 and out.startswith("AER 0.0  precision 100.0  recall ")
    code, out, _ = symmetrize(files, "gold", "reverse", "--swap-reverse", *with_text(files))
    assert code == 0 and out.splitlines()[0] == "0-1 0-4 1-2 2-3"


def test_unchecked_indices_are_said(files: Path) -> None:
    code, _, err = score(files, "gold")
    assert code == 0 and "not checked against their sentences: give --src and --tgt" in err


def test_a_one_based_file_read_from_0(files: Path) -> None:
    assert_one_line_error(score(files, "one-based"), "one-based never links word 0", "add --hyp-one-based")
    assert_one_line_error(
        symmetrize(files, "one-based", "one-based"), "never links word 0", "add --one-based"
    )


def test_a_short_one_based_file_fits_its_text_only_one_lower(files: Path) -> None:
    """Fewer lines than a file without word 0 needs to count as 1-based, but an index equal to its
    sentence's length."""
    for name in ("src", "tgt", "gold", "one-based"):
        lines = (files / name).read_text().splitlines()[:2]
        (files / name).write_text("".join(f"{line}\n" for line in lines))
    assert_one_line_error(score(files, "one-based", *with_text(files)), "add --hyp-one-based")
    assert score(files, "one-based")[0] == 0  # without the text nothing shows it


def test_a_zero_based_file_read_from_1(files: Path) -> None:
    assert_one_line_error(
        score(files, "gold", "--hyp-one-based"), "gold line 1", "has index 0", "drop --hyp-one-based"
    )
    assert_one_line_error(score(files, "gold", "--gold-one-based"), "drop --gold-one-based")


def test_a_target_first_hypothesis_read_source_first(files: Path) -> None:
    assert_one_line_error(
        score(files, "reverse"), "read the other way round", "add --hyp-reverse", "--gold-reverse"
    )
    assert_one_line_error(
        score(files, "reverse", *with_text(files)), "only with its two sides swapped: add --hyp-reverse"
    )
    assert_one_line_error(
        score(files, "gold", "--hyp-reverse", *with_text(files)), "swapped: drop --hyp-reverse"
    )


def test_a_target_first_reverse_file_symmetrized_without_swap_reverse(files: Path) -> None:
    assert_one_line_error(symmetrize(files, "gold", "reverse"), "add --swap-reverse")
    assert_one_line_error(
        symmetrize(files, "gold", "reverse", *with_text(files)),
        "only with its two sides swapped: add --swap-reverse",
    )
    assert_one_line_error(  # given in the other order
        symmetrize(files, "reverse", "gold", *with_text(files)), "with the two files in the other order"
    )


def test_an_index_past_its_sentence(files: Path) -> None:
    fragments = ("past line 3: link 999-999", "5 source and 7 target words")
    assert_one_line_error(
        score(files, "past", *with_text(files)), *fragments, "--hyp-reverse", "--hyp-one-based"
    )
    assert_one_line_error(symmetrize(files, "past", "gold", *with_text(files)), *fragments)
    assert_one_line_error(  # read target-first, its other links do not fit either
        symmetrize(files, "gold", "past", "--swap-reverse", *with_text(files)),
        "past line 1",
        "--swap-reverse",
    )


def test_the_text_of_both_sides(files: Path) -> None:
    assert_one_line_error(score(files, "gold", "--src", str(files / "src")), "--src and --tgt come together")
