"""Config loading: strict keys and types, dotted overrides, cross-field checks, YAML round trips."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from nmt.config.schema import Config, replace
from nmt.config.sections import SearchConfig
from nmt.config.yaml_file import (
    apply_override,
    from_dict,
    load_config,
    load_saved_config,
    save_config,
    saved_model_config,
    to_dict,
)
from nmt.decode.exported import exported_search
from nmt.errors import ConfigError, UserError
from nmt.models.config import ModelConfig, RNNConfig, TransformerConfig
from tests.conftest import assert_one_line_error, run_cli


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
    assert "did you mean 'model.transformer.d_model'?" in message  # found in the family's section


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
        ({"model": {"transformer": {"heads": "8"}}}, "model.transformer.heads='8' is not an integer"),
        (
            {"model": {"transformer": {"heads": True}}},
            "model.transformer.heads=True is not an integer",
        ),  # no number
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


def test_a_device_is_auto_cpu_cuda_or_a_numbered_gpu() -> None:
    expected = "train.device='tpu'; expected auto, cpu, cuda or cuda:N"
    assert config_error({"train": {"device": "tpu"}}).endswith(expected)
    assert load_config(None, ["train.device=cuda:1"]).train.device == "cuda:1"


@pytest.mark.parametrize(
    ("raw", "allowed"),
    [
        ({"model": {"type": "foo"}}, "'transformer', 'rnn-bahdanau', 'rnn-luong'"),
        ({"model": {"rnn": {"luong_score": "bar"}}}, "'dot', 'general', 'concat'"),
    ],
)
def test_literal_violations_list_the_allowed_values(raw: dict[str, Any], allowed: str) -> None:
    message = config_error(raw)
    name, value = "", raw
    while isinstance(value, dict):  # the one key of each level
        ((key, value),) = value.items()
        name = f"{name}.{key}" if name else key
    assert f"{name}={value!r}; expected one of {allowed}" in message


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
    apply_override(raw, "search.batch_tokens = 16")
    assert raw == {"search": {"beam_size": 3, "batch_tokens": 16}}
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
    with pytest.raises(
        ConfigError, match=r"model\.transformer\.d_model=10 must be divisible by model\.transformer\.heads=3"
    ):
        load_config(None, ["model.transformer.d_model=10", "model.transformer.heads=3"])
    rnn = ["model.type=rnn-luong", "model.rnn.embedding_size=10"]
    assert load_config(None, rnn).model.rnn.embedding_size == 10  # an RNN has no heads to divide by
    with pytest.raises(ConfigError, match=r"model\.transformer\.heads is a Transformer setting"):
        load_config(None, [*rnn, "model.transformer.heads=3"])


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("model.transformer.heads=0", "model.transformer.heads=0 must be at least 1"),
        ("model.dropout=1.0", "model.dropout=1.0 must be in [0, 1)"),
        ("train.batch_tokens=0", "train.batch_tokens=0 must be at least 1"),
        ("train.pad_to_multiple=0", "train.pad_to_multiple=0 must be at least 1"),
        ("train.lr=0.0", "train.lr=0.0 must be positive"),
        ("search.batch_tokens=0", "search.batch_tokens=0 must be at least 1"),
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
        load_config(None, ["model.type=rnn-luong", "model.rnn.luong_score=dot", "data.dir=corpus"]),
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


NESTED_RNN = """\
model:
  type: rnn-luong
  encoder_layers: 2
  dropout: 0.2
  rnn: {cell: lstm, embedding_size: 64, hidden_size: 48, luong_score: dot}
"""
FLAT_RNN = """\
model:
  type: rnn-luong
  encoder_layers: 2
  rnn_cell: lstm
  d_model: 64
