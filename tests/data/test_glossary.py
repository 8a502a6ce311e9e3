"""Glossary files: parsing, each bad input as one line naming file and line, and finding terms in text."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest

from nmt.data.glossary import Term, TermFinder, for_direction, parse_glossary, read_glossary
from nmt.errors import UserError


def nfkc(word: str) -> str:
    return unicodedata.normalize("NFKC", word)


def finder(*lines: str) -> TermFinder:
    return TermFinder(parse_glossary(lines, "g.tsv"), nfkc)


def found(text: str, terms: TermFinder) -> list[tuple[str, str]]:
    return [(text[m.start : m.end], m.term.target) for m in terms.find(text)]


def test_entries_are_read_with_their_case_flag_and_line(tmp_path: Path) -> None:
    path = tmp_path / "g.tsv"
    path.write_bytes("\ufeffFahrrad\tbicycle\n\nDeutsche  Bahn\tDeutsche Bahn\tmatch-case\r\n".encode())
    assert read_glossary(path) == [
        Term("Fahrrad", "bicycle", False, 1),
        Term("Deutsche Bahn", "Deutsche Bahn", True, 3),
    ]


@pytest.mark.parametrize(
    ("line", "fragment"),
    [
        ("Fahrrad bicycle", "g.tsv line 2: no tab"),
        ("a\tb\tmatch-case\textra", "g.tsv line 2: 4 tab-separated columns"),
        ("  \tbicycle", "g.tsv line 2: the source term is empty"),
        ("Fahrrad\t ", "g.tsv line 2: the target term is empty"),
        ("Fahrrad\tbicycle\tcase", "g.tsv line 2: third column 'case'"),
        ("fahrrad\tbike", "g.tsv line 2: 'fahrrad' is already translated as 'bicycle' on line 1"),
    ],
)
def test_a_bad_line_is_one_error_naming_file_and_line(line: str, fragment: str) -> None:
    with pytest.raises(UserError) as error:
        parse_glossary(["Fahrrad\tbicycle", line], "g.tsv")
    assert fragment in str(error.value) and "\n" not in str(error.value)


def test_a_file_not_in_utf8_or_missing_is_one_error(tmp_path: Path) -> None:
    path = tmp_path / "latin1.tsv"
    path.write_bytes("Fahrrad\tbicycle\nStraße\tstreet\n".encode("latin-1"))
    with pytest.raises(UserError, match=r"latin1.tsv is not UTF-8 \(byte 0xdf on line 2\); save it as UTF-8"):
        read_glossary(path)
    with pytest.raises(UserError, match=r"cannot read the glossary .*absent.tsv"):
        read_glossary(tmp_path / "absent.tsv")


def test_the_same_term_twice_is_found_twice_and_case_is_ignored() -> None:
    terms = finder("Fahrrad\tbicycle")
    text = "Ein fahrrad, zwei FAHRRAD und ein Fahrradweg."
    assert found(text, terms) == [("fahrrad", "bicycle"), ("FAHRRAD", "bicycle")]  # not inside a word


def test_overlapping_terms_resolve_longest_first() -> None:
    terms = finder("New York\tNueva York", "York City Hall\tAyuntamiento de York", "Hall\tsala")
    assert found("the New York City Hall", terms) == [("York City Hall", "Ayuntamiento de York")]
    assert found("New York and its Hall", terms) == [("New York", "Nueva York"), ("Hall", "sala")]


def test_match_case_entries_need_their_case_and_win_over_others() -> None:
    terms = finder("US\tEE. UU.\tmatch-case", "us\tnosotros")
    assert found("the US and us", terms) == [("US", "EE. UU."), ("us", "nosotros")]
    assert found("Us", finder("US\tEE. UU.\tmatch-case")) == []


def test_words_are_compared_as_the_tokenizer_normalises_them() -> None:
    terms = finder("Berlin\tBerlín", "%1$s\t%1$s")
    assert found("nach Ｂｅｒｌｉｎ mit %1$s", terms) == [("Ｂｅｒｌｉｎ", "Berlín"), ("%1$s", "%1$s")]


def test_an_empty_glossary_finds_nothing() -> None:
    assert TermFinder([], nfkc).find("anything at all") == []


def test_a_direction_reads_its_own_file_when_there_is_one(tmp_path: Path) -> None:
    common, own = tmp_path / "terms.tsv", tmp_path / "terms.en-de.tsv"
    own.write_text("a\tb\n")
    assert for_direction(common, "en", "de") == own
    assert for_direction(common, "de", "en") == common
    assert for_direction(common, "", "") == common
