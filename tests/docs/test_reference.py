"""The generated reference pages (docs/reference/cli.md, config.md) are what scripts/docs_reference.py writes
from today's code: a changed option, help text, config key or default without regenerated pages fails here."""

import pytest

from scripts import docs_reference  # scripts/ has no __init__.py: a namespace package
from tests.conftest import ROOT

REGENERATE = "python scripts/docs_reference.py"


@pytest.mark.parametrize("name", ["cli.md", "config.md"])
def test_the_committed_reference_is_up_to_date(name: str) -> None:
    page = docs_reference.PAGES[name]()
    committed = (ROOT / "docs" / "reference" / name).read_text(encoding="utf-8")
    assert committed == page, f"docs/reference/{name} is out of date: run `{REGENERATE}` and commit it"


def test_every_command_option_and_key_is_in_the_reference() -> None:
    pages = docs_reference.PAGES
    cli, config = pages["cli.md"](), pages["config.md"]()
    for fragment in ("## `nmt train`", "## `nmt serve`", "`--max-time <float range>`", "`[default: auto]`"):
        assert fragment in cli, fragment
    for fragment in (
        "## `model.transformer`",
        "| `luong_score` | `general` | `dot`, `general`, `concat` |",
        "| `max_shapes` | `32` | an integer in [1, 1024] |",
    ):
        assert fragment in config, fragment


def test_help_text_is_shown_as_written() -> None:
    markdown = docs_reference.markdown
    assert markdown("train.<lang> and a ** b, `x <y>`") == "train.&lt;lang&gt; and a \\*\\* b, `x <y>`"
