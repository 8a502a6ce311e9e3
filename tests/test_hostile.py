"""Adversarial input through the CLI (issue 14): each class of bad input ends in one line `nmt: error: …`,
exit code 2, no traceback and nothing half-written."""

from __future__ import annotations

import fcntl
import json
import os
import random
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

import pytest
import torch
from PIL import Image

from nmt import interrupts
from nmt.data import tokenizer
from nmt.data.synthetic import write_reordering_corpus
from nmt.run.checkpoint_io import load_checkpoint
from tests.conftest import ROOT, assert_one_line_error, run_cli, train_args

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
        ("search.beam_size=100000", ["search.beam_size=100000", "256"]),
        ("model.transformer.ff_dim=10000000000", ["1,300,000,019,584 parameters", "GiB"]),
        ("model.transformer.d_model=1000000000000000000000", ["model"]),
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
    text = "train: {lr: 1.0e-3}\nmodel: {transformer: {d_model: 32, heads: 2}}\ntrain: {seed: 3}\n"
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
        ("model.transformer.d_model=!custom 3", "!custom"),
        ("train.lr={a: 1, a: 2}", "appears twice"),
    ],
)
def test_override_with_a_yaml_error_is_one_line(tiny: Path, override: str, fragment: str) -> None:
    assert_one_line_error(run_cli("train", str(tiny), "--set", override), f"override '{override}'", fragment)


# --- 1. one run directory, one writer ---------------------------------------------------------------------

FAST = ["--max-steps", "10", "--set", "train.final_report=false"]


def _flock(path: Path, pid: str) -> IO[str]:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = open(path, "a+")  # noqa: SIM115
    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    handle.truncate(0)
    handle.write(pid)
    handle.flush()
    return handle


def test_a_second_run_into_a_locked_directory_names_the_holder(
    tiny: Path, small_corpus: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    with _flock(run / ".lock", "4242"):
        result = run_cli(*train_args(tiny, small_corpus, run, *FAST))
    assert_one_line_error(result, str(run), "pid 4242")
    assert sorted(p.name for p in run.iterdir()) == [".lock"]  # the holder's files are left alone


def test_a_lock_left_by_a_dead_process_is_no_obstacle_and_every_exit_releases_it(
    tiny: Path, small_corpus: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / ".lock").write_text("999999\n")  # a killed run's lock file: the kernel released its lock
    assert_one_line_error(run_cli(*train_args(tiny, small_corpus, run, "--tgt-lang", "xx", *FAST)), "xx")
    code, _, err = run_cli(*train_args(tiny, small_corpus, run, *FAST))  # the failed run let it go
    assert code == 0, err
    _flock(run / ".lock", "1").close()  # and so did the finished one


# --- 2. --overwrite and --resume --------------------------------------------------------------------------


@pytest.fixture
def kept_run(tiny: Path, small_corpus: Path, tmp_path: Path) -> Path:
    """10 steps validated every 5, both validations kept as snapshots and averaged."""
    run = tmp_path / "kept"
    keep = ["--set", "train.keep_checkpoints=2", "--set", "train.average_checkpoints=2"]
    code, _, err = run_cli(*train_args(tiny, small_corpus, run, *FAST, *keep))
    assert code == 0, err
    return run


def test_overwrite_leaves_nothing_of_the_old_run(kept_run: Path, tiny: Path, small_corpus: Path) -> None:
    for name in ("eval", "attention"):
        (kept_run / name).mkdir(exist_ok=True)
        (kept_run / name / "old.txt").write_text("old")
    (kept_run / "report.json").write_text("{}")
    (kept_run / "averaged.pt").write_bytes(b"old")
    (kept_run / "notes.txt").write_text("mine")  # not nmt's: kept
    args = train_args(
        tiny, small_corpus, kept_run, *FAST, "--overwrite", "--set", "model.transformer.d_model=16"
    )
    code, _, err = run_cli(*args)
    assert code == 0, err
    left = {p.name for p in kept_run.iterdir()}
    assert left == {".lock", "config.yaml", "spm.model", "best.pt", "last.pt", "metrics.jsonl", "train.log",
                    "notes.txt"}  # fmt: skip
    assert_one_line_error(run_cli("average", str(kept_run), "--last", "2"), "keeps 0 checkpoint(s)")


def test_average_refuses_a_snapshot_of_another_model(
    kept_run: Path, tiny: Path, small_corpus: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    keep = ["--set", "train.keep_checkpoints=1", "--set", "model.transformer.d_model=16"]
    assert run_cli(*train_args(tiny, small_corpus, other, *FAST, *keep))[0] == 0
    (other / "checkpoints" / "step10.pt").replace(kept_run / "checkpoints" / "step5.pt")
    assert_one_line_error(run_cli("average", str(kept_run), "--last", "2"), "step5.pt", "another model")
    assert not (kept_run / "averaged.pt").exists()


def _valid_records(run: Path) -> list[dict]:
    lines = (run / "metrics.jsonl").read_text().splitlines()
    return [record for record in map(json.loads, lines) if record["kind"] == "valid"]


def test_resuming_a_finished_run_does_not_validate_it_again(
    kept_run: Path, tiny: Path, small_corpus: Path
) -> None:
    progress = load_checkpoint(kept_run / "last.pt")["progress"]
    code, _, err = run_cli(*train_args(tiny, small_corpus, kept_run, *FAST, "--resume"))
    assert code == 0, err
    assert [r["step"] for r in _valid_records(kept_run)] == [5, 10]
    assert load_checkpoint(kept_run / "last.pt")["progress"]["bad_evals"] == progress["bad_evals"]


def test_resume_with_another_batch_size_is_refused(kept_run: Path, tiny: Path, small_corpus: Path) -> None:
    config = (kept_run / "config.yaml").read_bytes()
    args = train_args(tiny, small_corpus, kept_run, "--resume", "--max-steps", "20")
    assert_one_line_error(run_cli(*args, "--set", "train.batch_tokens=900"), "batch_tokens=900", "600")
    assert (kept_run / "config.yaml").read_bytes() == config


# --- 5. files that load but are not what they claim -------------------------------------------------------


def _copy(run: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(run, tmp_path / "copy"))


def test_a_tokenizer_of_random_bytes_is_one_line(trained_run: Path, tmp_path: Path) -> None:
    run = _copy(trained_run, tmp_path)
    (run / "spm.model").write_bytes(random.Random(0).randbytes(4096))
    assert_one_line_error(run_cli("translate", str(run), input="a b c\n"), "spm.model", "sentencepiece")


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        (lambda c: c.update(model=[1, 2]), "'model' is a list"),
        (lambda c: c.update(model={"w": "not a tensor"}), "parameter names to tensors"),
        (lambda c: c.update(config={"model": {}}), "config"),
    ],
)
def test_a_malformed_best_checkpoint_is_one_line(
    trained_run: Path, tmp_path: Path, change: Callable[[dict], None], fragment: str
) -> None:
    run = _copy(trained_run, tmp_path)
    checkpoint = torch.load(run / "best.pt", weights_only=True)
    change(checkpoint)
    torch.save(checkpoint, run / "best.pt")
    assert_one_line_error(run_cli("translate", str(run), input="a b c\n"), "best.pt", fragment)