"""


def test_nested_model_sections_load(tmp_path: Path) -> None:
    model = load_yaml(tmp_path, NESTED_RNN).model
    assert model.rnn == RNNConfig(cell="lstm", embedding_size=64, hidden_size=48, luong_score="dot")
    assert model.transformer is None and model.encoder_layers == 2 and model.dropout == 0.2
    transformer = load_config(None, ["model.transformer.d_model=64", "model.transformer.heads=4"]).model
    assert transformer.transformer == TransformerConfig(d_model=64, heads=4) and transformer.rnn is None


def test_the_family_settings_are_the_section_of_the_model_type() -> None:
    rnn, transformer = ModelConfig(type="rnn-luong"), ModelConfig()
    assert rnn.rnn_settings is rnn.rnn and transformer.transformer_settings is transformer.transformer
    with pytest.raises(ValueError, match=r"model\.type=rnn-luong has no model\.transformer section"):
        _ = rnn.transformer_settings
    with pytest.raises(ValueError, match=r"model\.type=transformer has no model\.rnn section"):
        _ = transformer.rnn_settings


@pytest.mark.parametrize(
    ("text", "overrides", "named"),
    [
        (NESTED_RNN + "  transformer: {heads: 4}\n", [], "model.transformer.heads is a Transformer setting"),
        (NESTED_RNN, ["model.transformer.ff_dim=64"], "model.transformer.ff_dim is a Transformer setting"),
        (
            "model: {transformer: {d_model: 64}}\n",
            ["model.type=rnn-bahdanau"],
            "model.transformer.d_model is",
        ),
        (
            "model: {rnn: {cell: lstm}}\n",
            [],
            "model.rnn.cell is an RNN setting but model.type is transformer",
        ),
    ],
)
def test_a_key_of_the_other_family_is_an_error_naming_it(
    tmp_path: Path, text: str, overrides: list[str], named: str
) -> None:
    with pytest.raises(ConfigError) as info:
        load_yaml(tmp_path, text, overrides)
    assert named in str(info.value) and "remove it" in str(info.value)
    assert len(str(info.value).splitlines()) == 1


def test_the_other_section_may_be_dropped_with_an_empty_override(tmp_path: Path) -> None:
    model = load_yaml(
        tmp_path, "model: {transformer: {d_model: 64}}\n", ["model.type=rnn-luong", "model.transformer="]
    )
    assert model.model.rnn == RNNConfig() and model.model.transformer is None


def test_unknown_keys_are_looked_for_in_the_sections() -> None:
    assert "did you mean 'model.rnn.hidden_size'?" in config_error({"model": {"hiden_size": 8}})
    assert "did you mean 'model.transformer.ff_dim'?" in config_error({"model": {"ffdim": 8}})


@pytest.mark.parametrize(
    ("raw", "suggested"),
    [
        ({"train": {"learning_rate": 1.0}}, "train.lr"),
        ({"train": {"batch_size": 4096}}, "train.batch_tokens"),
        ({"train": {"epochs": 3}}, "train.max_epochs"),
        ({"model": {"dropout_rate": 0.1}}, "model.dropout"),
        ({"model": {"transformer": {"hidden_size": 8}}}, "model.transformer.d_model"),
        ({"model": {"type": "rnn-luong", "rnn": {"embed_dim": 8}}}, "model.rnn.embedding_size"),
    ],
)
def test_other_toolkits_names_suggest_ours(raw: dict, suggested: str) -> None:
    """Names too far from ours for difflib (learning_rate → lr) come from a table of known aliases."""
    assert f"did you mean '{suggested}'?" in config_error(raw)


def test_search_batch_size_is_refused_in_one_line_naming_search_batch_tokens(tmp_path: Path) -> None:
    """`search.batch_size` (sentences) became `search.batch_tokens` (sentences × longest source × beam): in a
    config, an override and a run directory's config.yaml, it is an unknown key naming the new one."""
    expected = r"unknown key 'search.batch_size'; did you mean 'search.batch_tokens'\?"
    with pytest.raises(ConfigError, match=expected) as info:
        load_yaml(tmp_path, "search:\n  beam_size: 5\n  batch_size: 100\n")
    assert len(str(info.value).splitlines()) == 1
    with pytest.raises(ConfigError, match=expected):
        load_config(None, ["search.batch_size=100"])
    saved = tmp_path / "run" / "config.yaml"
    saved.parent.mkdir()
    saved.write_text("search: {batch_size: 100}\n")
    with pytest.raises(UserError, match=expected):
        load_saved_config(saved)


