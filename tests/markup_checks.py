"""What every translated page must be, for the tests of the markup and of the server: well-formed (every
element closed in order), with every tag of the input kept. The page is read as the markup benchmark reads
it (benchmarks/markup_bench.py `read_tags`)."""

from __future__ import annotations

from benchmarks.markup_bench import read_tags


def assert_well_formed_with_every_tag(source: str, translated: str) -> None:
    """`translated` closes every element it opens, in order, and has every start tag `source` has (a tag
    left open in `source` is closed in `translated`)."""
    found = read_tags(translated)
    assert not found.problems and not found.open, (found.problems, found.open, translated)
    assert found.starts == read_tags(source).starts, translated


def words(page: str) -> list[str]:
    """The words of a page's text, its tags taken out."""
    return read_tags(page).words
