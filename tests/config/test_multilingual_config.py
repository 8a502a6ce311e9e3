"""The data.multilingual section: how a multilingual config reads, its round trips, its one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from nmt.config.multilingual import Direction
from nmt.config.schema import Config
from nmt.config.yaml_file import load_config, load_saved_config, save_config
from nmt.errors import ConfigError
from tests.conftest import MULTILINGUAL_CONFIG, assert_one_line_error, run_cli

DIRECTIONS = "data.multilingual.directions=[en-de, de-en, en-fr, fr-en, en-cs, cs-en]"


def test_a_multilingual_config_reads_its_directions_and_languages() -> None:
    cfg = load_config(None, [DIRECTIONS, "data.multilingual.weights={en-cs: 2}"])
    ml = cfg.data.multilingual
    assert ml is not None
    assert cfg.data.directions.directions[:2] == (Direction("en", "de"), Direction("de", "en"))
    assert cfg.data.directions.languages == ("cs", "de", "en", "fr")
    assert ml.weights == {"en-cs": 2.0}  # an integer weight is a fine float
    run = cfg.data.directions
    assert run.weight(Direction("en", "cs")) == 2.0 and run.weight(Direction("cs", "en")) == 1.0
    assert (run.tags, len(run.directions)) == ("decoder", 6)
    assert (ml.temperature, ml.tags) == (1.0, "decoder")  # decoder tags: the better of three seeds


def test_the_single_pair_config_stays_the_default() -> None:
    cfg = Config()
    assert cfg.data.directions.directions == (Direction("de", "en"),) and not cfg.data.directions.tagged
    assert cfg.data.multilingual is None and (cfg.data.src_lang, cfg.data.tgt_lang) == ("de", "en")


def test_a_multilingual_config_survives_the_run_directory(tmp_path: Path) -> None:
    cfg = load_config(
        None, [DIRECTIONS, "data.multilingual.weights={en-cs: 2.5}", "data.multilingual.temperature=5"]
    )
    save_config(cfg, tmp_path / "config.yaml")
    assert load_config(tmp_path / "config.yaml") == cfg


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (["data.multilingual.directions=[en-de, de-en, en-de]"], "lists en-de twice"),
        (["data.multilingual.directions=[en-en]"], "'en-en' translates en into itself"),
        (["data.multilingual.directions=[en_de]"], "'en_de' is not SRC-TGT"),
        (["data.multilingual.directions=[pt-BR-en]"], "'pt-BR-en' is not SRC-TGT"),
        (["data.multilingual.directions=en-de"], "data.multilingual.directions='en-de' is not a list"),
        (["data.multilingual.directions=[]"], "data.multilingual.directions is empty"),
        (["data.multilingual.temperature=1.0"], "data.multilingual.directions is empty"),
        ([DIRECTIONS, "data.multilingual.weights={de-fr: 1.0}"], "weights names de-fr, which is not in"),
        ([DIRECTIONS, "data.multilingual.weights={en-de: 0}"], "weights.en-de=0.0 must be a positive"),
        ([DIRECTIONS, "data.multilingual.weights=[1, 2]"], "weights=[1, 2] is not a mapping"),
        ([DIRECTIONS, "data.multilingual.temperature=0.0"], "temperature=0.0 must be positive"),
        ([DIRECTIONS, "data.multilingual.tags=source"], "expected one of 'encoder', 'decoder'"),
        ([DIRECTIONS, "data.multilingual.direction=[en-de]"], "did you mean 'data.multilingual.directions'"),
        ([DIRECTIONS, "data.src_lang=fr"], "data.src_lang: a multilingual run takes its languages from"),
        ([DIRECTIONS, "data.src_lang=de"], "data.src_lang: a multilingual run takes its languages from"),
        (["data.tgt_lang=en", DIRECTIONS], "data.tgt_lang: a multilingual run takes its languages from"),
        ([DIRECTIONS, "data.src_lang=de", "data.tgt_lang=en"], "data.src_lang and data.tgt_lang: a multi"),
        ([DIRECTIONS, "tokenizer.joint=false"], "a multilingual run needs one joint vocabulary"),
    ],
)
def test_bad_multilingual_settings_are_config_errors(overrides: list[str], expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(None, overrides)
    assert expected in str(info.value)


def test_a_saved_multilingual_config_names_no_pair_and_older_ones_still_load(tmp_path: Path) -> None:
    cfg = load_config(None, [DIRECTIONS])
    save_config(cfg, tmp_path / "config.yaml")
    assert "src_lang" not in (tmp_path / "config.yaml").read_text(encoding="utf-8")
    older = tmp_path / "older.yaml"  # as earlier versions wrote it: the pair's defaults beside the section
    older.write_text(
        "data:\n  src_lang: de\n  tgt_lang: en\n  multilingual:\n    directions: [en-de, de-en]\n",
        encoding="utf-8",
    )
    assert load_saved_config(older).data.directions.languages == ("de", "en")
    with pytest.raises(ConfigError, match=r"data\.src_lang and data\.tgt_lang: a multilingual run"):
        load_config(older)


def test_a_bad_direction_is_one_line_on_the_command_line(tiny: Path, tmp_path: Path) -> None:
    result = run_cli(
        "train", str(tiny), "--out", str(tmp_path / "run"), "--set", "data.multilingual.directions=[xa-xa]"
    )
    assert_one_line_error(result, "translates xa into itself")


def test_a_language_flag_beside_a_multilingual_config_is_one_line(tmp_path: Path) -> None:
    config = tmp_path / "multilingual.yaml"
    config.write_text(MULTILINGUAL_CONFIG)
    result = run_cli("train", str(config), "--out", str(tmp_path / "run"), "--src-lang", "de")  # the default
    assert_one_line_error(result, "data.src_lang: a multilingual run takes its languages from")


def test_a_bilingual_config_file_made_multilingual_by_an_override_drops_its_pair(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    bilingual = tmp_path / "bilingual.yaml"  # as configs/multi30k-cpu-transformer.yaml names its one pair
    bilingual.write_text("data:\n  src_lang: de\n  tgt_lang: en\n", encoding="utf-8")
    with caplog.at_level("INFO", logger="nmt"):
        cfg = load_config(bilingual, [DIRECTIONS])
    assert cfg.data.directions.languages == ("cs", "de", "en", "fr")
    assert "data.src_lang and data.tgt_lang of" in caplog.text
    assert "give way to data.multilingual" in caplog.text
    with pytest.raises(ConfigError, match=r"data\.src_lang: a multilingual run"):  # named again: refused
        load_config(bilingual, [DIRECTIONS, "data.src_lang=fr"])
