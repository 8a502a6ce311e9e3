"""What every translated page must be, for the tests of the markup and of the server: well-formed (every
element closed in order), with every tag of the input kept."""

from __future__ import annotations

from collections import Counter
from html.parser import HTMLParser

from nmt.decode.markup import VOID


class _Checker(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.open: list[str] = []
        self.tags: Counter[str] = Counter()
        self.problems: list[str] = []
        self.text = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags[tag] += 1
        if tag not in VOID:
            self.open.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags[tag] += 1

    def handle_endtag(self, tag: str) -> None:
        if not self.open or self.open[-1] != tag:
            self.problems.append(f"</{tag}> closes {self.open[-1:] or 'nothing'}")
        else:
            self.open.pop()

    def handle_data(self, data: str) -> None:
        self.text += data


def read(page: str) -> _Checker:
    checker = _Checker()
    checker.feed(page)
    checker.close()
    return checker


def assert_well_formed_with_every_tag(source: str, translated: str) -> None:
    """`translated` closes every element it opens, in order, and has every start tag `source` has (a tag
    left open in `source` is closed in `translated`)."""
    found = read(translated)
    assert not found.problems and not found.open, (found.problems, found.open, translated)
    assert found.tags == read(source).tags, translated


def words(page: str) -> list[str]:
    """The words of a page's text, its tags taken out."""
    return read(page).text.split()
