"""The shipped configs explain themselves: every key has a comment saying what it does (and why this value),
and every one of them loads."""

import re
from pathlib import Path

import pytest

from nmt.config.yaml_file import load_config
from tests.conftest import ROOT

CONFIGS = sorted((ROOT / "configs").glob("*.yaml"))
KEY = re.compile(r"^\s*[A-Za-z_]+:")


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.name)
def test_every_key_has_a_comment(config: Path) -> None:
    lines = config.read_text(encoding="utf-8").splitlines()
    bare = [line for line in lines if KEY.match(line) and " # " not in line]
    assert not bare, f"{config.name}: keys without a comment: {bare}"


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.name)
def test_every_shipped_config_loads(config: Path) -> None:
    load_config(config)