def test_an_export_holding_search_batch_size_is_one_line_naming_the_fix(tmp_path: Path) -> None:
    """An export's nmt-export.json written before search.batch_tokens: one line, not a traceback."""
    search = {**dataclasses.asdict(SearchConfig()), "batch_size": 100}
    del search["batch_tokens"]
    expected = r"nmt-export.json: unknown key 'search.batch_size'; did you mean 'search.batch_tokens'\?"
    with pytest.raises(UserError, match=expected) as info:
        exported_search(tmp_path, {"search": search})
    assert str(info.value).endswith("export the run again with this nmt")
    assert exported_search(tmp_path, {"search": dataclasses.asdict(SearchConfig())}) == SearchConfig()


def test_flat_model_keys_are_unknown_keys_that_name_their_section(tmp_path: Path) -> None:
    """The flat model keys of a layout nmt never released (`model.d_model`) are unknown keys like any other:
    one line naming the key of the family's section."""
    with pytest.raises(ConfigError, match=r"unknown key 'model.rnn_cell'; did you mean 'model.rnn.cell'\?"):
        load_yaml(tmp_path, FLAT_RNN)
    with pytest.raises(
        ConfigError, match=r"unknown key 'model.d_model'; did you mean 'model.transformer.d_model'"
    ):
        load_config(None, ["model.d_model=32"])
    with pytest.raises(ConfigError, match=r"unknown key 'model.rnn_cell'"):
        saved_model_config({"type": "rnn-luong", "rnn_cell": "lstm"})


@pytest.mark.parametrize(
    "model", [{}, {"type": "rnn-bahdanau", "transformer": None, "rnn": {"cell": "lstm", "bridge": "zero"}}]
)
def test_to_dict_then_from_dict_gives_the_same_config(model: dict[str, Any]) -> None:
    cfg = replace(Config(), model=model)
    raw = to_dict(cfg)
    assert from_dict(Config, raw) == cfg
    assert raw["model"].keys() & {"transformer", "rnn"} == {cfg.model.family}  # no empty other section


def test_replace_merges_nested_sections() -> None:
    cfg = replace(Config(), model={"dropout": 0.0, "transformer": {"d_model": 32, "heads": 2}})
    assert cfg.model.transformer == TransformerConfig(d_model=32, heads=2) and cfg.model.dropout == 0.0
    cfg = replace(cfg, model={"transformer": {"ff_dim": 64}})
    assert cfg.model.transformer == TransformerConfig(d_model=32, heads=2, ff_dim=64)
    rnn = replace(cfg, model={"type": "rnn-luong", "transformer": None, "rnn": {"hidden_size": 8}})
    assert rnn.model.rnn == RNNConfig(hidden_size=8) and rnn.model.transformer is None


def test_the_max_positions_check_applies_to_transformers_only() -> None:
    with pytest.raises(ConfigError, match=r"model\.transformer\.max_positions=1024 is too small"):
        load_config(None, ["data.max_len=2000"])
    assert load_config(None, ["model.type=rnn-luong", "data.max_len=2000"]).model.position_limit is None
    with pytest.raises(ConfigError, match=r"model\.rnn\.hidden_size=0 must be at least 1"):
        load_config(None, ["model.type=rnn-luong", "model.rnn.hidden_size=0"])


# --- through `nmt train`: one line, before any work -----------------------------------------------------


def _write_config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "hostile.yaml"
    path.write_text(text)
    return path


def test_a_section_given_twice_is_an_error(tmp_path: Path) -> None:
    text = "train: {lr: 1.0e-3}\nmodel: {transformer: {d_model: 32, heads: 2}}\ntrain: {seed: 3}\n"
    config = _write_config(tmp_path, text)
    assert_one_line_error(run_cli("train", str(config)), "'train' appears twice", "line 3")