@pytest.mark.parametrize("key", ["optimizer", "progress", "rng"])
def test_resuming_from_a_last_checkpoint_without_training_state_is_one_line(
    kept_run: Path, tiny: Path, small_corpus: Path, key: str
) -> None:
    checkpoint = torch.load(kept_run / "last.pt", weights_only=True)
    del checkpoint[key]
    torch.save(checkpoint, kept_run / "last.pt")
    args = train_args(tiny, small_corpus, kept_run, "--resume", "--max-steps", "20")
    assert_one_line_error(run_cli(*args), "last.pt", f"no '{key}'")


def test_a_tokenizer_written_short_is_never_saved(
    tiny: Path, small_corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = tokenizer._in_child

    def disk_full(task: Callable[[], tuple[bytes, int]]) -> tuple[bytes, int]:
        model, vocab_size = real(task)
        return model[:100], vocab_size  # a model cut short on its way back from the training process

    monkeypatch.setattr(tokenizer, "_in_child", disk_full)
    monkeypatch.setenv("NMT_CACHE", str(tmp_path / "cache"))  # trained here, not found in the cache
    run = tmp_path / "run"
    result = run_cli("-q", *train_args(tiny, small_corpus, run, *FAST))
    assert_one_line_error(result, "tokenizer", "sentencepiece")
    assert not (run / "spm.model").exists()


# --- 6. limits and devices --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_run(tiny: Path, small_corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run of the tiny config, 10 steps: enough to translate and plot, in seconds."""
    run = tmp_path_factory.mktemp("hostile") / "run"
    code, _, err = run_cli(*train_args(tiny, small_corpus, run, *FAST))
    assert code == 0, err
    return run


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["--beam-size", "1000000"], ["--beam-size", "256"]),
        (["--batch-size", "0"], ["--batch-size"]),
        (["--device", "mps"], ["unknown device 'mps'"]),
        (["--device", "cuda:99"], ["cuda:99"]),
        (["--device", "meta"], ["unknown device 'meta'"]),
    ],
)
def test_translate_option_limits_are_one_line(tiny_run: Path, args: list[str], fragments: list[str]) -> None:
    assert_one_line_error(run_cli("translate", str(tiny_run), *args, input="a b\n"), *fragments)


