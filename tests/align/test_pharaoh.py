"""Pharaoh files: sure and possible links, 1-based and reversed files, and one-line errors naming the line."""

from pathlib import Path

import pytest

from nmt.align.pharaoh import SentenceLinks, check_links, parse_links, pharaoh_text, read_links
from nmt.errors import UserError


def test_sure_and_possible_links() -> None:
    links = parse_links("0-1 2p3 4?5", "x")
    assert links.sure == {(0, 1)}
    assert links.possible == {(0, 1), (2, 3), (4, 5)}  # every link is possible, the sure ones included


def test_one_based_and_reversed() -> None:
    assert parse_links("1-2 3p1", "x", one_based=True).possible == {(0, 1), (2, 0)}
    assert parse_links("1-2", "x", reverse=True).possible == {(2, 1)}
    assert parse_links("1-2", "x", one_based=True, reverse=True).possible == {(1, 0)}


def test_read_keeps_empty_lines_and_the_last_line_without_newline(tmp_path: Path) -> None:
    path = tmp_path / "a.txt"
    path.write_text("0-0 1-1\n\n2-2")
    assert [sorted(line.possible) for line in read_links(path)] == [[(0, 0), (1, 1)], [], [(2, 2)]]


def test_write_then_read(tmp_path: Path) -> None:
    path = tmp_path / "out.txt"
    path.write_text(pharaoh_text([{(2, 1), (0, 0)}, set()]))
    assert path.read_text() == "0-0 2-1\n\n"
    assert [line.possible for line in read_links(path)] == [{(0, 0), (2, 1)}, set()]


@pytest.mark.parametrize(
    ("text", "one_based", "fragments"),
    [
        ("0-0\n1-x\n", False, ["line 2", "'1-x' is not a link"]),
        ("0-0\n1--2\n", False, ["line 2", "'1--2'"]),
        ("1-1 0-2\n", True, ["line 1", "index 0", "1-based"]),
    ],
)
def test_bad_links_are_one_line_errors_naming_the_line(
    tmp_path: Path, text: str, one_based: bool, fragments: list[str]
) -> None:
    path = tmp_path / "bad.txt"
    path.write_text(text)
    with pytest.raises(UserError) as err:
        read_links(path, one_based=one_based)
    assert str(path) in str(err.value) and "\n" not in str(err.value)
    assert all(fragment in str(err.value) for fragment in fragments), err.value


def test_links_must_fit_the_text(tmp_path: Path) -> None:
    path = tmp_path / "links.txt"
    links = [SentenceLinks(frozenset(), frozenset({(0, 0)})), SentenceLinks(frozenset(), frozenset({(2, 1)}))]
    check_links(links, path, [(1, 1), (3, 2)], "text.txt")  # fits
    with pytest.raises(UserError, match=r"links.txt line 2: link 2-1 .* 2 source and 2 target words"):
        check_links(links, path, [(1, 1), (2, 2)], "text.txt")
    with pytest.raises(UserError, match=r"links.txt has 2 lines but text.txt has 3"):
        check_links(links, path, [(1, 1), (3, 2), (1, 1)], "text.txt")


def test_a_missing_file_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="cannot read"):
        read_links(tmp_path / "absent.txt")
