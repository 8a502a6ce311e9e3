"""Config loading: strict keys and types, dotted overrides, cross-field checks, YAML round trips."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nmt.config import (
    Config,
    ModelConfig,
    apply_override,
    from_dict,
    load_config,
    replace,
    save_config,
    to_dict,
)
from nmt.errors import ConfigError, UserError


def load_yaml(tmp_path: Path, text: str, overrides: list[str] | None = None) -> Config:
    path = tmp_path / "experiment.yaml"
    path.write_text(text, encoding="utf-8")
    return load_config(path, overrides)


def config_error(raw: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as info:
        from_dict(Config, raw)
    return str(info.value)


def test_config_error_is_a_user_error() -> None:
    assert issubclass(ConfigError, UserError)  # the CLI turns both into one line and exit code 2


def test_defaults_without_a_file() -> None:
    cfg = load_config(None)
    assert cfg == Config()
    assert cfg.model.type == "transformer" and cfg.train.betas == (0.9, 0.98)


def test_unknown_key_suggests_the_close_match() -> None:
    message = config_error({"model": {"d_modle": 64}})
    assert "unknown key 'model.d_modle'" in message
    assert "did you mean 'model.d_model'?" in message


def test_unknown_key_without_a_close_match_lists_the_valid_keys() -> None:
    message = config_error({"train": {"xyzzy": 1}})
    assert "unknown key 'train.xyzzy'" in message
    assert "valid keys:" in message and "lr" in message and "warmup_steps" in message


def test_unknown_section_suggests_the_close_match() -> None:
    message = config_error({"modle": {"d_model": 64}})
    assert "unknown key 'modle'" in message and "did you mean 'model'?" in message


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"model": {"heads": "8"}}, "model.heads='8' is not a int"),
        ({"model": {"heads": True}}, "model.heads=True is not a int"),  # YAML `true` is no number
        ({"data": {"src_lang": 5}}, "data.src_lang=5 is not a str"),
        ({"train": {"amp": "no way"}}, "train.amp='no way' is not a bool"),
        ({"train": {"betas": [0.9]}}, "train.betas=[0.9] is not a list of 2 values"),
        ({"train": {"betas": [0.9, "x"]}}, "train.betas[1]='x' is not a float"),
        ({"model": 5}, "section 'model' must be a mapping"),
    ],
)
def test_wrong_types_name_the_key_and_value(raw: dict[str, Any], expected: str) -> None:
    assert expected in config_error(raw)


def test_float_written_without_a_dot_explains_the_yaml_rule(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_yaml(tmp_path, "train:\n  lr: 3e-4\n")  # PyYAML reads this as the string '3e-4'
    message = str(info.value)
    assert "train.lr='3e-4' is not a float" in message and "write floats with a dot" in message


@pytest.mark.parametrize(
    ("raw", "allowed"),
    [
        ({"model": {"type": "foo"}}, "'transformer', 'rnn-bahdanau', 'rnn-luong'"),
        ({"model": {"luong_score": "bar"}}, "'dot', 'general', 'concat'"),
        ({"train": {"device": "tpu"}}, "'auto', 'cpu', 'cuda'"),
    ],
)
def test_literal_violations_list_the_allowed_values(raw: dict[str, Any], allowed: str) -> None:
    message = config_error(raw)
    ((section, fields),) = raw.items()
    ((key, value),) = fields.items()
    assert f"{section}.{key}={value!r}; expected one of {allowed}" in message


def test_int_is_accepted_for_float_and_lists_become_tuples(tmp_path: Path) -> None:
    cfg = load_yaml(tmp_path, "train:\n  lr: 1\n  betas: [0, 0.98]\nmodel:\n  dropout: 0\n")
    assert cfg.train.lr == 1.0 and type(cfg.train.lr) is float
    assert cfg.train.betas == (0.0, 0.98) and type(cfg.train.betas[0]) is float
    assert type(cfg.model.dropout) is float


def test_empty_sections_and_null_optionals_keep_the_defaults(tmp_path: Path) -> None:
    cfg = load_yaml(tmp_path, "model:\ndata:\n  dir: null\n")
    assert cfg.model == ModelConfig() and cfg.data.dir is None


def test_overrides_set_nested_values_over_the_file(tmp_path: Path) -> None:
    cfg = load_yaml(
        tmp_path,
        "train:\n  lr: 0.1\n  max_steps: 7\n",
        ["train.lr=3.0e-4", "model.type=rnn-luong", "data.dir=corpus/de-en", "train.betas=[0.8, 0.9]"],
    )
    assert cfg.train.lr == pytest.approx(3.0e-4)
    assert cfg.train.max_steps == 7  # untouched keys of an overridden section stay
    assert cfg.model.type == "rnn-luong" and cfg.data.dir == "corpus/de-en"
    assert cfg.train.betas == (0.8, 0.9)


def test_overrides_create_missing_sections() -> None:
    raw: dict[str, Any] = {}
    apply_override(raw, "search.beam_size=3")
    apply_override(raw, "search.batch_size = 16")
    assert raw == {"search": {"beam_size": 3, "batch_size": 16}}
    assert load_config(None, ["search.beam_size=3"]).search.beam_size == 3


def test_override_into_an_empty_section_of_the_file(tmp_path: Path) -> None:
    cfg = load_yaml(tmp_path, "model:\ntrain:\n  lr: 0.5\n", ["model.type=rnn-bahdanau"])
    assert cfg.model.type == "rnn-bahdanau" and cfg.train.lr == 0.5


def test_override_with_empty_value_means_null() -> None:
    assert load_config(None, ["data.dir=corpus", "data.dir="]).data.dir is None


@pytest.mark.parametrize("override", ["train.lr", "=3.0", "  =1"])
def test_override_without_key_and_value_is_an_error(override: str) -> None:
    with pytest.raises(ConfigError, match="is not KEY=VALUE"):
        load_config(None, [override])


def test_override_typo_fails_like_a_typo_in_the_file() -> None:
    with pytest.raises(ConfigError, match=r"unknown key 'train\.lrr'; did you mean 'train\.lr'\?"):
        load_config(None, ["train.lrr=3.0e-4"])
    with pytest.raises(ConfigError, match="write floats with a dot"):
        load_config(None, ["train.lr=3e-4"])


def test_override_below_a_value_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="'lr' is not a section"):
        load_yaml(tmp_path, "train:\n  lr: 0.1\n", ["train.lr.x=1"])


def test_d_model_must_divide_by_heads_for_the_transformer() -> None:
    with pytest.raises(ConfigError, match=r"model\.d_model=10 must be divisible by model\.heads=3"):
        load_config(None, ["model.d_model=10", "model.heads=3"])
    assert (
        load_config(None, ["model.type=rnn-luong", "model.d_model=10", "model.heads=3"]).model.d_model == 10
    )


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("model.heads=0", "model.heads=0 must be at least 1"),
        ("model.dropout=1.0", "model.dropout=1.0 must be in [0, 1)"),
        ("train.batch_tokens=0", "train.batch_tokens=0 must be at least 1"),
        ("train.pad_to_multiple=0", "train.pad_to_multiple=0 must be at least 1"),
        ("train.lr=0.0", "train.lr=0.0 must be positive"),
        ("search.batch_size=0", "search.batch_size=0 must be at least 1"),
        ("search.beam_size=0", "search.beam_size=0 must be at least 1"),
        ("tokenizer.max_sentences=50", "tokenizer.max_sentences=50 must be 0 (all) or over 100"),
        ("train.max_shapes=0", "train.max_shapes=0 must be at least 1"),
        ("train.max_shapes=2000", "train.max_shapes=2000 must be at most 1024"),
        ("train.static_shapes=always", "train.static_shapes='always'; expected bool or 'auto'"),
    ],
)
def test_out_of_range_values_are_config_errors(override: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(None, [override])
    assert expected in str(info.value)


def test_compile_and_cuda_graphs_are_alternatives() -> None:
    with pytest.raises(ConfigError, match=r"train\.compile and train\.cuda_graphs are alternatives"):
        load_config(None, ["train.compile=true", "train.cuda_graphs=true"])
    assert load_config(None, ["train.static_shapes=true"]).train.static_shapes is True
    assert load_config(None).train.static_shapes == "auto"


def test_save_then_load_gives_the_same_config(tmp_path: Path) -> None:
    original = replace(
        load_config(None, ["model.type=rnn-luong", "model.luong_score=dot", "data.dir=corpus"]),
        train={"lr": 3.0e-4, "betas": (0.85, 0.95), "max_time": 12.5},
        tokenizer={"joint": False, "vocab_size": 123},
        data={"src_lang": "yes", "test": None},  # a string YAML would otherwise read as a bool
    )
    path = tmp_path / "saved.yaml"
    save_config(original, path)
    loaded = load_config(path)
    assert loaded == original
    assert to_dict(loaded)["train"]["betas"] == [0.85, 0.95]  # YAML-friendly lists


def test_missing_config_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "missing.yaml")


@pytest.mark.parametrize("text", ["train: [unclosed\n", "model:\n  type: rnn\n bad indent: 1\n"])
def test_invalid_yaml_is_a_config_error(tmp_path: Path, text: str) -> None:
    with pytest.raises(ConfigError, match="is not valid YAML"):
        load_yaml(tmp_path, text)


@pytest.mark.parametrize("overrides", [[], ["train.lr=1.0"]])
def test_a_file_that_is_not_a_mapping_is_a_config_error(tmp_path: Path, overrides: list[str]) -> None:
    with pytest.raises(ConfigError, match="mapping"):
        load_yaml(tmp_path, "- data\n- model\n", overrides)
