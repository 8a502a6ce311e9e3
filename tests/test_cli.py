"""End to end through the CLI: train → evaluate → translate → plot-attention, and one-line errors."""

import json
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli


def test_training_writes_a_complete_run_directory(trained_run: Path) -> None:
    for name in ("config.yaml", "spm.model", "best.pt", "last.pt", "metrics.jsonl"):
        assert (trained_run / name).is_file(), name
    records = [json.loads(line) for line in (trained_run / "metrics.jsonl").read_text().splitlines()]
    train_losses = [r["loss"] for r in records if r["kind"] == "train"]
    assert train_losses[-1] < 0.5 * train_losses[0]
    assert [r["step"] for r in records if r["kind"] == "valid"] == [150, 300]


def test_evaluate_scores_far_above_chance(trained_run: Path, tmp_path: Path) -> None:
    report = tmp_path / "scores.json"
    code, out, err = run_cli(
        "evaluate", str(trained_run), "--split", "test", "--beam-size", "3", "--json", str(report)
    )
    assert code == 0, err
    scores = json.loads(report.read_text())
    assert scores["bleu"] > 40, scores
    assert scores["bleu_signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a")
    assert "chrF" in out and "BLEU" in out
    assert len(Path(scores["hypotheses"]).read_text().splitlines()) == 100


def test_translate_keeps_lines_aligned(trained_run: Path, corpus: Path, tmp_path: Path) -> None:
    sources = (corpus / "test.src").read_text().splitlines()[:3]
    lines = [sources[0], "", "   ", sources[1], sources[2]]
    code, out, err = run_cli("translate", str(trained_run), "--beam-size", "1", input="\n".join(lines) + "\n")
    assert code == 0, err
    outputs = out.split("\n")[:-1]
    assert len(outputs) == 5 and outputs[1] == "" and outputs[2] == ""
    references = (corpus / "test.tgt").read_text().splitlines()[:3]
    matches = sum(o == r for o, r in zip([outputs[0], outputs[3], outputs[4]], references, strict=True))
    assert matches >= 1


def test_translate_file_to_file_with_beam(trained_run: Path, corpus: Path, tmp_path: Path) -> None:
    out_file = tmp_path / "hyp.txt"
    code, _, err = run_cli(
        "translate",
        str(trained_run),
        "--input",
        str(corpus / "test.src"),
        "--output",
        str(out_file),
        "--beam-size",
        "4",
        "--batch-size",
        "7",
    )
    assert code == 0, err
    assert len(out_file.read_text().splitlines()) == 100


@pytest.mark.parametrize(
    ("suffix", "extra"),
    [
        (".png", []),
        (".svg", []),
        (".pdf", []),
        (".png", ["--all-heads", "--layer", "0"]),
        (".png", ["--head", "1"]),
    ],
)
def test_plot_attention_writes_an_image(
    trained_run: Path, corpus: Path, tmp_path: Path, suffix: str, extra: list[str]
) -> None:
    image = tmp_path / f"attention{suffix}"
    sentence = (corpus / "test.src").read_text().splitlines()[0]
    code, _, err = run_cli(
        "plot-attention", str(trained_run), "--text", sentence, "--out", str(image), *extra
    )
    assert code == 0, err
    assert image.stat().st_size > 1000


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["translate", "no/such/run"], "does not exist"),
        (["plot-attention", "RUN", "--text", "x", "--out", "a.gif"], ".png, .svg or .pdf"),
        (
            ["plot-attention", "RUN", "--text", "kaka", "--out", "a.png", "--layer", "7"],
            "--layer 7 is out of range",
        ),
        (["plot-attention", "RUN", "--text", "kaka", "--out", "a.png", "--head", "x"], "--head x"),
        (["evaluate", "RUN", "--split", "train"], "expected valid or test"),
        (["evaluate", "RUN", "--src", "only-src.txt"], "--src and --ref go together"),
        (["train", "no-such-config.yaml"], "does not exist"),
        (
            ["train", str(ROOT / "configs" / "tiny-transformer.yaml"), "--set", "model.heads=three"],
            "is not a int",
        ),
        (
            ["train", str(ROOT / "configs" / "tiny-transformer.yaml"), "--set", "model.typo=1"],
            "unknown key 'model.typo'",
        ),
    ],
)
def test_user_errors_are_one_line_with_exit_code_2(trained_run: Path, args: list[str], message: str) -> None:
    args = [str(trained_run) if a == "RUN" else a for a in args]
    code, out, err = run_cli(*args)
    assert code == 2
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err + out


def test_training_into_a_finished_run_refuses(trained_run: Path, corpus: Path) -> None:
    code, _, err = run_cli(
        "train",
        str(ROOT / "configs" / "tiny-transformer.yaml"),
        "--data",
        str(corpus),
        "--out",
        str(trained_run),
        "--max-steps",
        "1",
    )
    assert code == 2 and "--resume" in err


def test_python_dash_m_runs_the_same_cli() -> None:
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", "nmt", "--help"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0 and "plot-attention" in result.stdout


@pytest.mark.parametrize(
    ("config", "overrides"),
    [("tiny-rnn-bahdanau.yaml", []), ("tiny-rnn-luong.yaml", ["--set", "model.luong_score=dot"])],
)
def test_rnn_models_train_translate_and_plot_end_to_end(
    corpus: Path, tmp_path: Path, config: str, overrides: list[str]
) -> None:
    run_dir = tmp_path / "run"
    code, _, err = run_cli(
        "train", str(ROOT / "configs" / config), "--data", str(corpus), "--out", str(run_dir),
        "--device", "cpu",
        "--max-steps", "250", "--max-time", "0", "--set", "train.eval_every=250", *overrides,
    )  # fmt: skip
    assert code == 0, err
    report = tmp_path / "scores.json"
    code, _, err = run_cli(
        "evaluate", str(run_dir), "--split", "test", "--beam-size", "3", "--json", str(report)
    )
    assert code == 0, err
    assert json.loads(report.read_text())["bleu"] > 40
    image = tmp_path / "attention.png"
    sentence = (corpus / "test.src").read_text().splitlines()[0]
    code, _, err = run_cli("plot-attention", str(run_dir), "--text", sentence, "--out", str(image))
    assert code == 0 and image.stat().st_size > 1000, err
