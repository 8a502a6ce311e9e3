"""README.md is the front door: short, free of development history, its test command the one CI runs, and its
CPU quick start runs as written (on a tiny corpus in the README's data layout, with tiny model overrides)."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from nmt.data.synthetic import write_reordering_corpus
from tests.conftest import ROOT

README = ROOT / "README.md"
TEST_COMMAND = 'pip install -e ".[dev]" && python -m pytest -q && python -m pytest -q -m slow'
HISTORY = re.compile(r"\bissue \d|\bthis session\b|\bround two\b|\blent machine|\d+ tests\b", re.I)
TINY = [
    "--max-steps",
    "12",
    "--max-time",
    "0",
    "--set",
    "train.eval_every=6",
    "--set",
    "tokenizer.vocab_size=120",
    "--set",
    "model.transformer.d_model=32",
    "--set",
    "model.transformer.ff_dim=64",
    "--set",
    "train.batch_tokens=600",
    "--set",
    "search.beam_size=2",
]


def code_blocks(text: str) -> list[tuple[str, str]]:
    """(the line before the block, the block's text) for every fenced code block."""
    pattern = re.compile(r"([^\n]*)\n```[a-z]*\n(.*?)\n```", re.S)
    return [(match.group(1), match.group(2)) for match in pattern.finditer(text)]


def quick_start() -> list[str]:
    """The commands of the README's CPU quick start: the code block after its `<!-- quick-start` marker."""
    blocks = code_blocks(README.read_text(encoding="utf-8"))
    blocks = [block for before, block in blocks if "quick-start" in before]
    assert len(blocks) == 1, "README.md needs exactly one code block after a <!-- quick-start --> comment"
    return [line for line in blocks[0].splitlines() if line.strip()]


def test_the_readme_is_short_and_free_of_development_history() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    assert not HISTORY.findall(text), HISTORY.findall(text)


def test_ci_runs_the_readme_test_command_word_for_word() -> None:
    readme_blocks = [block for _, block in code_blocks(README.read_text(encoding="utf-8"))]
    assert TEST_COMMAND in readme_blocks, "README.md must keep its test command in a code block of its own"
    assert TEST_COMMAND in (ROOT / ".ci" / "run").read_text().splitlines()


def test_the_quick_start_trains_translates_and_plots_in_three_commands() -> None:
    commands = quick_start()
    assert len(commands) <= 3
    heads = [shlex_head(command) for command in commands]
    assert heads == [["nmt", "train"], ["nmt", "translate"], ["nmt", "plot-attention"]]


def shlex_head(command: str) -> list[str]:
    """The nmt command a line runs (after any `echo … |`)."""
    return command.split("|")[-1].split()[:2]


@pytest.mark.slow
def test_the_quick_start_runs_as_written(tmp_path: Path) -> None:
    """The README's commands, run by bash in a directory laid out as the README says (configs/, and
    data/multi30k/ holding train/val/test2016 files as the raw Multi30k release names them), with overrides
    that make the model and the run tiny."""
    data = tmp_path / "data" / "multi30k"
    corpus = write_reordering_corpus(
        tmp_path / "corpus",
        train=400,
        valid=20,
        test=20,
        vocab=40,
        min_len=3,
        max_len=6,
        src_lang="de",
        tgt_lang="en",
    )
    data.mkdir(parents=True)
    for split, name in (("train", "train"), ("valid", "val"), ("test", "test2016")):
        for lang in ("de", "en"):
            shutil.copy(corpus / f"{split}.{lang}", data / f"{name}.{lang}")
    (tmp_path / "configs").symlink_to(ROOT / "configs")
    tiny = " ".join(TINY)
    lines = [f"{line} {tiny}" if shlex_head(line) == ["nmt", "train"] else line for line in quick_start()]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", "\n".join(lines)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip(), "nmt translate printed no translation"
    assert (tmp_path / "runs" / "m30k-cpu" / "report.json").is_file()
    assert (tmp_path / "attention.png").stat().st_size > 0
