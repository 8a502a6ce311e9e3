"""Translating streams: chunk by chunk in order with empty lines kept, and line by line from a terminal."""

from __future__ import annotations

import io
import os
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch

import nmt.decode.translate
from nmt.config.schema import replace as config_replace
from nmt.decode.trained_run import load_run
from nmt.decode.translate import translate, translate_stream
from tests.conftest import run_cli


def test_chunks_keep_the_order_and_the_empty_lines(
    trained_run: Path, corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = (corpus / "test.src").read_text().splitlines()[:7]
    lines = [s[0], "", s[1], " \t ", s[2], s[3], "", s[4], s[5], s[6]]
    run = load_run(trained_run, torch.device("cpu"))
    whole = translate(replace(run, cfg=config_replace(run.cfg, search={"beam_size": 1})), lines)
    monkeypatch.setattr(nmt.decode.translate, "CHUNK_LINES", 3)  # chunks cut through the empty lines
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
        worker = threading.Thread(
            target=translate_stream, args=(run, source, "stdin", out), kwargs={"interactive": True}
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
