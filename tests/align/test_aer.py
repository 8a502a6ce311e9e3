"""The alignment error rate: hand-worked cases, and the published AERs of fast_align and GIZA++ reproduced
from their stored outputs (the fixture in ../shared/data/alignment; skipped without it), with the
symmetrizer."""

from pathlib import Path

import pytest

from nmt.align.link_files import LinkFile
from nmt.align.pharaoh import SentenceLinks, read_links
from nmt.align.score import score_alignments, score_files
from nmt.align.symmetrize import Method, symmetrize
from nmt.errors import UserError
from tests.conftest import ROOT, assert_one_line_error, run_cli

FIXTURE = ROOT.parent / "shared" / "data" / "alignment"
needs_fixture = pytest.mark.skipif(
    not (FIXTURE / "gold").is_dir(),
    reason=f"needs the shared data's alignment fixture (../shared/data beside the repository): no {FIXTURE}",
)


def gold(sure: set, possible: set) -> SentenceLinks:
    return SentenceLinks(frozenset(sure), frozenset(possible | sure))


def test_och_and_ney_by_hand() -> None:
    # A = {0-0, 1-1, 2-1}; S = {0-0}; P = {0-0, 1-1}: |A∩S| = 1, |A∩P| = 2, |A| = 3, |S| = 1
    scores = score_alignments([{(0, 0), (1, 1), (2, 1)}], [gold({(0, 0)}, {(1, 1)})])
    assert scores.aer == pytest.approx(1 - 3 / 4)
    assert scores.precision == pytest.approx(2 / 3) and scores.recall == 1.0
    assert (scores.links, scores.sure, scores.possible) == (3, 1, 2)


def test_counts_are_summed_over_the_corpus_before_dividing() -> None:
    """Sentence 1 is perfect with 1 link, sentence 2 wrong with 3: the mean of sentence AERs would be 0.5."""
    hypotheses = [{(0, 0)}, {(0, 1), (1, 0), (2, 2)}]
    references = [gold({(0, 0)}, set()), gold({(0, 0), (1, 1), (2, 1)}, set())]
    scores = score_alignments(hypotheses, references)
    assert scores.aer == pytest.approx(1 - (1 + 1) / (4 + 4))  # |A∩S| = |A∩P| = 1, |A| = |S| = 4


def test_nothing_to_score_is_a_user_error() -> None:
    with pytest.raises(UserError, match="nothing to score"):
        score_alignments([set()], [gold(set(), set())])


PUBLISHED = [
    ("fast_align", "enfr", 10.5),
    ("giza", "enfr", 5.9),
    ("fast_align", "roen", 32.1),
    ("giza", "roen", 27.9),
]


@needs_fixture
@pytest.mark.parametrize(("system", "pair", "aer"), PUBLISHED)
def test_the_published_aers_of_the_fixture(system: str, pair: str, aer: float) -> None:
    outputs = FIXTURE / "reference-outputs" / system
    hypothesis = LinkFile(outputs / f"test.{pair}.grow-diagonal.talp", False, False, "--hyp-one-based", "-")
    scores = score_files(hypothesis, LinkFile(FIXTURE / "gold" / f"{pair}.gold", True, False, "-", "-"))
    assert round(100 * scores.aer, 1) == aer
    if (system, pair) == ("fast_align", "enfr"):  # and the published precision and recall
        assert (round(100 * scores.precision, 1), round(100 * scores.recall, 1)) == (90.8, 87.8)


@needs_fixture
@pytest.mark.parametrize(("system", "pair"), [(s, p) for s, p, _ in PUBLISHED])
def test_strict_grow_diag_rebuilds_the_stored_files(system: str, pair: str) -> None:
    """lilt's grow-diagonal of the stored forward and reverse files (the reverse one stored target-first) is
    the stored grow-diagonal file, line for line."""
    outputs = FIXTURE / "reference-outputs" / system
    forward = read_links(outputs / f"test.{pair}.talp")
    reverse = read_links(outputs / f"test.{pair}.reverse.talp", reverse=True)
    stored = read_links(outputs / f"test.{pair}.grow-diagonal.talp")
    for f, r, s in zip(forward, reverse, stored, strict=True):
        assert symmetrize(f.possible, r.possible, "grow-diag") == s.possible


