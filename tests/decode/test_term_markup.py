"""A glossary through an HTML page: each term is written into its block's line where no tag begins or ends
inside it, and the links of the words written in count as the term's own, so the tag around a source term
goes around its target term; `nmt translate --format html --glossary` translates a page."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from nmt.data.glossary import Term, TermFinder
from nmt.data.terminology import Annotation, TermWriter, annotated_line
from nmt.decode.markup import read_page, translate_page
from tests.conftest import run_cli

MARKERS = ("｟term｠", "｟trans｠", "｟/term｠")


def writer(*terms: Term) -> TermWriter:
    return TermWriter(TermFinder(terms, str), MARKERS)


def copying(lines: list[str]) -> list[tuple[str, Sequence[tuple[int, int]]]]:
    """A model that follows its annotation perfectly: each word kept in order (the target term in place of
    its source term, the markers dropped), linked to the word it copies."""
    found = []
    for line in lines:
        words, kept, links, in_term = line.split(), [], [], False
        for i, word in enumerate(words):
            in_term = (in_term or word == MARKERS[0]) and word != MARKERS[1]
            if word in MARKERS or in_term:
                continue
            links.append((i, len(kept)))
            kept.append(word)
        found.append((" ".join(kept), links))
    return found


def test_a_term_inside_a_tag_comes_out_inside_it() -> None:
    page = "<p>Ich fahre <b>Fahrrad</b> heute.</p>"
    terms = writer(Term("Fahrrad", "bicycle"))
    assert translate_page(page, copying, terms) == "<p>Ich fahre <b>bicycle</b> heute.</p>"
    assert translate_page(page, copying) == page  # no glossary: the copying model keeps the page


def test_a_term_a_tag_cuts_is_left_as_it_is() -> None:
    page = "<p>Mit der <i>Deutsche</i> Bahn und dem <b>Fahr</b>rad.</p>"
    terms = writer(Term("Deutsche Bahn", "German Rail"), Term("Fahrrad", "bicycle"))
    (line,) = read_page(page).lines
    assert terms.line(line, read_page(page).boundaries()[0]).text == line  # neither term written in
    assert terms.line(line).text != line  # found, without the tags
    assert translate_page(page, copying, terms) == translate_page(page, copying)  # as without a glossary


def test_a_term_holding_a_whole_tag_keeps_it() -> None:
    page = "<p>Die <b>Deutsche Bahn</b> fährt.</p>"
    terms = writer(Term("Deutsche Bahn", "German Rail"))
    assert translate_page(page, copying, terms) == "<p>Die <b>German Rail</b> fährt.</p>"


def test_the_words_written_in_link_to_the_term() -> None:
    written = annotated_line("Ich (Fahrrad).", [Annotation(5, 12, "a bike")], MARKERS)
    assert written.text == "Ich (｟term｠ Fahrrad ｟trans｠ a bike ｟/term｠)."
    assert written.origins == [(0,), (1,), (1,), (), (1,), (1,), (1,)]
    assert written.plain_links([(0, 0), (3, 1), (4, 1), (5, 2), (9, 3)]) == [(0, 0), (1, 1), (1, 2)]


def test_translate_a_page_with_a_glossary(terminology_run: Path, labelled: Path, tmp_path: Path) -> None:
    words = labelled.joinpath("valid.src").read_text().split()[:4]
    page, glossary = tmp_path / "page.html", tmp_path / "terms.tsv"
    page.write_text(f"<p>{words[0]} <b>{words[1]}</b> {words[2]} {words[3]}</p>\n")
    glossary.write_text(f"{words[1]}\tZZZ\n")
    code, out, err = run_cli(
        *("translate", str(terminology_run), "--format", "html", "--device", "cpu"),
        *("--input", str(page), "--glossary", str(glossary)),
    )
    assert code == 0, err
    assert out.startswith("<p>") and out.count("<b>") == out.count("</b>") == 1, out
    assert not any(marker in out for marker in MARKERS)
