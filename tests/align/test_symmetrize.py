"""Symmetrization by hand: where the strict grow-diag, Moses' grow-diag and grow-diag-final-and differ."""

from pathlib import Path

import pytest

from nmt.align.link_files import LinkFile
from nmt.align.symmetrize import symmetrize, symmetrize_files
from nmt.errors import UserError


def test_intersection_and_union() -> None:
    assert symmetrize({(0, 0), (1, 0)}, {(0, 0), (1, 1)}, "intersection") == {(0, 0)}
    assert symmetrize({(0, 0), (1, 0)}, {(0, 0), (1, 1)}, "union") == {(0, 0), (1, 0), (1, 1)}


def test_a_neighbour_sharing_an_aligned_word() -> None:
    """(1, 0) is below (0, 0) in the union: its target word is aligned, its source word is not. Moses adds it
    (either word unaligned), the strict variant never does (both must be)."""
    forward, reverse = {(0, 0), (1, 0)}, {(0, 0)}
    assert symmetrize(forward, reverse, "grow-diag") == {(0, 0)}
    assert symmetrize(forward, reverse, "grow-diag-moses") == {(0, 0), (1, 0)}


def test_a_diagonal_neighbour_grows_in_both() -> None:
    forward, reverse = {(0, 0), (1, 1), (2, 2)}, {(0, 0)}
    assert symmetrize(forward, reverse, "grow-diag") == {(0, 0), (1, 1), (2, 2)}  # (2, 2) grows from (1, 1)
    assert symmetrize(forward, reverse, "grow-diag-moses") == {(0, 0), (1, 1), (2, 2)}


def test_final_and_adds_links_whose_words_are_both_unaligned() -> None:
    forward, reverse = {(0, 0), (2, 2), (3, 0)}, {(0, 0)}  # (2, 2) is no neighbour; (3, 0) shares target 0
    assert symmetrize(forward, reverse, "grow-diag-moses") == {(0, 0)}
    assert symmetrize(forward, reverse, "grow-diag-final-and") == {(0, 0), (2, 2)}


def test_final_and_takes_the_forward_links_first() -> None:
    """(2, 2) only forward, (2, 3) only reverse, both with source word 2: the forward one comes first and
    leaves the other with an aligned word."""
    forward, reverse = {(0, 0), (2, 2)}, {(0, 0), (2, 3)}
    assert symmetrize(forward, reverse, "grow-diag-final-and") == {(0, 0), (2, 2)}
    assert symmetrize(reverse, forward, "grow-diag-final-and") == {(0, 0), (2, 3)}


def test_empty_lines() -> None:
    for method in ("intersection", "union", "grow-diag", "grow-diag-moses", "grow-diag-final-and"):
        assert symmetrize(set(), set(), method) == set()


FILES = (("fwd", False), ("rev", True))


def test_files_line_by_line(tmp_path: Path) -> None:
    (tmp_path / "fwd").write_text("0-0 1-1\n\n0-1\n")
    (tmp_path / "rev").write_text("0-0\n\n1-0\n")  # target first: 1-0 is source 0, target 1
    forward, reverse = (LinkFile(tmp_path / name, False, swap, "-", "-") for name, swap in FILES)
    assert symmetrize_files(forward, reverse, "intersection") == "0-0\n\n0-1\n"
    (tmp_path / "short").write_text("0-0\n")
    with pytest.raises(UserError, match=r"has 3 lines but .*short has 1"):
        symmetrize_files(forward, LinkFile(tmp_path / "short", False, False, "-", "-"), "union")
