"""The data.terminology section: read from YAML with its defaults, its links made absolute, and refused beside
guided alignment's links (which align the words annotation changes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nmt.config.schema import with_absolute_paths
from nmt.config.yaml_file import load_config
from nmt.errors import ConfigError
from tests.conftest import ROOT

CONFIG = ROOT / "configs" / "tiny-transformer.yaml"


def test_the_section_reads_with_its_defaults_and_absolute_links(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    cfg = load_config(CONFIG, ["data.terminology.links=train.links", "data.terminology.probability=0.5"])
    assert cfg.data.terminology is not None
    assert cfg.data.terminology.markers == ("｟term｠", "｟trans｠", "｟/term｠")
    terms = with_absolute_paths(cfg).data.terminology
    assert terms is not None and terms.links == str(ROOT / "train.links") and terms.probability == 0.5
    assert load_config(CONFIG, []).data.terminology is None


def test_an_unknown_key_names_the_section() -> None:
    with pytest.raises(ConfigError, match=r"unknown key 'data.terminology.probabilty'"):
        load_config(CONFIG, ["data.terminology.probabilty=0.5"])


def test_terminology_beside_guided_alignment_links_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"data.terminology writes terms into the training sources"):
        load_config(CONFIG, ["data.terminology.probability=0.5", f"train.alignment.links={tmp_path}/l"])
