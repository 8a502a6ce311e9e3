"""What every translated page must be, for the tests of the markup and of the server and for the benchmarks
that score pages (benchmarks/markup_bench.py, benchmarks/running_text.py): well-formed (every element closed
in order), with every tag of the input kept, as html.parser reads it (`read_tags`), independently of the
reader nmt/decode/markup.py translates with."""

from __future__ import annotations

import re
from collections import Counter
from html.parser import HTMLParser

from nmt.decode.markup import VOID


class TagReader(HTMLParser):
    """A page's tags as html.parser reads them: start and end tags counted, an end tag that does not close
    the innermost open element a problem, the text, and the characters of the text each element with an
    `id` wraps."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.starts: Counter[str] = Counter()
        self.ends: Counter[str] = Counter()
        self.open: list[tuple[str, str | None, int]] = []  # name, id, where its text starts
        self.problems: list[str] = []
        self.text = ""
        self.spans: dict[str, tuple[int, int]] = {}  # id → characters of the text [start, end)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.starts[tag] += 1
        if tag not in VOID:
            self.open.append((tag, dict(attrs).get("id"), len(self.text)))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.starts[tag] += 1

    def handle_endtag(self, tag: str) -> None:
        self.ends[tag] += 1
        if not self.open or self.open[-1][0] != tag:
            self.problems.append(f"</{tag}> closes {self.open[-1][0] if self.open else 'nothing'}")
            return
        _, name, start = self.open.pop()
        if name is not None:
            self.spans[name] = (start, len(self.text))

    def handle_data(self, data: str) -> None:
        self.text += data

    @property
    def words(self) -> list[str]:
        return self.text.split()

    def word_span(self, name: str) -> tuple[int, int] | None:
        """The words (first, last) that the element with id `name` wraps; None when it wraps none."""
        start, end = self.spans.get(name, (0, 0))
        inside = [
            k for k, m in enumerate(re.finditer(r"\S+", self.text)) if m.start() < end and m.end() > start
        ]
        return (inside[0], inside[-1]) if inside else None


def read_tags(page: str) -> TagReader:
    reader = TagReader()
    reader.feed(page)
    reader.close()
    return reader


def keeps_every_tag(source: str, written: str) -> bool:
    """Whether `written` is well-formed (every element closed, in order) with the start and end tags of
    `source`."""
    found, given = read_tags(written), read_tags(source)
    return not found.problems and not found.open and (found.starts, found.ends) == (given.starts, given.ends)


def assert_well_formed_with_every_tag(source: str, translated: str) -> None:
    """`translated` closes every element it opens, in order, and has every start tag `source` has (a tag
    left open in `source` is closed in `translated`)."""
    found = read_tags(translated)
    assert not found.problems and not found.open, (found.problems, found.open, translated)
    assert found.starts == read_tags(source).starts, translated


def words(page: str) -> list[str]:
    """The words of a page's text, its tags taken out."""
    return read_tags(page).words
