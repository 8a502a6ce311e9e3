"""Bad input, interruptions and untrusted files, end to end through the CLI: one-line errors, nothing lost."""

import json
import os
import pickle
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

import nmt.decode.translate
from nmt.config.schema import replace
from nmt.config.yaml_file import load_config, save_config
from nmt.data.tokenizer import train_sentencepiece
from nmt.decode.search import Hypothesis
from nmt.decode.trained_run import load_run
from nmt.decode.translate import translate_ids
from nmt.models.transformer import TransformerSeq2Seq
from nmt.run.checkpoint_io import load_checkpoint
from tests.conftest import ROOT, assert_one_line_error, copy_corpus, run_cli, train_args


def assert_error_line_last(result: tuple[int, str, str], *fragments: str) -> None:
    """For errors after training started: exit code 2, the error is the last stderr line, no traceback."""
    code, out, err = result
    assert code == 2, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("nmt: error: ") and "Traceback" not in out + err, err
    assert sum("error" in line for line in err.splitlines()) == 1, err
    for fragment in fragments:
        assert fragment in last, (fragment, last)


def finite_weights(path: Path) -> bool:
    checkpoint = load_checkpoint(path)
    return all(torch.isfinite(t).all() for t in checkpoint["model"].values() if t.is_floating_point())


def train_losses(run_dir: Path) -> list[tuple[int, float]]:
    records = map(json.loads, (run_dir / "metrics.jsonl").read_text().splitlines())
    return [(r["step"], r["loss"]) for r in records if r["kind"] == "train"]


# --- corpus files -------------------------------------------------------------------------------------------


def _bad_corpus(kind: str, corpus: Path, tmp_path: Path) -> tuple[Path, list[str], list[str]]:
    """A corpus directory with one problem, the extra CLI flags and the fragments the error must name."""
    data = copy_corpus(corpus, tmp_path / "data")
    train_src, train_tgt = data / "train.src", data / "train.tgt"
    if kind == "missing directory":
        return tmp_path / "nowhere", [], [str(tmp_path / "nowhere"), "does not exist", "--data"]
    if kind == "directory is a file":
        return train_src, [], [str(train_src), "is a file"]
    if kind == "missing file":
        train_tgt.unlink()
        return data, [], [str(train_tgt), "does not exist", "--tgt-lang"]
    if kind == "language suffix without files":
        return data, ["--src-lang", "fr"], [str(data / "train.fr"), "does not exist", "--src-lang"]
    if kind == "unequal line counts":
        train_tgt.write_text("".join(train_tgt.read_text().splitlines(keepends=True)[:-2]))
        return data, [], [str(train_src), "300 lines", str(train_tgt), "298"]
    if kind == "invalid UTF-8":
        with open(train_src, "ab") as handle:
            handle.write(b"ka lo\nmi \xff\xfe su\n")
        with open(train_tgt, "a") as handle:
            handle.write("OK\nBAD\n")
        return data, [], [str(train_src), "line 302", "not valid UTF-8", "data.skip_bad_lines=true"]
    if kind == "no pairs at all":
        train_src.write_text("\n  \n")
        train_tgt.write_text("a\nb\n")
        return data, [], [str(train_src), "holds no sentence pairs"]
    raise AssertionError(kind)


@pytest.mark.parametrize(
    "kind",
    [
        "missing directory",
        "directory is a file",
        "missing file",
        "language suffix without files",
        "unequal line counts",
        "invalid UTF-8",
        "no pairs at all",
    ],
)
def test_bad_corpus_is_one_line(kind: str, corpus: Path, tiny: Path, tmp_path: Path) -> None:
    data, flags, fragments = _bad_corpus(kind, corpus, tmp_path)
    assert_one_line_error(run_cli(*train_args(tiny, data, tmp_path / "run", *flags)), *fragments)
    assert not (tmp_path / "run").exists()  # a refused run leaves no directory behind