@pytest.mark.parametrize(
    ("head", "fragment"), [("²", "--head ²"), ("1e3", "--head 1e3"), ("99", "--head 99")]
)
def test_plot_attention_head_must_be_a_head(tiny_run: Path, tmp_path: Path, head: str, fragment: str) -> None:
    result = run_cli("plot-attention", str(tiny_run), "--text", "a b", "--out", str(tmp_path / "a.png"),
                     "--head", head)  # fmt: skip
    assert_one_line_error(result, fragment)
    assert not (tmp_path / "a.png").exists()


@pytest.mark.parametrize(
    "args", [["--steps", "0"], ["--warmup-steps", "-1"], ["--bleu-budget", "-5"], ["--bleu-target", "101"]]
)
def test_benchmark_option_limits_are_checked_before_work(tiny: Path, args: list[str]) -> None:
    assert_one_line_error(run_cli("benchmark", str(tiny), *args), args[0])


@pytest.mark.parametrize("args", [["--max-steps", "-1"], ["--max-time", "-1"], ["--max-epochs", "-2"]])
def test_train_option_limits_are_checked_before_work(tiny: Path, tmp_path: Path, args: list[str]) -> None:
    assert_one_line_error(run_cli("train", str(tiny), "--out", str(tmp_path / "run"), *args), args[0])
    assert not (tmp_path / "run").exists()