ALIAS_BOMB = 'a: &a ["x","x","x","x","x","x","x","x","x"]\n' + "".join(
    f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True)
)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (ALIAS_BOMB, "aliases"),
        ("train: {lr: &x 1.0e-3, clip_norm: *x}\n", "aliases"),
        ("train: " + "[" * 50_000 + "]" * 50_000 + "\n", "nested over"),
        ("train:\n  lr: !!python/object/apply:os.system [echo hi]\n", "constructor"),
        ("train: {lr: 1.0e-3, lr: 2.0e-3}\n", "'lr' appears twice"),
    ],
)
def test_yaml_that_is_not_a_plain_document_is_one_line(tmp_path: Path, text: str, fragment: str) -> None:
    assert_one_line_error(run_cli("train", str(_write_config(tmp_path, text))), "not valid YAML", fragment)


@pytest.mark.parametrize(
    ("override", "fragment"),
    [
        ("train.lr=[", "expected"),
        ("train.lr=!!python/name:os.system", "constructor"),
        ("train.lr=*a", "aliases"),
        ("model.transformer.d_model=!custom 3", "!custom"),
        ("train.lr={a: 1, a: 2}", "appears twice"),
    ],
)
def test_override_with_a_yaml_error_is_one_line(tiny: Path, override: str, fragment: str) -> None:
    assert_one_line_error(run_cli("train", str(tiny), "--set", override), f"override '{override}'", fragment)


@pytest.mark.parametrize(
    ("override", "fragments"),
    [
        (
            "model.dmodel=64",
            ["unknown key 'model.dmodel'", "did you mean 'model.transformer.d_model'", "valid keys:"],
        ),
        ("train.xyz=1", ["unknown key 'train.xyz'", "valid keys:", "batch_tokens", "warmup_steps"]),
        ("train.batch_tokens=lots", ["train.batch_tokens='lots'; expected int or 'auto'"]),
        ("train.lr=[1]", ["train.lr=[1] is not a float"]),
        ("model.type=lstm", ["model.type='lstm'", "'transformer', 'rnn-bahdanau', 'rnn-luong'"]),
        ("train.max_steps=-1", ["train.max_steps=-1 must be 0 (no limit) or positive"]),
        ("tokenizer.vocab_size=0", ["tokenizer.vocab_size=0"]),
        (
            "model.transformer.max_positions=16",
            ["model.transformer.max_positions=16 is too small for data.max_len=64"],
        ),
        ("train.lr=.nan", ["train.lr=nan", "finite"]),
        ("train.lr=.inf", ["train.lr=inf", "finite"]),
        ("train.betas=[1.5, 0.98]", ["train.betas[0]=1.5", "[0.0, 1.0)"]),
        ("train.label_smoothing=1.5", ["train.label_smoothing=1.5"]),
        ("train.seed=-1", ["train.seed=-1"]),
        ("train.weight_decay=-0.1", ["train.weight_decay=-0.1"]),
        ("search.beam_size=100000", ["search.beam_size=100000", "256"]),
        ("model.transformer.ff_dim=10000000000", ["1,300,000,019,584 parameters", "GiB"]),
        ("model.transformer.d_model=1000000000000000000000", ["model"]),
    ],
)
def test_a_bad_config_value_is_one_line_before_any_work(
    override: str, fragments: list[str], tiny: Path, tmp_path: Path
) -> None:
    """Mistyped, unknown and out-of-range values, and models too large to allocate: refused before the data
    is read (no --data given) and before the run directory is made."""
    run = tmp_path / "run"
    assert_one_line_error(run_cli("train", str(tiny), "--out", str(run), "--set", override), *fragments)
    assert not run.exists()


def test_luong_settings_of_another_value_are_one_line(tiny: Path) -> None:
    overrides = ["model.type=rnn-luong", "model.transformer=", "model.rnn.luong_score=bilinear"]
    sets = [arg for override in overrides for arg in ("--set", override)]
    assert_one_line_error(
        run_cli("train", str(tiny), *sets), "model.rnn.luong_score='bilinear'", "'dot', 'general', 'concat'"
    )
