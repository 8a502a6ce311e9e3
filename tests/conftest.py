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


TINY_CONFIG = """\
data: {src_lang: src, tgt_lang: tgt, max_len: 64}
tokenizer: {vocab_size: 200}
model: {encoder_layers: 1, decoder_layers: 1, dropout: 0.1, transformer: {d_model: 32, heads: 2, ff_dim: 64}}
train: {device: cpu, batch_tokens: 600, pad_to_multiple: 1, lr: 2.0e-3, warmup_steps: 20, eval_every: 5,
        eval_max_sentences: 20, log_every: 1, max_time: 0.0}
search: {beam_size: 1, batch_size: 50}
"""


@pytest.fixture(scope="session")
def small_corpus(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """300 training pairs: a few batches per epoch, so short runs cross epoch boundaries."""
    return copy_corpus(corpus, tmp_path_factory.mktemp("small") / "data")


@pytest.fixture(scope="session")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A config that trains a few dozen steps in about a second (with dropout, so the RNG state matters)."""
    path = tmp_path_factory.mktemp("config") / "tiny.yaml"
    path.write_text(TINY_CONFIG)
    return path


def train_args(tiny: Path, data: Path, out: Path, *extra: str) -> list[str]:
    return ["train", str(tiny), "--data", str(data), "--out", str(out), *extra]


def assert_one_line_error(result: tuple[int, str, str], *fragments: str) -> None:
    """Exit code 2, exactly one line on stderr naming every fragment, no traceback."""
    code, out, err = result
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("nmt: error: ") and "Traceback" not in out + err
    for fragment in fragments:
        assert fragment in err, (fragment, err)


def copy_corpus(corpus: Path, to: Path, lines: int = 300) -> Path:
    """The first `lines` pairs of each split of the session corpus."""
    to.mkdir(parents=True)
    for path in corpus.iterdir():
        (to / path.name).write_text("".join(path.read_text().splitlines(keepends=True)[:lines]))
    return to