def test_plot_attention_of_a_long_text_is_bounded_and_says_what_was_cut(
    tiny_run: Path, corpus: Path, tmp_path: Path
) -> None:
    words = " ".join((corpus / "test.src").read_text().split())
    text = " ".join([words] * (2000 // len(words.split()) + 1))
    out = tmp_path / "long.png"
    code, _, err = run_cli("plot-attention", str(tiny_run), "--text", text, "--out", str(out))
    assert code == 0, err
    assert "only the first" in err and "subwords" in err
    width, height = Image.open(out).size
    assert width <= 30 * 150 and height <= 30 * 150


# --- 7. streams and special files -------------------------------------------------------------------------


def _nmt(*args: str, **kwargs: object) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nmt", *args], capture_output=False, text=True, **kwargs)


@pytest.mark.slow
def test_translate_with_stdin_closed_or_stdout_full_is_one_line(tiny_run: Path) -> None:
    closed = _nmt("translate", str(tiny_run), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                  preexec_fn=lambda: os.close(0))  # fmt: skip
    assert_one_line_error((closed.returncode, closed.stdout, closed.stderr), "standard input is closed")
    with open("/dev/full", "w") as full:
        result = _nmt("translate", str(tiny_run), input="a b\n", stdout=full, stderr=subprocess.PIPE)
    assert_one_line_error((result.returncode, "", result.stderr), "standard output", "No space left")


def test_translate_writes_into_a_fifo_without_replacing_it(tiny_run: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    received: list[str] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_text()))
    reader.start()
    code, _, err = run_cli("translate", str(tiny_run), "-o", str(fifo), input="a b\n\nc\n")
    reader.join(timeout=60)
    assert code == 0, err
    assert stat.S_ISFIFO(fifo.stat().st_mode) and len(received[0].splitlines()) == 3


def test_translate_keeps_the_mode_of_the_file_it_replaces(tiny_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "existing.txt"
    out.write_text("old\n")
    out.chmod(0o640)
    code, _, err = run_cli("translate", str(tiny_run), "-o", str(out), input="a b\n")
    assert code == 0, err
    assert stat.S_IMODE(out.stat().st_mode) == 0o640 and out.read_text() != "old\n"


# --- 8. signals at awkward moments -------------------------------------------------------------------------


def _start(*args: str) -> subprocess.Popen:
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "nmt", "-q", *args]
    return subprocess.Popen(
        command, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _wait_until(condition: Callable[[], object], process: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def _children(process: subprocess.Popen) -> list[int]:
    try:
        return [
            int(pid) for pid in Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split()
        ]
    except OSError:
        return []


def _assert_interrupted(process: subprocess.Popen, *lines: str) -> str:
    """Exit code 130 and one line on stderr, one of `lines` (or starting with 'nmt: training interrupted')."""
    _, err = process.communicate(timeout=120)
    assert process.returncode == 130, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err and "Exception ignored" not in err, (
        err
    )
    assert err.strip() in lines or err.startswith("nmt: training interrupted at step "), err
    return err.strip()


@pytest.fixture(scope="module")
def tokenizer_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Enough text that training a 2000-piece sentencepiece model takes a while."""
    return write_reordering_corpus(
        tmp_path_factory.mktemp("spm") / "data",
        train=60000,
        valid=20,
        test=20,
        vocab=3000,
        min_len=5,
        max_len=20,
    )


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="finds the child process in /proc")
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_while_sentencepiece_trains_ends_the_child_too(
    signum: int, tokenizer_corpus: Path, tiny: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    process = _start(*train_args(tiny, tokenizer_corpus, run, "--set", "tokenizer.vocab_size=2000"))
    _wait_until(lambda: _children(process), process)
    child = _children(process)[0]
    process.send_signal(signum)
    assert _assert_interrupted(process, "nmt: interrupted") == "nmt: interrupted"
    assert not Path(f"/proc/{child}").exists()
    assert not list(run.glob("spm*")) and not (run / "config.yaml").exists()


def test_a_signal_deferred_takes_effect_where_the_block_ends() -> None:
    """Ctrl-C while a child process starts is held until its handle is kept, then raised at the `with` to the
    handler that was there before (one of the test's own: whatever earlier tests left installed in this
    process does not decide the outcome)."""
    assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, []), "SIGINT is blocked here"
    seen: list[int] = []

    def outer(signum: int, _frame: object) -> None:
        seen.append(signum)
        raise KeyboardInterrupt

    steps = []
    previous = signal.signal(signal.SIGINT, outer)
    try:
        with pytest.raises(KeyboardInterrupt), interrupts.deferred():
            # to the main thread itself: a signal to the process may reach another thread (a library's) first
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
            time.sleep(0.05)  # where an undeferred handler would already have raised
            steps.append(f"block finished, {len(seen)} signal(s) seen")
        assert signal.getsignal(signal.SIGINT) is outer
    finally:
        signal.signal(signal.SIGINT, previous)
    assert steps == ["block finished, 0 signal(s) seen"]
    assert seen == [signal.SIGINT]


@pytest.mark.slow
def test_sigterm_in_any_command_is_like_ctrl_c(tiny_run: Path) -> None:
    process = _start("translate", str(tiny_run))  # waits for standard input
    time.sleep(2)
    process.send_signal(signal.SIGTERM)
    _assert_interrupted(process, "nmt: interrupted")


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("gap", [0.0, 0.05, 0.3])
def test_a_second_signal_soon_after_the_first_is_one_line(
    signum: int, gap: float, tiny: Path, small_corpus: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    process = _start(*train_args(tiny, small_corpus, run, "--max-steps", "100000"))
    _wait_until(lambda: (run / "last.pt").exists(), process)
    process.send_signal(signum)
    time.sleep(gap)
    process.send_signal(signum)
    _assert_interrupted(process, "nmt: interrupted")
    assert load_checkpoint(run / "last.pt")["progress"]["step"] > 0


@pytest.mark.slow
def test_a_log_window_survives_a_resume(tiny: Path, small_corpus: Path, tmp_path: Path) -> None:
    """With a record every 7 updates, the records of a run stopped by SIGTERM and resumed equal those of a
    run never stopped (the checkpoint carries the window's partial sums)."""
    straight, run = tmp_path / "straight", tmp_path / "run"
    args = ("--max-steps", "30", "--set", "train.log_every=7")
    assert run_cli(*train_args(tiny, small_corpus, straight, *args))[0] == 0
    process = _start(*train_args(tiny, small_corpus, run, *args))
    _wait_until(lambda: (run / "last.pt").exists(), process)
    process.send_signal(signal.SIGTERM)
    _assert_interrupted(process)
    code, _, err = run_cli(*train_args(tiny, small_corpus, run, *args, "--resume"))
    assert code == 0, err
    assert _train_losses(run) == _train_losses(straight) and len(_train_losses(run)) == 4


def test_a_checkpoint_without_a_log_window_still_resumes(
    kept_run: Path, tiny: Path, small_corpus: Path
) -> None:
    checkpoint = torch.load(kept_run / "last.pt", weights_only=False)
    for key in ("window_loss", "window_tokens", "window_seconds"):
        del checkpoint["progress"][key]
    torch.save(checkpoint, kept_run / "last.pt")
    code, _, err = run_cli(*train_args(tiny, small_corpus, kept_run, "--resume", "--max-steps", "8"))
    assert code == 0, err


def _train_losses(run: Path) -> list[tuple[int, float]]:
    records = map(json.loads, (run / "metrics.jsonl").read_text().splitlines())
    return [(r["step"], r["loss"]) for r in records if r["kind"] == "train"]