@pytest.mark.parametrize(
    ("append_src", "append_tgt", "flags", "warning"),
    [
        (b"\n   \nka lo\n\t\xc2\xa0\n", "A\nB\n\nC\n", [], "dropped 4 of 304 pairs with an empty side"),
        (b"ka \xff lo\nmi su\n", "X\nY\n", ["--set", "data.skip_bad_lines=true"], "skipped 1 lines"),
    ],
    ids=["empty and whitespace lines", "invalid UTF-8 skipped"],
)
def test_dropped_training_lines_are_counted(
    append_src: bytes,
    append_tgt: str,
    flags: list[str],
    warning: str,
    corpus: Path,
    tiny: Path,
    tmp_path: Path,
) -> None:
    data = copy_corpus(corpus, tmp_path / "data")
    with open(data / "train.src", "ab") as handle:
        handle.write(append_src)
    with open(data / "train.tgt", "a") as handle:
        handle.write(append_tgt)
    code, _, err = run_cli(*train_args(tiny, data, tmp_path / "run", "--max-steps", "1", *flags))
    assert code == 0, err
    assert warning in err


# --- translate: empty and overlong lines --------------------------------------------------------------------


def test_translate_keeps_empty_and_whitespace_lines(trained_run: Path, corpus: Path, tmp_path: Path) -> None:
    sentence = (corpus / "test.src").read_text().splitlines()[0]
    source = tmp_path / "in.txt"
    source.write_text(f"{sentence}\n\n \t \n\u00a0\r\n{sentence}\n", encoding="utf-8")
    out = tmp_path / "out.txt"
    code, _, err = run_cli(
        "translate", str(trained_run), "-i", str(source), "-o", str(out), "--beam-size", "1"
    )
    assert code == 0, err
    lines = out.read_text().split("\n")
    assert len(lines) == 6 and lines[1:4] == ["", "", ""] and lines[5] == ""
    assert lines[0] == lines[4] != ""


@pytest.mark.parametrize("source", ["stdin", "file"])
def test_translate_names_an_invalid_utf8_line_or_skips_it(
    source: str, trained_run: Path, tmp_path: Path
) -> None:
    text = b"kalo\nmi \xe9 su\nkalo\n"
    path = tmp_path / "in.txt"
    path.write_bytes(text)
    args = ["translate", str(trained_run), "--beam-size", "1"] + (
        ["-i", str(path)] if source == "file" else []
    )
    name = "standard input" if source == "stdin" else str(path)
    result = run_cli(*args, input=text if source == "stdin" else None)
    assert_one_line_error(result, f"{name} line 2 is not valid UTF-8", "--skip-bad-lines")
    code, out, err = run_cli(*args, "--skip-bad-lines", input=text if source == "stdin" else None)
    assert code == 0, err
    assert "1 lines that are not valid UTF-8 translated as empty lines" in err
    lines = out.split("\n")
    assert len(lines) == 4 and lines[1] == "" and lines[0] == lines[2] != ""


def test_a_10000_token_line_gives_a_bounded_translation(trained_run: Path, corpus: Path) -> None:
    words = " ".join(corpus.joinpath("train.src").read_text().split())
    huge = " ".join((words.split() * 10)[:10_000])
    code, out, err = run_cli("translate", str(trained_run), "--beam-size", "2", input=f"{huge}\nkalo\n")
    assert code == 0, err
    lines = out.split("\n")
    assert len(lines) == 3 and lines[2] == ""
    cfg = load_config(trained_run / "config.yaml")
    limit = cfg.search.max_len_a * 4 * cfg.data.max_len + cfg.search.max_len_b  # output subwords at most
    assert 0 < len(lines[0].split()) <= limit
    assert "exceed" in err and "truncated" in err