@needs_fixture
@pytest.mark.parametrize(
    ("method", "aer"), [("grow-diag", 10.5), ("grow-diag-moses", 14.6), ("grow-diag-final-and", 15.2)]
)
def test_moses_variants_on_the_fast_align_links(method: Method, aer: float) -> None:
    outputs = FIXTURE / "reference-outputs" / "fast_align"
    forward = read_links(outputs / "test.enfr.talp")
    reverse = read_links(outputs / "test.enfr.reverse.talp", reverse=True)
    links = [symmetrize(f.possible, r.possible, method) for f, r in zip(forward, reverse, strict=True)]
    scores = score_alignments(links, read_links(FIXTURE / "gold" / "enfr.gold", one_based=True))
    assert round(100 * scores.aer, 1) == aer


@needs_fixture
@pytest.mark.parametrize(
    ("system", "printed"),
    [
        ("fast_align", "AER 10.5  precision 90.8  recall 87.8  (5374 links; gold 4038 sure, 17438 possible"),
        ("giza", "AER 5.9  precision 97.5  recall 89.7  (5072 links; gold 4038 sure, 17438 possible"),
    ],
)
def test_the_worked_example_of_the_guide(system: str, printed: str, tmp_path: Path) -> None:
    """docs/alignment.md's commands: the gold text split into its two sides, the two directions symmetrized
    (the reverse file target-first), the result scored against the 1-based gold; each index checked."""
    pairs = [line.split(" ||| ") for line in (FIXTURE / "gold" / "enfr.src-tgt").read_text().splitlines()]
    for side, name in enumerate(("gold.en", "gold.fr")):
        (tmp_path / name).write_text("".join(f"{pair[side]}\n" for pair in pairs))
    text = ["--src", str(tmp_path / "gold.en"), "--tgt", str(tmp_path / "gold.fr")]
    outputs, out = FIXTURE / "reference-outputs" / system, tmp_path / "sym.talp"
    args = ["symmetrize", str(outputs / "test.enfr.talp"), str(outputs / "test.enfr.reverse.talp")]
    code, _, err = run_cli(*args, "--swap-reverse", "--method", "grow-diag", *text, "--out", str(out))
    assert code == 0, err
    gold = str(FIXTURE / "gold" / "enfr.gold")
    code, output, err = run_cli("score-alignments", str(out), gold, "--gold-one-based", *text)
    assert code == 0, err
    assert output.startswith(printed)


@needs_fixture
def test_the_misreadings_that_scored_wrongly_are_refused() -> None:
    """Without --gold-one-based fast_align's links scored 48.1, symmetrized without --swap-reverse 55.2, its
    reverse file scored without --hyp-reverse 72.6: each is now one line naming the option."""
    outputs, gold = FIXTURE / "reference-outputs" / "fast_align", str(FIXTURE / "gold" / "enfr.gold")
    forward, reverse = str(outputs / "test.enfr.talp"), str(outputs / "test.enfr.reverse.talp")
    assert_one_line_error(run_cli("score-alignments", forward, gold), "add --gold-one-based")
    symmetrized = run_cli("symmetrize", forward, reverse, "--method", "grow-diag")
    assert_one_line_error(symmetrized, "add --swap-reverse")
    assert_one_line_error(run_cli("score-alignments", reverse, gold, "--gold-one-based"), "add --hyp-reverse")


def test_score_alignments_refuses_files_of_other_lengths(tmp_path: Path) -> None:
    (tmp_path / "hyp").write_text("0-0\n")
    (tmp_path / "gold").write_text("0-0\n1-1\n")
    code, _, err = run_cli("score-alignments", str(tmp_path / "hyp"), str(tmp_path / "gold"))
    assert code == 2 and "has 1 lines but" in err and len(err.strip().splitlines()) == 1


def test_reversed_and_one_based_switches(tmp_path: Path) -> None:
    (tmp_path / "hyp").write_text(
        "2-1 3-2\n"
    )  # 1-based, target first: source 0 - target 1, source 1 - target 2
    (tmp_path / "gold").write_text("0-1 1p2\n")
    code, output, _ = run_cli(
        "score-alignments", str(tmp_path / "hyp"), str(tmp_path / "gold"), "--hyp-one-based", "--hyp-reverse"
    )
    assert code == 0 and output.startswith("AER 0.0  precision 100.0  recall 100.0")
