"""Shared fixtures: a synthetic reordering corpus and one tiny trained run reused by the CLI tests."""

from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from nmt.cli import app
from nmt.data.synthetic import write_reordering_corpus

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session", autouse=True)
def data_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The data cache of the session's tests (and of the processes they start), never ~/.cache/nmt."""
    path = tmp_path_factory.mktemp("nmt-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("NMT_CACHE", str(path))
        yield path


@pytest.fixture(scope="session")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small reordering task (target = word-by-word translation in reverse order)."""
    return write_reordering_corpus(
        tmp_path_factory.mktemp("corpus"), train=3000, valid=100, test=100, vocab=60, min_len=3, max_len=7
    )


def run_cli(*args: str, input: str | None = None) -> tuple[int, str, str]:
    """Run `nmt ARGS` in-process; returns exit code, stdout and stderr."""
    result = CliRunner().invoke(app, list(args), input=input)
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="session")
def trained_run(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny Transformer trained for a few hundred steps through the CLI."""
    run_dir = tmp_path_factory.mktemp("runs") / "tf"
    code, _, err = run_cli(
        "train",
        str(ROOT / "configs" / "tiny-transformer.yaml"),
        "--data",
        str(corpus),
        "--out",
        str(run_dir),
        "--device",
        "cpu",
        "--max-steps",
        "300",
        "--max-time",
        "0",
        "--set",
        "train.eval_every=150",
    )
    assert code == 0, err
    return run_dir
