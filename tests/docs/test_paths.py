"""Every file, directory and script that README.md and the documentation name exists in the repository, and
none of them points outside it: a renamed config or script, or a moved page, fails here."""

import re
from pathlib import Path

import pytest

from tests.conftest import ROOT

PAGES = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").rglob("*.md"))]
REPO_PATH = re.compile(r"(?<![\w./~-])((?:configs|scripts|benchmarks|nmt|tests|docs|\.ci)/[\w./*-]*[\w*]/?)")
MODULE = re.compile(r"python -m (benchmarks(?:\.[a-z_][a-z0-9_]*)+)")  # run as a module (not NAME)
LINK = re.compile(r"\]\(([^)\s]+)\)")  # [text](target) and ![alt](target)
OUTSIDE = re.compile(r"\.\./shared|/work/|(?<![\w.])\.\./\.\.")


def named_paths(text: str) -> set[str]:
    """Repository paths a page names (`configs/…`, `scripts/….py`, `benchmarks/….py`, `nmt/…`, `docs/…`; a `*`
    is a glob), and the file of each benchmark it runs as a module (`python -m benchmarks.NAME`)."""
    modules = {match.group(1).replace(".", "/") + ".py" for match in MODULE.finditer(text)}
    return {match.group(1) for match in REPO_PATH.finditer(text)} | modules


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_named_path_exists(page: Path) -> None:
    named = named_paths(page.read_text(encoding="utf-8"))
    missing = sorted(path for path in named if not any(ROOT.glob(path)) and not (ROOT / path).exists())
    assert not missing, f"{page.relative_to(ROOT)} names paths that do not exist: {missing}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves_inside_the_repository(page: Path) -> None:
    broken = []
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue  # a web address or an anchor of the same page
        resolved = (page.parent / target.split("#")[0]).resolve()
        if not resolved.is_relative_to(ROOT) or not resolved.exists():
            broken.append(target)
    assert not broken, f"{page.relative_to(ROOT)} links to what is not in the repository: {broken}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_nothing_points_outside_the_repository(page: Path) -> None:
    found = OUTSIDE.findall(page.read_text(encoding="utf-8"))
    assert not found, f"{page.relative_to(ROOT)} refers to files outside the repository: {found}"


def test_the_path_finder_finds_paths_and_nothing_else() -> None:
    text = "Run `python scripts/seeds.py` on configs/tiny-transformer.yaml (docs/images/a.png); runs/x, nmt/"
    assert named_paths(text) == {"scripts/seeds.py", "configs/tiny-transformer.yaml", "docs/images/a.png"}
    assert named_paths("the `configs/tiny-*.yaml` files") == {"configs/tiny-*.yaml"}
    assert named_paths("`python -m benchmarks.speed_table`, tests/argos_offline/") == {
        "benchmarks/speed_table.py",
        "tests/argos_offline/",
    }
