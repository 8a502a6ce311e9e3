"""Adversarial input through the CLI (issue 14): each class of bad input ends in one line `nmt: error: …`,
exit code 2, no traceback and nothing half-written."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import assert_one_line_error, run_cli

# --- 3. config values that pass the type checks but cannot work ------------------------------------------


@pytest.mark.parametrize(
    ("override", "fragments"),
    [
        ("train.lr=.nan", ["train.lr=nan", "finite"]),
        ("train.lr=.inf", ["train.lr=inf", "finite"]),
        ("train.betas=[1.5, 0.98]", ["train.betas[0]=1.5", "[0.0, 1.0)"]),
        ("train.label_smoothing=1.5", ["train.label_smoothing=1.5"]),
        ("train.seed=-1", ["train.seed=-1"]),
        ("train.weight_decay=-0.1", ["train.weight_decay=-0.1"]),
        ("search.beam_size=100000", ["search.beam_size=100000"]),
        ("model.ff_dim=10000000000", ["1,300,000,019,584 parameters", "GiB"]),
        ("model.d_model=1000000000000000000000", ["model"]),
    ],
)
def test_out_of_range_config_values_are_one_line(
    override: str, fragments: list[str], tiny: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    assert_one_line_error(run_cli("train", str(tiny), "--out", str(run), "--set", override), *fragments)
    assert not run.exists()


def _write_config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "hostile.yaml"
    path.write_text(text)
    return path


def test_a_section_given_twice_is_an_error(tmp_path: Path) -> None:
    text = "train: {lr: 1.0e-3}\nmodel: {d_model: 32, heads: 2}\ntrain: {seed: 3}\n"
    config = _write_config(tmp_path, text)
    assert_one_line_error(run_cli("train", str(config)), "'train' appears twice", "line 3")


# --- 4. YAML that is not a plain document -----------------------------------------------------------------

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
        ("model.d_model=!custom 3", "!custom"),
        ("train.lr={a: 1, a: 2}", "appears twice"),
    ],
)
def test_override_with_a_yaml_error_is_one_line(tiny: Path, override: str, fragment: str) -> None:
    assert_one_line_error(run_cli("train", str(tiny), "--set", override), f"override '{override}'", fragment)
