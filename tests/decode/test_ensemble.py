"""Ensembles: several runs decode as one model through the decoding contract."""

from dataclasses import replace
from pathlib import Path

import pytest
import torch

from nmt.decode.trained_run import load_run
from nmt.decode.translator import TorchTranslator
from nmt.models.ensemble import Ensemble
from tests.conftest import NO_REPORT, assert_one_line_error, run_cli, train_args, trained_args


def bleu(*run_dirs: Path) -> float:
    code, out, err = run_cli("evaluate", *map(str, run_dirs), "--beam-size", "2", "--device", "cpu")
    assert code == 0, err
    return float(next(line for line in out.splitlines() if line.startswith("BLEU")).split()[2])


@pytest.mark.slow
def test_an_ensemble_scores_at_least_its_weaker_member(
    trained_run: Path, corpus: Path, tmp_path: Path
) -> None:
    """The session's tiny Transformer and one trained the same way from another seed."""
    other = tmp_path / "seed7"
    code, _, err = run_cli(*trained_args(corpus, other, "train.seed=7"))
    assert code == 0, err
    assert bleu(trained_run, other) >= min(bleu(trained_run), bleu(other))


def test_an_ensemble_of_one_translates_like_the_model(trained_run: Path, corpus: Path) -> None:
    run = load_run(trained_run, torch.device("cpu"))
    sentences = (corpus / "test.src").read_text().splitlines()[:20]
    one = TorchTranslator.of_run(replace(run, model=Ensemble([run.model]).eval()))
    assert one.translate(sentences) == TorchTranslator.of_run(run).translate(sentences)
    text = "".join(line + "\n" for line in sentences)
    single = run_cli("translate", str(trained_run), "--beam-size", "3", input=text)
    twice = run_cli("translate", str(trained_run), str(trained_run), "--beam-size", "3", input=text)
    assert single[0] == twice[0] == 0 and single[1] == twice[1]  # the mean of equal distributions


def test_runs_with_other_vocabularies_are_refused(
    trained_run: Path, tiny: Path, corpus: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    code, _, err = run_cli(
        *train_args(tiny, corpus, other, "--max-steps", "2", "--set", "train.eval_every=2", *NO_REPORT)
    )
    assert code == 0, err
    result = run_cli("translate", str(trained_run), str(other), input="x\n")
    assert_one_line_error(result, str(trained_run), str(other), "different vocabularies")