# --- config -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "fragments"),
    [
        (
            ["model.dmodel=64"],
            ["unknown key 'model.dmodel'", "did you mean 'model.transformer.d_model'", "valid keys:"],
        ),
        (["train.xyz=1"], ["unknown key 'train.xyz'", "valid keys:", "batch_tokens", "warmup_steps"]),
        (["train.batch_tokens=lots"], ["train.batch_tokens='lots'; expected int or 'auto'"]),
        (["train.lr=[1]"], ["train.lr=[1] is not a float"]),
        (["model.type=lstm"], ["model.type='lstm'", "'transformer', 'rnn-bahdanau', 'rnn-luong'"]),
        (
            ["model.type=rnn-luong", "model.transformer=", "model.rnn.luong_score=bilinear"],
            ["model.rnn.luong_score='bilinear'", "'dot', 'general', 'concat'"],
        ),
        (["train.max_steps=-1"], ["train.max_steps=-1 must be 0 (no limit) or positive"]),
        (["tokenizer.vocab_size=0"], ["tokenizer.vocab_size=0"]),
        (
            ["model.transformer.max_positions=16"],
            ["model.transformer.max_positions=16 is too small for data.max_len=64"],
        ),
    ],
)
def test_bad_config_values_are_one_line(
    overrides: list[str], fragments: list[str], corpus: Path, tiny: Path, tmp_path: Path
) -> None:
    sets = [arg for override in overrides for arg in ("--set", override)]
    assert_one_line_error(run_cli(*train_args(tiny, corpus, tmp_path / "run", *sets)), *fragments)


@pytest.mark.parametrize(
    ("size", "fragments"),
    [
        ("50000", ["tokenizer.vocab_size=50000 is too large for this corpus", "tokenizer.auto_shrink=true"]),
        ("10", ["tokenizer.vocab_size=10 is smaller than", "raise it"]),
    ],
)
def test_vocabulary_size_that_does_not_fit_the_corpus(
    size: str, fragments: list[str], corpus: Path, tiny: Path, tmp_path: Path
) -> None:
    data = copy_corpus(corpus, tmp_path / "data")
    sets = ["--set", f"tokenizer.vocab_size={size}", "--set", "tokenizer.auto_shrink=false"]
    assert_one_line_error(run_cli(*train_args(tiny, data, tmp_path / "run", *sets)), *fragments)


def test_usage_errors_are_one_line(trained_run: Path) -> None:
    assert_one_line_error(run_cli("translate", str(trained_run), "--beam-size", "0"), "--beam-size")
    assert_one_line_error(run_cli("translate"), "Missing argument")
    assert_one_line_error(run_cli("translate", str(trained_run), "--bogus"), "--bogus")


# --- run directories and checkpoints ------------------------------------------------------------------------


