"""docs/extending.md stays true: every file its tables name exists and holds every name cited beside it, and
its example search part runs."""

import re
import sys
import types

import pytest

from nmt.config import sections
from nmt.decode.search import SearchOptions, search
from nmt.device.capture import Recorder, emulating
from nmt.errors import ConfigError
from nmt.rules import registry
from nmt.rules.beam import Greedy
from tests.conftest import ROOT
from tests.decode.test_search import random_model
from tests.rules.test_parts import sources

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


def example_part(monkeypatch: pytest.MonkeyPatch) -> type:
    """The processor the page's example block defines, run as a module of its own."""
    text = PAGE.read_text(encoding="utf-8")
    block = text.split("<!-- example:", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    module = types.ModuleType("repetition_penalty")
    monkeypatch.setitem(sys.modules, module.__name__, module)  # where dataclasses look up its names
    exec(compile(block, str(PAGE), "exec"), module.__dict__)  # the page's code, as written
    return module.RepetitionPenalty


def test_the_page_s_example_part_runs_once_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    """The example is one file and one line of PARTS: registered, its setting is a key of the search config
    (in range or refused), and a search with it repeats no token where it repeated them before — also when
    its steps are replayed from captured graphs."""
    part = example_part(monkeypatch)
    monkeypatch.setattr(registry, "PARTS", (*registry.PARTS, part))
    config = sections._search_config()
    settings = config(repetition_penalty=100.0)
    with pytest.raises(ConfigError, match=r"search.repetition_penalty=0.5 must be in"):
        config(repetition_penalty=0.5)
    (processor,) = [p for p in registry.processors_of(settings) if isinstance(p, part)]
    model, (src, mask) = random_model("transformer", 7), sources()
    free = search(model, src, mask, Greedy(), SearchOptions(max_len_a=1.0, max_len_b=4))
    penalised = SearchOptions(max_len_a=1.0, max_len_b=4, processors=(processor,), cuda_graphs=True)
    found = search(model, src, mask, Greedy(), penalised)
    assert any(len(set(h[0].tokens)) < len(h[0].tokens) for h in free)
    assert all(len(set(h[0].tokens)) == len(h[0].tokens) for h in found)
    recorder = Recorder()
    with emulating(recorder):
        replayed = search(model, src, mask, Greedy(), penalised)
    assert [h[0].tokens for h in replayed] == [h[0].tokens for h in found] and recorder.captures
