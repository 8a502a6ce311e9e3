"""A multilingual run's target-language vocabularies (nmt/data/target_vocabulary.py), kept in its run
directory, and search held to them (nmt/rules/target_vocabulary.py): every zero-shot output in its target
language's vocabulary by default, off by an option; a trained direction untouched unless asked. Both tag
placements, on the tiny runs of tests/conftest.py (xa, xb, xc: each language a lexicon of its own)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import torch

from nmt.data.target_vocabulary import FILE, shared_piece
from nmt.decode.trained_run import load_run
from nmt.decode.translator import TorchTranslator
from nmt.errors import UserError
from tests.conftest import run_cli


@pytest.fixture(params=["encoder", "decoder"])
def run(request: pytest.FixtureRequest) -> Path:
    return request.getfixturevalue("multilingual_run" if request.param == "encoder" else "decoder_tag_run")


def vocabularies(run: Path) -> dict[str, set[int]]:
    return {lang: set(ids) for lang, ids in json.loads((run / FILE).read_text()).items()}


def translator(run: Path, vocabularies: dict[str, list[int]] | None = None) -> TorchTranslator:
    """The run's translator; with `vocabularies`, those instead of the run's."""
    found = TorchTranslator.of_run(load_run(run, torch.device("cpu")))
    if vocabularies is not None:
        found.vocabularies = vocabularies
    return found


def lines(run: Path, lang: str) -> list[str]:
    return (run.parent / "data" / f"test.{lang}").read_text().splitlines()


def output_ids(translator: TorchTranslator, texts: list[str]) -> set[int]:
    """The subwords of the translations of `texts`, each at least 3 (a 10-update model may stop at once)."""
    translated = translator.with_search(min_length=3).translated(texts)
    found = {token for one in translated for token in one.best.tokens}
    assert found
    return found


@pytest.mark.parametrize(
    ("piece", "shared"),
    [("▁", True), ("▁,", True), (".", True), ("▁12", True), ("▁$", True), ("▁a", False), ("é", False)],
)
def test_punctuation_symbols_and_digits_are_every_language_s(piece: str, shared: bool) -> None:
    assert shared_piece(piece) is shared


def test_a_run_keeps_each_target_language_s_vocabulary(run: Path) -> None:
    found = vocabularies(run)
    assert sorted(found) == ["xa", "xb", "xc"]  # the targets of xa-xb, xb-xa, xa-xc, xc-xa
    tokenizer = load_run(run, torch.device("cpu")).tokenizers.tgt
    for lang, ids in found.items():
        assert {0, 1, 2, 3} <= ids
        seen = {
            i
            for line in (run.parent / "data" / f"train.{lang}").read_text().splitlines()[:50]
            for i in tokenizer.encode([line])[0]
        }
        assert seen <= ids
    assert found["xb"] - found["xc"] and found["xc"] - found["xb"]  # each language writes its own words


def test_zero_shot_outputs_stay_in_the_target_vocabulary(run: Path) -> None:
    """xb → xc was never trained: every output subword is in xc's vocabulary, by the command line as by the
    library; --no-zero-shot-vocabulary searches as an engine that knows no vocabulary does."""
    texts, xc = lines(run, "xb"), vocabularies(run)["xc"]
    zero_shot = translator(run).toward("xc", "xb", zero_shot=True)
    assert output_ids(zero_shot, texts) <= xc
    flags = ["--src-lang", "xb", "--tgt-lang", "xc", "--zero-shot"]
    code, out, err = run_cli("translate", str(run), "--device", "cpu", *flags, input="\n".join(texts) + "\n")
    assert code == 0, err
    assert out.splitlines() == zero_shot.translate(texts)
    code, out, err = run_cli(
        "translate", str(run), *flags, "--no-zero-shot-vocabulary", input="\n".join(texts) + "\n"
    )
    assert code == 0, err
    assert out.splitlines() == translator(run, {}).toward("xc", "xb", zero_shot=True).with_search(
        zero_shot_vocabulary=False
    ).translate(texts)


def test_a_vocabulary_that_forbids_more_holds_the_output_to_it(multilingual_run: Path) -> None:
    """Held to a few of xc's words, zero-shot xb → xc writes those words only."""
    run = multilingual_run
    few = sorted(vocabularies(run)["xc"])[:12]
    held = translator(run, {"xc": few}).toward("xc", "xb", zero_shot=True)
    assert output_ids(held, lines(run, "xb")) <= set(few)


def test_a_trained_direction_is_unchanged_unless_asked(run: Path) -> None:
    texts = lines(run, "xa")
    trained = translator(run, {}).toward("xc", "xa")  # no vocabulary is needed: none applies
    assert trained.translate(texts) == translator(run).toward("xc", "xa").translate(texts)
    asked = translator(run).toward("xc", "xa").with_search(target_vocabulary=True)
    assert output_ids(asked, texts) <= vocabularies(run)["xc"]


def test_without_the_vocabulary_zero_shot_warns_and_asking_is_one_line(
    multilingual_run: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A translator that knows no vocabulary of the target (an export, a run of an earlier nmt) searches a
    zero-shot direction without it, saying so, as `--no-zero-shot-vocabulary` would; asked for one in a
    trained direction, it names the option that does without it."""
    zero_shot = translator(multilingual_run, {}).toward("xc", "xb", zero_shot=True)
    with caplog.at_level(logging.WARNING):
        found = zero_shot.translate(["a b"])
    assert "has no vocabulary of xc here" in caplog.text
    assert found == zero_shot.with_search(zero_shot_vocabulary=False).translate(["a b"])
    trained = translator(multilingual_run, {}).toward("xc", "xa").with_search(target_vocabulary=True)
    with pytest.raises(UserError, match="add --no-target-vocabulary"):
        trained.translate(["a b"])
