"""docs/extending.md stays true: every file its tables name exists and holds every name cited beside it."""

import re

import pytest

from tests.conftest import ROOT

PAGE = ROOT / "docs" / "extending.md"
ROW = re.compile(r"^\| `([^`|]+)` \| (`[^|]+`) \|", re.MULTILINE)
CODE = re.compile(r"`([^`]+)`")


def cited() -> list[tuple[str, str]]:
    """(file, name) for every name cited beside every file in the page's tables."""
    pairs = []
    for path, names in ROW.findall(PAGE.read_text(encoding="utf-8")):
        pairs.extend((path, name) for name in CODE.findall(names))
    return pairs


def test_the_page_cites_files_and_names() -> None:
    assert len({path for path, _ in cited()}) >= 12 and len(cited()) >= 40


@pytest.mark.parametrize(("path", "name"), cited(), ids=lambda value: value)
def test_every_cited_name_is_in_its_file(path: str, name: str) -> None:
    file = ROOT / path
    assert file.is_file(), f"docs/extending.md names {path}, which does not exist"
    text = file.read_text(encoding="utf-8")
    assert re.search(rf"\b{re.escape(name)}\b", text), f"docs/extending.md cites {name} in {path}: not there"