def _damage(kind: str, run: Path) -> list[str]:
    """Break a copy of a run directory; returns the fragments the error must name."""
    best = run / "best.pt"
    if kind == "no run directory":
        shutil.rmtree(run)
        return [str(run), "does not exist"]
    if kind == "a file instead of a run directory":
        shutil.rmtree(run)
        run.write_text("")
        return [str(run), "is a file"]
    if kind == "no checkpoint":
        best.unlink()
        (run / "last.pt").unlink()
        return [str(run), "holds no checkpoint"]
    if kind == "truncated checkpoint":
        best.write_bytes(best.read_bytes()[: best.stat().st_size // 2])
        return [str(best), "truncated or corrupted"]
    if kind == "empty checkpoint":
        best.write_bytes(b"")
        return [str(best), "truncated or corrupted"]
    if kind == "flipped bytes in the weights":
        data = bytearray(best.read_bytes())
        middle = len(data) // 2
        data[middle : middle + 16] = bytes(b ^ 0xFF for b in data[middle : middle + 16])
        best.write_bytes(bytes(data))
        return [str(best), "truncated or corrupted", "checksum"]
    if kind == "vocabulary of another run":
        text = [" ".join(f"w{i}x{j}" for j in range(8)) for i in range(300)]
        cfg = load_config(run / "config.yaml").tokenizer
        train_sentencepiece(cfg, text, run / "spm.model")  # the spm model of another corpus
        return [str(best), "another vocabulary"]
    if kind == "config of another model":
        cfg = load_config(run / "config.yaml", ["model.transformer.d_model=64"])
        save_config(cfg, run / "config.yaml")
        return [str(best), "does not match the model", "size mismatch"]
    if kind == "missing config":
        (run / "config.yaml").unlink()
        return [str(run), "config.yaml", "incomplete"]
    if kind == "missing sentencepiece model":
        (run / "spm.model").unlink()
        return [str(run / "spm.model"), "missing"]
    raise AssertionError(kind)


@pytest.mark.parametrize(
    "kind",
    [
        "no run directory",
        "a file instead of a run directory",
        "no checkpoint",
        "truncated checkpoint",
        "empty checkpoint",
        "flipped bytes in the weights",
        "vocabulary of another run",
        "config of another model",
        "missing config",
        "missing sentencepiece model",
    ],
)
def test_broken_run_directories_are_one_line(kind: str, trained_run: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(trained_run, run)
    fragments = _damage(kind, run)
    assert_one_line_error(run_cli("translate", str(run), input="kalo\n"), *fragments)


class _Exploit:
    def __reduce__(self) -> tuple:
        return (os.system, ("touch pwned",))


@pytest.mark.parametrize("container", ["torch.save", "plain pickle"])
def test_a_planted_malicious_pickle_is_refused(
    container: str, trained_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    run = tmp_path / "run"
    shutil.copytree(trained_run, run)
    payload = {"model": _Exploit(), "config": {}}
    with open(run / "best.pt", "wb") as handle:
        if container == "torch.save":
            torch.save(payload, handle, pickle_module=pickle)
        else:
            pickle.dump(payload, handle)
    assert_one_line_error(run_cli("translate", str(run), input="kalo\n"), "refused as unsafe")
    assert not (tmp_path / "pwned").exists()


def test_training_into_a_file_is_one_line(small_corpus: Path, tiny: Path, tmp_path: Path) -> None:
    (tmp_path / "run").write_text("")
    result = run_cli(*train_args(tiny, small_corpus, tmp_path / "run"))
    assert_one_line_error(result, f"--out {tmp_path / 'run'} is a file")


def test_training_into_an_existing_run_refuses(trained_run: Path, small_corpus: Path, tiny: Path) -> None:
    before = (trained_run / "last.pt").stat().st_mtime_ns
    result = run_cli(*train_args(tiny, small_corpus, trained_run, "--max-steps", "1"))
    assert_one_line_error(result, str(trained_run), "--resume", "--overwrite")
    assert (trained_run / "last.pt").stat().st_mtime_ns == before


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")
@pytest.mark.parametrize("command", ["train", "translate", "evaluate", "plot-attention"])
def test_device_cuda_without_a_gpu(
    command: str, trained_run: Path, corpus: Path, tiny: Path, tmp_path: Path
) -> None:
    args = {
        "train": train_args(tiny, corpus, tmp_path / "run"),
        "translate": ["translate", str(trained_run)],
        "evaluate": ["evaluate", str(trained_run)],
        "plot-attention": [
            "plot-attention",
            str(trained_run),
            "--text",
            "kalo",
            "--out",
            str(tmp_path / "a.png"),
        ],
    }[command]
    assert_one_line_error(run_cli(*args, "--device", "cuda", input="kalo\n"), "no CUDA GPU", "--device cpu")


# --- output files -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["translate", "evaluate", "plot-attention"])
def test_an_interrupted_write_keeps_the_old_output(
    command: str, trained_run: Path, corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kill between writing the new file and renaming it over the old one leaves the old one whole."""
    target = tmp_path / ("out.png" if command == "plot-attention" else "out.txt")
    target.write_text("old")
    args = {
        "translate": ["translate", str(trained_run), "-i", str(corpus / "test.src"), "-o", str(target)],
        "evaluate": ["evaluate", str(trained_run), "--split", "valid", "--json", str(target)],
        "plot-attention": ["plot-attention", str(trained_run), "--text", "kalo mi", "--out", str(target)],
    }[command]

    def killed(src: str, dst: str) -> None:
        if Path(dst) == target:
            raise KeyboardInterrupt
        os.rename(src, dst)

    monkeypatch.setattr(os, "replace", killed)
    code, _, err = run_cli(*args, "--beam-size", "1")
    assert code == 130, err
    assert target.read_text() == "old" and os.listdir(tmp_path) == [target.name]


def test_an_unwritable_output_is_one_line(trained_run: Path, tmp_path: Path) -> None:
    result = run_cli("translate", str(trained_run), "-o", str(tmp_path), input="kalo\n")
    assert_one_line_error(result, f"cannot write {tmp_path}")


def test_config_and_tokenizer_are_written_atomically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def killed(*_: object) -> None:
        raise KeyboardInterrupt

    cfg = load_config(None)
    save_config(cfg, tmp_path / "config.yaml")
    monkeypatch.setattr(os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        save_config(load_config(None, ["train.lr=1.0"]), tmp_path / "config.yaml")
    with pytest.raises(KeyboardInterrupt):
        train_sentencepiece(cfg.tokenizer, ["ab cd ef"] * 200, tmp_path / "spm.model")
    assert load_config(tmp_path / "config.yaml") == cfg
    assert os.listdir(tmp_path) == ["config.yaml"]


# --- out of memory and non-finite losses --------------------------------------------------------------------


def _fail_training_forward(
    monkeypatch: pytest.MonkeyPatch, failing: Callable[[int], bool], fail: Callable[[object], object]
) -> None:
    """Make the k-th training forward pass (from 1) fail where `failing(k)`; `fail(output)` does it."""
    original, calls = TransformerSeq2Seq.forward, iter(range(1, 10**6))

    def forward(self: TransformerSeq2Seq, *args: object, **kwargs: object) -> object:
        output = original(self, *args, **kwargs)
        if torch.is_grad_enabled() and failing(next(calls)):
            return fail(output)
        return output

    monkeypatch.setattr(TransformerSeq2Seq, "forward", forward)


def _out_of_memory(_: object) -> object:
    raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")


def _nan(output: object) -> object:
    output.logits = output.logits * float("nan")  # type: ignore[attr-defined]
    return output


def test_out_of_memory_in_training_skips_the_batch(
    small_corpus: Path, tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fail_training_forward(monkeypatch, lambda k: k == 3, _out_of_memory)
    code, _, err = run_cli(*train_args(tiny, small_corpus, tmp_path / "run", "--max-steps", "6"))
    assert code == 0, err
    assert re.search(r"step 2: out of GPU memory on a batch of \d+ sentences, source length \d+", err)
    assert [step for step, _ in train_losses(tmp_path / "run")] == [1, 2, 3, 4, 5, 6]


def test_out_of_memory_on_every_batch_aborts(
    small_corpus: Path, tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fail_training_forward(monkeypatch, lambda k: True, _out_of_memory)
    sets = ["--set", "train.max_bad_steps=4", "--max-steps", "6"]
    result = run_cli("-q", *train_args(tiny, small_corpus, tmp_path / "run", *sets))
    assert_error_line_last(result, "out of GPU memory on 4 batches in a row", "lower train.batch_tokens")


def test_out_of_memory_in_translation_retries_in_halves(
    trained_run: Path, corpus: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    run = load_run(trained_run, torch.device("cpu"))
    sources = run.tokenizers.src.encode((corpus / "test.src").read_text().splitlines()[:12])
    search = replace(run.cfg, search={"beam_size": 1, "nbest": 1, "batch_size": 12}).search
    expected = translate_ids(run.model, sources, search, 256)
    real_greedy, sizes = nmt.decode.translate.greedy, []

    def greedy(model: object, src: torch.Tensor, *args: object) -> list[list[Hypothesis]]:
        sizes.append(src.size(0))
        if src.size(0) > 3:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory.")
        return real_greedy(model, src, *args)

    monkeypatch.setattr(nmt.decode.translate, "greedy", greedy)
    got = translate_ids(run.model, sources, search, 256)
    assert [[h.tokens for h in hyps] for hyps in got] == [[h.tokens for h in hyps] for hyps in expected]
    scores = [h.score for hyps in got for h in hyps]  # other batches, other padding: equal up to rounding
    assert scores == pytest.approx([h.score for hyps in expected for h in hyps], abs=1e-4)
    assert sizes == [12, 6, 3, 3, 6, 3, 3]
    assert "out of GPU memory decoding 12 sentences; retrying in batches of 6" in caplog.text


def test_out_of_memory_on_one_sentence_is_one_line(
    trained_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(nmt.decode.translate, "greedy", lambda *_: _out_of_memory(None))
    result = run_cli("translate", str(trained_run), "--beam-size", "1", input="kalo mi su\n")
    assert_one_line_error(result, "out of GPU memory translating one sentence", "--beam-size")


def test_repeated_nan_loss_aborts_and_keeps_the_last_good_checkpoint(
    small_corpus: Path, tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "run"
    _fail_training_forward(monkeypatch, lambda k: k > 6, _nan)
    sets = ["--set", "train.max_bad_steps=3", "--set", "train.eval_every=2", "--max-steps", "20"]
    result = run_cli("-q", *train_args(tiny, small_corpus, run, *sets))
    assert_error_line_last(
        result, "loss became NaN/inf in 3 consecutive steps", f"last good checkpoint: {run / 'last.pt'}"
    )
    assert finite_weights(run / "last.pt") and finite_weights(run / "best.pt")
    last = load_checkpoint(run / "last.pt")
    assert last["progress"]["step"] == 8  # saved by the validation at step 8, with step 6's weights
    assert int(last["optimizer"]["state"][0]["step"]) == 6  # the skipped updates left Adam alone
    assert [step for step, _ in train_losses(run)] == list(range(1, 9))


def test_a_run_that_fails_before_its_first_checkpoint_keeps_its_log(
    small_corpus: Path, tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only a run refused before training starts leaves nothing behind: one that trained and failed keeps
    train.log with its error, its training records and its tokenizer."""
    run = tmp_path / "run"
    _fail_training_forward(monkeypatch, lambda k: k > 2, _nan)
    sets = ["--set", "train.max_bad_steps=2", "--set", "train.log_every=1", "--max-steps", "20"]
    result = run_cli("-q", *train_args(tiny, small_corpus, run, *sets))
    assert_error_line_last(result, "loss became NaN/inf in 2 consecutive steps")
    assert not (run / "last.pt").exists()
    assert "loss became NaN/inf in 2 consecutive steps" in (run / "train.log").read_text()
    assert [step for step, _ in train_losses(run)] == [1, 2, 3]  # step 3 skipped, step 4 ended it
    assert (run / "spm.model").exists()


def test_a_single_nan_step_is_skipped(
    small_corpus: Path, tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "run"
    _fail_training_forward(monkeypatch, lambda k: k == 3, _nan)
    code, _, err = run_cli("-q", *train_args(tiny, small_corpus, run, "--max-steps", "6"))
    assert code == 0, err
    assert "step 3: 1 updates skipped for non-finite loss/gradients" in err
    assert finite_weights(run / "last.pt")
    assert int(load_checkpoint(run / "last.pt")["optimizer"]["state"][0]["step"]) == 5


# --- interruptions ------------------------------------------------------------------------------------------


def _start(args: list[str]) -> subprocess.Popen:
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "nmt", "-q", *args]
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for(
    condition: Callable[[], bool], process: subprocess.Popen, poll: float = 0.005, timeout: float = 60.0
) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert process.poll() is None, process.communicate()[1]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(poll)


@pytest.fixture(scope="module")
def straight_run(small_corpus: Path, tiny: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """30 uninterrupted steps of the tiny config: the reference for resumed runs."""
    run = tmp_path_factory.mktemp("straight") / "run"
    code, _, err = run_cli(*train_args(tiny, small_corpus, run, "--max-steps", "30"))
    assert code == 0, err
    return run


def _assert_same_run(resumed: Path, straight: Path) -> None:
    assert train_losses(resumed) == train_losses(straight)
    a, b = load_checkpoint(resumed / "last.pt"), load_checkpoint(straight / "last.pt")
    assert a["progress"]["step"] == b["progress"]["step"] == 30
    for name, tensor in b["model"].items():
        assert torch.equal(a["model"][name], tensor), name


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signal_saves_and_resume_continues_bit_for_bit(
    signum: int, straight_run: Path, small_corpus: Path, tiny: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    process = _start(train_args(tiny, small_corpus, run, "--max-steps", "30"))
    _wait_for(lambda: (run / "last.pt").exists(), process)
    process.send_signal(signum)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    saved = re.escape(f"{run / 'last.pt'} saved, continue with --resume")
    stopped = re.fullmatch(rf"nmt: training interrupted at step (\d+); {saved}", err.strip().splitlines()[-1])
    assert stopped and "Traceback" not in err, err
    assert load_checkpoint(run / "last.pt")["progress"]["step"] == int(stopped.group(1)) < 30
    assert load_checkpoint(run / "last.pt")["progress"]["stop_reason"] == "signal"
    assert "signal (Ctrl-C or SIGTERM)" in (run / "train.log").read_text()
    code, _, err = run_cli(*train_args(tiny, small_corpus, run, "--max-steps", "30", "--resume"))
    assert code == 0, err
    _assert_same_run(run, straight_run)


def _temporary_files(run: Path) -> set[str]:
    return {path.name for path in run.glob(".*.tmp")}


def _kill(run: Path, args: list[str], moment: str, since: int) -> int:
    """Start training and SIGKILL it once it wrote a checkpoint newer than `since` (an mtime), then either
    as soon as it starts writing the next one ('writing') or 50 ms later ('between'); returns last.pt's mtime.
    """
    process = _start(args)

    def modified() -> int:
        return (run / "last.pt").stat().st_mtime_ns if (run / "last.pt").exists() else 0

    _wait_for(lambda: modified() > since, process)
    if moment == "writing":
        stale = _temporary_files(run)  # left by an earlier kill: removed at start, so only before this
        _wait_for(lambda: bool(_temporary_files(run) - stale), process, poll=0.0005)
    else:
        time.sleep(0.05)
    process.kill()
    process.wait(timeout=60)
    return modified()


@pytest.mark.slow
def test_kill_9_at_any_moment_leaves_loadable_checkpoints(
    straight_run: Path, small_corpus: Path, tiny: Path, tmp_path: Path
) -> None:
    """Killed while writing a checkpoint (one after every step) and between writes, each time resumed:
    every checkpoint still loads, and the resumed run matches an uninterrupted one."""
    run, since, steps = tmp_path / "run", 0, []
    args = train_args(tiny, small_corpus, run, "--max-steps", "30", "--set", "train.eval_every=1")
    for attempt, moment in enumerate(["writing", "between", "writing"]):
        since = _kill(run, args + (["--resume"] if attempt else []), moment, since)
        for name in ("last.pt", "best.pt"):
            assert finite_weights(run / name), name
        steps.append(load_checkpoint(run / "last.pt")["progress"]["step"])
    assert steps == sorted(steps) and steps[-1] < 28
    code, _, err = run_cli(*args, "--resume", "--max-steps", str(steps[-1] + 2))
    assert code == 0, err
    assert not _temporary_files(run)
    assert [step for step, _ in train_losses(run)] == list(range(1, steps[-1] + 3))
    assert train_losses(run) == train_losses(straight_run)[: steps[-1] + 2]
