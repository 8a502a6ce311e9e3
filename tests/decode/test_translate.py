"""Translating streams: chunk by chunk in order with empty lines kept, and line by line from a terminal."""

from __future__ import annotations

import io
import json
import os
import select
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

import nmt.decode.outputs
import nmt.decode.translator
from nmt.align.pharaoh import parse_links
from nmt.config.yaml_file import load_config
from nmt.decode.outputs import stream_translations
from nmt.decode.search import Hypothesis
from nmt.decode.trained_run import load_run
from nmt.decode.translator import TorchTranslator
from tests.conftest import assert_one_line_error, run_cli


def test_chunks_keep_the_order_and_the_empty_lines(
    trained_run: Path, corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = (corpus / "test.src").read_text().splitlines()[:7]
    lines = [s[0], "", s[1], " \t ", s[2], s[3], "\u00a0\r", s[4], s[5], s[6]]  # NBSP and CR are spaces
    run = load_run(trained_run, torch.device("cpu"))
    whole = TorchTranslator.of_run(run).with_search(beam_size=1).translate(lines)
    monkeypatch.setattr(nmt.decode.outputs, "CHUNK_LINES", 3)  # chunks cut through the empty lines
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n")
    for output in (None, tmp_path / "out.txt"):
        args = ["translate", str(trained_run), "-i", str(tmp_path / "in.txt"), "--beam-size", "1"]
        code, out, err = run_cli(*args, *(["-o", str(output)] if output else []))
        assert code == 0, err
        assert (output.read_text() if output else out) == "".join(line + "\n" for line in whole)
    assert [i for i, line in enumerate(whole) if not line] == [1, 3, 6]


class _Written(io.BytesIO):
    """An output that records how many lines it held at its last flush."""

    flushed = 0

    def flush(self) -> None:
        super().flush()
        self.flushed = self.getvalue().count(b"\n")


def test_a_terminal_gets_each_answer_before_the_next_line(trained_run: Path) -> None:
    """Interactive input is translated line by line: the first answer is out while the input stays open."""
    run = load_run(trained_run, torch.device("cpu"))
    read, write = os.pipe()
    out = _Written()
    with open(read, "rb") as source:
        translator = TorchTranslator.of_run(run)
        worker = threading.Thread(
            target=stream_translations, args=(translator, source, "stdin", out), kwargs={"interactive": True}
        )
        worker.start()
        os.write(write, b"kalo mi\n")
        deadline = time.monotonic() + 60
        while out.flushed < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert out.flushed == 1  # answered while the second line is not even typed
        os.write(write, b"\nsu te\n")
        os.close(write)
        worker.join(timeout=60)
    assert out.getvalue().count(b"\n") == 3 and out.getvalue().split(b"\n")[1] == b""


class _Typist:
    """`nmt translate RUN` reading a real pseudo-terminal, as when a user types into it, or (`terminal` false)
    a pipe kept open, with `--interactive`; its output is a pipe."""

    def __init__(self, run: Path, terminal: bool) -> None:
        command = [sys.executable, "-m", "nmt", "translate", str(run), "--beam-size", "1", "--device", "cpu"]
        self.keyboard, user_side = os.openpty() if terminal else (None, subprocess.PIPE)
        flags = [] if terminal else ["--interactive"]
        self.process = subprocess.Popen(
            [*command, *flags], stdin=user_side, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        if terminal:
            os.close(user_side)

    def type(self, data: bytes) -> None:
        if self.keyboard is None:
            self.process.stdin.write(data)
            self.process.stdin.flush()
        else:
            os.write(self.keyboard, data)

    def wait_ready(self) -> str:
        """The first line on stderr, which a terminal gets once the model is loaded."""
        said, deadline = b"", time.monotonic() + 120
        while not said.endswith(b"\n"):
            ready, _, _ = select.select([self.process.stderr], [], [], max(0.0, deadline - time.monotonic()))
            assert ready, f"nothing on stderr within 120 s (so far {said!r})"
            chunk = os.read(self.process.stderr.fileno(), 1)
            assert chunk, self.process.communicate()
            said += chunk
        return said.decode()

    def answer(self, line: str) -> str:
        """Type one line and wait for its one line of output; an answer that waits for the end of the input
        (which stays open) times out."""
        self.type(line.encode() + b"\n")
        answer, deadline = b"", time.monotonic() + 60
        while not answer.endswith(b"\n"):
            ready, _, _ = select.select([self.process.stdout], [], [], max(0.0, deadline - time.monotonic()))
            assert ready, f"no answer to {line!r} within 60 s"
            chunk = os.read(self.process.stdout.fileno(), 4096)
            assert chunk, self.process.communicate()[1]
            answer += chunk
        return answer.decode()

    def finish(self) -> int:
        """End the input (Ctrl-D on a terminal) and wait for the exit code."""
        if self.keyboard is None:
            self.process.stdin.close()
        else:
            self.type(b"\x04")
        code = self.process.wait(timeout=60)
        if self.keyboard is not None:
            os.close(self.keyboard)
        return code


@pytest.mark.parametrize(  # each starts a process: the pipe in the slow layer
    "terminal",
    [True, pytest.param(False, marks=pytest.mark.slow)],
    ids=["a terminal", "a pipe with --interactive"],
)
def test_each_line_is_answered_before_the_next_is_typed(
    terminal: bool, trained_run: Path, corpus: Path
) -> None:
    """Each line's translation comes back while the input stays open, the same as translating the lines
    together. A terminal is told when the model is ready and how to end the input; a pipe is not."""
    lines = (corpus / "test.src").read_text().splitlines()[:2]
    typist = _Typist(trained_run, terminal)
    try:
        if terminal:
            assert typist.wait_ready() == "nmt: ready: type a sentence and press Enter; Ctrl-D ends\n"
        answers = [typist.answer(line) for line in lines]
        assert typist.finish() == 0
        said = typist.process.stderr.read().decode()
        assert "ready" not in said and "Traceback" not in said, said
    finally:
        typist.process.kill()
    run = load_run(trained_run, torch.device("cpu"))
    expected = TorchTranslator.of_run(run).with_search(beam_size=1).translate(lines)
    assert answers == [text + "\n" for text in expected]


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


def test_out_of_memory_in_translation_retries_in_halves(
    trained_run: Path, corpus: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    translator = TorchTranslator.of_run(load_run(trained_run, torch.device("cpu")))
    translator = translator.with_search(beam_size=1, nbest=1, batch_tokens=100_000)  # one batch
    sources = translator.encode((corpus / "test.src").read_text().splitlines()[:12])
    expected = translator.search(sources)
    real_search, sizes = nmt.decode.translator.search, []

    def search(model: object, src: torch.Tensor, *args: object) -> list[list[Hypothesis]]:
        sizes.append(src.size(0))
        if src.size(0) > 3:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory.")
        return real_search(model, src, *args)

    monkeypatch.setattr(nmt.decode.translator, "search", search)
    got = translator.search(sources)
    assert [[h.tokens for h in hyps] for hyps in got] == [[h.tokens for h in hyps] for hyps in expected]
    scores = [h.score for hyps in got for h in hyps]  # other batches, other padding: equal up to rounding
    assert scores == pytest.approx([h.score for hyps in expected for h in hyps], abs=1e-4)
    assert sizes == [12, 6, 3, 3, 6, 3, 3]
    assert "out of GPU memory decoding 12 sentences; retrying in batches of 6" in caplog.text


def test_out_of_memory_on_one_sentence_is_one_line(
    trained_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def out_of_memory(*_: object) -> None:
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(nmt.decode.translator, "search", out_of_memory)
    result = run_cli("translate", str(trained_run), "--beam-size", "1", input="kalo mi su\n")
    assert_one_line_error(result, "out of GPU memory translating one sentence", "--beam-size")


def test_alignments_follow_each_translation(trained_run: Path, corpus: Path, tmp_path: Path) -> None:
    """` ||| i-j` after each translation: source word i of the line, output word j of the translation, every
    output word linked; a blank line's translation has none and stays an empty line, as without
    --alignments. N-best lines and JSON lines carry them too."""
    lines = [*(corpus / "test.src").read_text().splitlines()[:10], ""]
    (tmp_path / "in.txt").write_text("".join(line + "\n" for line in lines))
    args = ["translate", str(trained_run), "-i", str(tmp_path / "in.txt"), "--beam-size", "1"]
    code, out, err = run_cli(*args, "--alignments")
    assert code == 0, err
    plain = run_cli(*args)[1].splitlines()
    assert out.splitlines()[-1] == plain[-1] == ""
    for source, line, text in zip(lines[:-1], out.splitlines()[:-1], plain[:-1], strict=True):
        translation, links = line.split(" ||| ")
        assert translation == text
        found = parse_links(links, "the output").possible
        assert all(i < len(source.split()) for i, _ in found)
        assert {j for _, j in found} == set(range(len(translation.split())))
    code, nbest, err = run_cli(*args[:-1], "3", "--nbest", "2", "--alignments")
    assert code == 0, err
    assert all(len(line.split(" ||| ")) == 4 for line in nbest.splitlines())
    code, jsonl, err = run_cli(*args, "--alignments", "--format", "jsonl")
    assert code == 0, err
    first = json.loads(jsonl.splitlines()[0])["hypotheses"][0]
    links = parse_links(out.splitlines()[0].split(" ||| ")[1], "the first line").possible
    assert first["alignment"] == [list(link) for link in sorted(links)]
