"""End to end through the CLI: train → evaluate → translate → plot-attention, and one-line errors."""

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch
import typer

from nmt.cli import app
from nmt.config.yaml_file import load_config
from nmt.data.corpus import SPLIT_NAMES
from nmt.decode.trained_run import load_run
from nmt.decode.translator import TorchTranslator
from nmt.evaluate.scores import score
from nmt.models.build import build_model
from tests.conftest import NO_REPORT, ROOT, assert_one_line_error, run_cli


def test_training_writes_a_complete_run_directory(trained_run: Path) -> None:
    for name in ("config.yaml", "spm.model", "best.pt", "last.pt", "metrics.jsonl"):
        assert (trained_run / name).is_file(), name
    records = [json.loads(line) for line in (trained_run / "metrics.jsonl").read_text().splitlines()]
    train_losses = [r["loss"] for r in records if r["kind"] == "train"]
    assert train_losses[-1] < 0.5 * train_losses[0]
    assert [r["step"] for r in records if r["kind"] == "valid"] == [150, 300]


def test_evaluate_scores_far_above_chance(trained_run: Path, corpus: Path, tmp_path: Path) -> None:
    """The session's tiny Transformer (`trained_args`) scores 84 to 87 BLEU above its untrained self (BLEU
    ~0), depending on the seed; a margin of 30 holds on any machine."""
    report = tmp_path / "scores.json"
    code, out, err = run_cli(
        "evaluate", str(trained_run), "--split", "test", "--beam-size", "3", "--json", str(report)
    )
    assert code == 0, err
    scores = json.loads(report.read_text())
    assert scores["bleu"] > untrained_bleu(trained_run, corpus) + 30, scores
    assert scores["metrics"]["BLEU"]["signature"].startswith("nrefs:1|bs:1000|seed:12345|case:mixed|eff:no")
    assert list(scores["metrics"]) == ["BLEU", "chrF2", "chrF2++", "TER"]
    assert "chrF2++" in out and "BLEU" in out and "μ =" in out
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
        "--batch-tokens",
        "100",
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
        (".png", ["--scale", "fixed"]),
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
        (["plot-attention", "RUN", "--text", "kaka", "--out", "a.png", "--scale", "x"], "--scale x"),
        (["evaluate", "RUN", "--split", "train"], "expected valid or test"),
        (["evaluate", "RUN", "--src", "only-src.txt"], "--src and --ref go together"),
        (["train", "no-such-config.yaml"], "does not exist"),
        (
            [
                "train",
                str(ROOT / "configs" / "tiny-transformer.yaml"),
                "--set",
                "model.transformer.heads=three",
            ],
            "is not an integer",
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


def test_every_command_has_help_and_a_bare_nmt_shows_it() -> None:
    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    for command in commands:
        code, out, _ = run_cli(command, "--help")
        assert code == 0 and re.search(rf"Usage: \S+ {command} \[OPTIONS\]", out), out
    code, out, err = run_cli()
    assert code == 2 and not err and all(command in out for command in commands), out + err
    assert "cuda:N" in run_cli("translate", "--help")[1]


@pytest.mark.parametrize("command", ["train", "benchmark"])
def test_help_of_data_names_every_file_name_a_corpus_directory_may_have(command: str) -> None:
    shown = " ".join(re.sub("[│─╭╮╰╯]", " ", run_cli(command, "--help")[1]).split())  # unwrapped
    for stems in SPLIT_NAMES.values():
        for stem in stems:
            assert f"{stem}.<lang>" in shown, (stem, shown)


@pytest.mark.parametrize(
    ("overrides", "fragments"),
    [
        (["--set", "train.lr", "1.0e-3"], ["--set train.lr 1.0e-3", "write --set KEY=VALUE", "lr=1.0e-3"]),
        (["--set", "train.lr=1.0e-3", "train.seed=3"], ["each override needs its own --set"]),
    ],
)
def test_a_misspelt_set_says_how_to_write_it(overrides: list[str], fragments: list[str]) -> None:
    config = str(ROOT / "configs" / "tiny-transformer.yaml")
    assert_one_line_error(run_cli("train", config, *overrides), *fragments)


def test_set_on_a_command_without_it_is_an_unknown_option(tmp_path: Path) -> None:
    assert_one_line_error(run_cli("translate", str(tmp_path), "--set", "train.lr"), "No such option: --set")


def test_python_dash_m_runs_the_same_cli() -> None:
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", "nmt", "--help"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0 and "plot-attention" in result.stdout


@pytest.mark.slow
@pytest.mark.parametrize(
    ("config", "overrides"),
    [("tiny-rnn-bahdanau.yaml", []), ("tiny-rnn-luong.yaml", ["--set", "model.rnn.luong_score=dot"])],
)
def test_rnn_models_train_translate_and_plot_end_to_end(
    corpus: Path, tmp_path: Path, config: str, overrides: list[str]
) -> None:
    """Trained for 400 steps, validated every 50 (best.pt is the best of them), an RNN scores far above its
    untrained self (BLEU ~0 on this task) on every machine: seeds and thread counts move the step where it
    learns the alignment, not whether it has by then."""
    run_dir = tmp_path / "run"
    code, _, err = run_cli(
        "train",
        str(ROOT / "configs" / config),
        "--data",
        str(corpus),
        "--out",
        str(run_dir),
        "--device",
        "cpu",
        "--max-steps",
        "400",
        "--set",
        "train.eval_every=50",
        "--set",
        "train.final_report=false",
        *overrides,
    )
    assert code == 0, err
    report = tmp_path / "scores.json"
    code, _, err = run_cli("evaluate", str(run_dir), "--beam-size", "3", "--json", str(report))
    assert code == 0, err
    trained, untrained = json.loads(report.read_text())["bleu"], untrained_bleu(run_dir, corpus)
    assert trained > untrained + 30, (untrained, trained)
    image = tmp_path / "attention.png"
    sentence = (corpus / "test.src").read_text().splitlines()[0]
    code, _, err = run_cli("plot-attention", str(run_dir), "--text", sentence, "--out", str(image))
    assert code == 0 and image.stat().st_size > 1000, err


def untrained_bleu(run_dir: Path, corpus: Path) -> float:
    """Test BLEU (beam 3) of the run's model with freshly initialised weights: the baseline training beats."""
    run = load_run(run_dir, torch.device("cpu"))
    torch.manual_seed(0)
    tokenizers = run.tokenizers
    model = build_model(
        run.cfg.model, len(tokenizers.src), len(tokenizers.tgt), tokenizers.joint, tokenizers.pad
    ).eval()
    sources = (corpus / "test.src").read_text().splitlines()
    hypotheses = TorchTranslator.of_run(replace(run, model=model)).with_search(beam_size=3).translate(sources)
    return score(hypotheses, (corpus / "test.tgt").read_text().splitlines()).bleu


def test_version() -> None:
    from nmt import __version__

    code, out, _ = run_cli("--version")
    assert code == 0 and out.strip() == f"nmt {__version__}"


def test_a_run_directory_works_from_any_working_directory(
    small_corpus: Path, tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Trained with relative paths, evaluated from elsewhere; --data points at data that moved."""
    monkeypatch.chdir(small_corpus.parent)
    code, _, err = run_cli(
        "train", str(tiny), "--data", small_corpus.name, "--out", "run", "--max-steps", "5", *NO_REPORT
    )
    assert code == 0, err
    run = small_corpus.parent / "run"
    assert load_config(run / "config.yaml").data.dir == str(small_corpus)
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli("evaluate", str(run), "--split", "test")
    assert code == 0 and "\nBLEU    = " in out, err
    moved = tmp_path / "moved"
    shutil.copytree(small_corpus, moved)
    code, out, err = run_cli("evaluate", str(run), "--split", "test", "--data", str(moved))
    assert code == 0 and "\nBLEU    = " in out, err


def test_evaluate_uses_and_names_the_checkpoint_the_run_chose(trained_run: Path, tmp_path: Path) -> None:
    chosen = json.loads((trained_run / "report.json").read_text())["checkpoint"]
    code, out, err = run_cli("evaluate", str(trained_run), "--split", "valid")
    assert code == 0, err
    assert out.splitlines()[0].startswith(f"checkpoint: {chosen}.pt (the run's choice)")
    code, out, err = run_cli("evaluate", str(trained_run), "--split", "valid", "--checkpoint", "last")
    assert code == 0 and out.splitlines()[0].startswith("checkpoint: last.pt,"), err


def test_a_missing_average_of_a_run_that_kept_no_snapshots_says_what_is_possible(trained_run: Path) -> None:
    """The run kept no checkpoints to average: `nmt average` would fail too, so the error names what works."""
    code, _, err = run_cli("evaluate", str(trained_run), "--checkpoint", "averaged")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "no checkpoints to average" in err and "--checkpoint best or last" in err
    assert "nmt average" not in err
    code, _, err = run_cli("average", str(trained_run))
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "best or last checkpoint" in err and "average fewer" not in err


def test_translate_nbest_writes_sorted_moses_blocks(trained_run: Path, corpus: Path) -> None:
    sources = (corpus / "test.src").read_text().splitlines()[:2]
    lines = [sources[0], "", sources[1]]
    code, out, err = run_cli(
        "translate", str(trained_run), "--beam-size", "4", "--nbest", "3", input="\n".join(lines) + "\n"
    )
    assert code == 0, err
    fields = [line.split(" ||| ") for line in out.splitlines()]
    assert all(len(f) == 3 for f in fields)
    blocks = {i: [float(f[2]) for f in fields if f[0] == str(i)] for i in range(3)}
    assert [int(f[0]) for f in fields] == sorted(int(f[0]) for f in fields)
    assert len(blocks[0]) == len(blocks[2]) == 3 and blocks[1] == [0.0]  # an empty line: one empty hypothesis
    assert all(scores == sorted(scores, reverse=True) for scores in blocks.values())


def test_translate_jsonl_and_scores(trained_run: Path, corpus: Path) -> None:
    source = (corpus / "test.src").read_text().splitlines()[0]
    code, out, err = run_cli(
        "translate", str(trained_run), "--nbest", "2", "--format", "jsonl", input=f"{source}\n\n"
    )
    assert code == 0, err
    records = [json.loads(line) for line in out.splitlines()]
    assert [r["line"] for r in records] == [0, 1] and len(records[0]["hypotheses"]) == 2
    assert records[1]["hypotheses"] == [{"text": "", "score": 0.0, "mean_log_prob": 0.0, "suspect": []}]
    assert all(h["mean_log_prob"] < 0 and isinstance(h["suspect"], list) for h in records[0]["hypotheses"])
    code, out, err = run_cli(
        "translate", str(trained_run), "--beam-size", "1", "--scores", input=f"{source}\n"
    )
    assert code == 0, err
    (index, text, value) = out.strip().split(" ||| ")
    assert index == "0" and text and float(value) < 0


def test_nbest_above_the_beam_size_is_one_line(trained_run: Path) -> None:
    result = run_cli("translate", str(trained_run), "--beam-size", "2", "--nbest", "3", input="x\n")
    assert_one_line_error(result, "--nbest 3 exceeds --beam-size 2")
    result = run_cli("translate", str(trained_run), "--nbest", "8", input="x\n")
    assert_one_line_error(result, "--nbest 8 exceeds search.beam_size=5 of", "config.yaml")


def _nmt(*args: str, **kwargs: object) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nmt", *args], capture_output=False, text=True, **kwargs)


@pytest.mark.slow
def test_translate_with_stdin_closed_or_stdout_full_is_one_line(trained_run: Path) -> None:
    closed = _nmt(
        "translate",
        str(trained_run),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: os.close(0),
    )
    assert_one_line_error((closed.returncode, closed.stdout, closed.stderr), "standard input is closed")
    with open("/dev/full", "w") as full:
        result = _nmt("translate", str(trained_run), input="a b\n", stdout=full, stderr=subprocess.PIPE)
    assert_one_line_error((result.returncode, "", result.stderr), "standard output", "No space left")


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["--beam-size", "0"], ["--beam-size"]),
        (["--beam-size", "1000000"], ["--beam-size", "256"]),
        (["--batch-tokens", "0"], ["--batch-tokens"]),
        (["--bogus"], ["--bogus"]),
        (["--device", "mps"], ["unknown device 'mps'"]),
        (["--device", "cuda:99"], ["cuda:99"]),
        (["--device", "meta"], ["unknown device 'meta'"]),
    ],
)
def test_translate_option_mistakes_are_one_line(
    trained_run: Path, args: list[str], fragments: list[str]
) -> None:
    assert_one_line_error(run_cli("translate", str(trained_run), *args, input="a b\n"), *fragments)


def test_a_missing_argument_is_one_line() -> None:
    assert_one_line_error(run_cli("translate"), "Missing argument", "translate --help")


@pytest.mark.parametrize(
    ("command", "args"),
    [
        ("train", ["--max-steps", "-1"]),
        ("train", ["--max-time", "-1"]),
        ("train", ["--max-epochs", "-2"]),
        ("benchmark", ["--steps", "0"]),
        ("benchmark", ["--warmup-steps", "-1"]),
        ("benchmark", ["--bleu-budget", "-5"]),
        ("benchmark", ["--bleu-target", "101"]),
    ],
)
def test_option_limits_are_checked_before_work(
    command: str, args: list[str], tiny: Path, tmp_path: Path
) -> None:
    out = ["--out", str(tmp_path / "run")] if command == "train" else []
    assert_one_line_error(run_cli(command, str(tiny), *out, *args), args[0])
    assert not (tmp_path / "run").exists()


def test_translate_sampling_is_seeded(trained_run: Path, corpus: Path) -> None:
    """--sampling draws --nbest samples a line; the same seed draws the same ones, another seed others."""
    text = "".join(line + "\n" for line in (corpus / "test.src").read_text().splitlines()[:10])
    args = ["translate", str(trained_run), "--sampling", "--temperature", "3.0", "--nbest", "3"]
    code, first, err = run_cli(*args, "--seed", "1", input=text)
    assert code == 0, err
    rows = [line.split(" ||| ") for line in first.splitlines()]
    assert [int(i) for i, _, _ in rows] == [i for i in range(10) for _ in range(3)]
    assert run_cli(*args, "--seed", "1", input=text)[1] == first
    assert run_cli(*args, "--seed", "2", input=text)[1] != first
    greedy = run_cli("translate", str(trained_run), "--beam-size", "1", input=text)[1]
    narrow = run_cli("translate", str(trained_run), "--sampling", "--top-k", "1", input=text)[1]
    assert narrow == greedy


@pytest.mark.parametrize(
    ("flags", "fragments"),
    [
        (["--top-p", "0"], ["--top-p 0.0 must be in (0.0, 1.0]"]),
        (["--temperature", "nan"], ["--temperature nan must be a finite number"]),
        (["--top-k", "5"], ["--top-k 5 applies to sampling (--sampling), not to beam search"]),
        (["--seed", "3"], ["--seed 3 applies to sampling (--sampling)"]),
        (["--sampling", "--beam-size", "4"], ["--beam-size 4 applies to beam search", "not to sampling"]),
        (["--diversity-strength", "2"], ["--diversity-strength 2.0 applies to diverse beam search"]),
        (
            ["--sampling", "--diverse-groups", "5"],
            ["--diverse-groups 5 asks for diverse beam search and --sampling for sampling", "drop one"],
        ),
        (
            ["--diverse-groups", "3", "--beam-size", "4"],
            ["--beam-size 4 is not a multiple of --diverse-groups 3"],
        ),
    ],
)
def test_a_search_option_mistake_names_the_option(
    trained_run: Path, flags: list[str], fragments: list[str]
) -> None:
    """The option as given, never the run's config.yaml (the run is not damaged); an option the search asked
    for does not read is refused, not ignored."""
    result = run_cli("translate", str(trained_run), *flags, input="ka lo\n")
    assert_one_line_error(result, *fragments)
    assert "config.yaml" not in result[2]


def test_search_options_show_their_ranges_and_help_shows_brackets() -> None:
    shown = " ".join(run_cli("translate", "--help")[1].split())
    assert (
        "--top-p <float> Sampling: draw from the smallest set of tokens" in shown and "in (0.0, 1.0]" in shown
    )
    assert "--no-repeat-ngram-size <int>" in shown and "--diverse-groups <int>" in shown
    assert "field of [i, j] pairs" in shown  # written text, not Rich markup
    evaluated = " ".join(run_cli("evaluate", "--help")[1].split())
    assert all(option in evaluated for option in ("--top-p <float>", "--min-length <int>", "--nbest <int>"))


def test_a_line_samples_the_same_output_wherever_it_stands(trained_run: Path, corpus: Path) -> None:
    """The same line and seed: the same sample alone, among others, at the end of a file, in a batch of its
    own (a budget of 1) and of many, and with the default seed (0) as with --seed 0."""
    lines = (corpus / "test.src").read_text().splitlines()[:16]
    sampled = ["translate", str(trained_run), "--sampling", "--temperature", "2.0"]
    alone = run_cli(*sampled, "--seed", "5", input=lines[7] + "\n")[1].splitlines()
    for extra in (["--batch-tokens", "1"], ["--batch-tokens", "4096"]):
        together = run_cli(*sampled, "--seed", "5", *extra, input="".join(f"{x}\n" for x in lines))[1]
        assert together.splitlines()[7] == alone[0]
    moved = "".join(f"{x}\n" for x in [*lines[8:], lines[7]])
    assert run_cli(*sampled, "--seed", "5", input=moved)[1].splitlines()[-1] == alone[0]
    default = run_cli(*sampled, input=lines[7] + "\n")[1]
    assert default == run_cli(*sampled, "--seed", "0", input=lines[7] + "\n")[1]
    assert run_cli(*sampled, "--seed", "6", input="".join(f"{x}\n" for x in lines))[1] != together
