"""The `train.alignment` section: what it needs, the layer and heads the model has, the RNNs' one attention,
paths made absolute, a round trip through YAML."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nmt.config.schema import Config, with_absolute_paths
from nmt.config.yaml_file import from_dict, to_dict
from nmt.errors import ConfigError

TRANSFORMER = {"decoder_layers": 3, "transformer": {"heads": 4}}
RNN = {"type": "rnn-luong", "decoder_layers": 2}


def config(alignment: dict[str, Any], model: dict[str, Any] = TRANSFORMER) -> Config:
    return from_dict(Config, {"model": model, "train": {"alignment": alignment}})


def error(alignment: dict[str, Any], model: dict[str, Any] = TRANSFORMER) -> str:
    with pytest.raises(ConfigError) as info:
        config(alignment, model)
    return str(info.value)


def test_defaults_supervise_the_penultimate_layer() -> None:
    align = config({"links": "train.links"}).train.alignment
    assert align is not None and (align.weight, align.heads, align.full_context) == (0.05, 1, False)
    assert align.decoder_layer(3) == 1 and align.decoder_layer(1) == 0  # a one-layer decoder: its only layer
    assert config({"links": "x", "layer": -1}).train.alignment.decoder_layer(3) == 2  # type: ignore[union-attr]
    assert Config().train.alignment is None  # absent: no guided alignment, no AER


def test_the_section_needs_links_or_a_gold_set() -> None:
    assert "needs links" in error({"weight": 0.1})
    assert "set one of them" in error({"links": "x", "shift": True, "full_context": True})
    assert "go together" in error({"gold_src": "a", "gold_links": "c"})
    assert config({"gold_src": "a", "gold_tgt": "b", "gold_links": "c"}).train.alignment is not None


@pytest.mark.parametrize(
    ("alignment", "fragment"),
    [
        ({"layer": 3}, "train.alignment.layer=3 is not a layer of the 3-layer decoder"),
        ({"layer": -4}, "use 0 to 2, or -1 to -3"),
        ({"heads": 5}, "train.alignment.heads=5 exceeds model.transformer.heads=4"),
        ({"heads": 0}, "train.alignment.heads=0 must be at least 1"),
        ({"weight": -0.1}, "train.alignment.weight=-0.1 must be"),
    ],
)
def test_settings_the_model_lacks(alignment: dict[str, Any], fragment: str) -> None:
    assert fragment in error({"links": "x", **alignment})


@pytest.mark.parametrize("setting", [{"layer": 0}, {"heads": 2}, {"full_context": True}])
def test_the_rnns_supervise_their_one_attention(setting: dict[str, Any]) -> None:
    assert "applies to the Transformer" in error({"links": "x", **setting}, RNN)
    assert config({"links": "x"}, RNN).train.alignment is not None


def test_paths_become_absolute_and_the_section_round_trips(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    cfg = with_absolute_paths(
        config({"links": "train.links", "gold_src": "g.src", "gold_tgt": "g.tgt", "gold_links": "g.al"})
    )
    align = cfg.train.alignment
    assert (
        align is not None
        and align.links == str(tmp_path / "train.links")
        and align.gold_links == str(tmp_path / "g.al")
    )
    assert from_dict(Config, to_dict(cfg)) == cfg
