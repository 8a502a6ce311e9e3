"""Shared fixtures: a synthetic reordering corpus and tiny trained runs reused by the CLI tests; and the
helpers the tests of several packages use (the CLI in-process or in a process of its own, its errors, a run's
records)."""

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from typer.testing import CliRunner

from nmt.cli import app
from nmt.config.yaml_file import load_config
from nmt.data.prepare import PreparedData
from nmt.data.synthetic import write_reordering_corpus
from nmt.device.choice import resolve_device
from nmt.run.checkpoint_io import load_checkpoint
from nmt.run.directory import RunDir
from nmt.train.command import prepared as prepared_run
from nmt.train.loop import Trainer
from tests.synthetic import write_multilingual_corpus, write_reordering_links

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


@pytest.fixture(scope="session")
def labelled(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's reordering corpus with the true links of its training and validation splits."""
    folder = tmp_path_factory.mktemp("labelled")
    for name in ("train.src", "train.tgt", "valid.src", "valid.tgt"):
        shutil.copy(corpus / name, folder / name)
    write_reordering_links(folder / "train.src", folder / "train.links")
    write_reordering_links(folder / "valid.src", folder / "valid.links")
    return folder


def guided_args(data: Path, out: Path, *extra: str, steps: int = 300) -> list[str]:
    """`nmt train` arguments of the tiny Transformer guided by `data`'s links for `steps` updates, `extra`
    settings last."""
    sets = [
        f"train.alignment.links={data / 'train.links'}",
        f"train.alignment.gold_src={data / 'valid.src'}",
        f"train.alignment.gold_tgt={data / 'valid.tgt'}",
        f"train.alignment.gold_links={data / 'valid.links'}",
        "train.alignment.weight=0.5",
        "tokenizer.vocab_size=500",
        "train.eval_every=150",
        "train.final_report=false",
        *extra,
    ]
    config = str(ROOT / "configs" / "tiny-transformer.yaml")
    args = ["train", config, "--data", str(data), "--out", str(out), "--device", "cpu", "--max-time", "0"]
    return args + ["--max-steps", str(steps)] + [arg for s in sets for arg in ("--set", s)]


@pytest.fixture(scope="session")
def guided_run(labelled: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny Transformer, narrowed to d_model 64, trained briefly (120 updates of 1,000 tokens after a
    short warm-up: the alignment loss falls from 1.4 to 0.05, as the full width's does) with guided alignment
    on decoder layer 0's first two heads, Shift-Att and the null slot."""
    out = tmp_path_factory.mktemp("guided") / "run"
    heads = ["train.alignment.layer=0", "train.alignment.heads=2"]
    rules = ["train.alignment.shift=true", "train.alignment.null_slot=true"]
    narrow = ["model.transformer.d_model=64", "model.transformer.ff_dim=128", "train.batch_tokens=1000"]
    sets = [*heads, *rules, *narrow, "train.warmup_steps=40"]
    code, _, err = run_cli(*guided_args(labelled, out, *sets, steps=120))
    assert code == 0, err
    return out


@pytest.fixture(scope="session")
def three_languages(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding MULTILINGUAL_CONFIG (config.yaml) and its synthetic corpus of three languages
    (data/)."""
    root = tmp_path_factory.mktemp("three-languages")
    write_multilingual_corpus(root / "data", train=400, valid=12, test=6, vocab=40)
    (root / "config.yaml").write_text(MULTILINGUAL_CONFIG)
    return root


def prepared(config: Path, data: Path, run_dir: Path, *sets: str) -> tuple[PreparedData, list[str]]:
    """The data of a run of `config` (with `KEY=VALUE` overrides) on the corpus in `data`, prepared in
    `run_dir` as `nmt train` prepares it (alignment links included), and the overrides that make its
    config."""
    overrides = [f"data.dir={data}", *sets]
    run_dir.mkdir(parents=True)
    return prepared_run(load_config(config, overrides), run_dir, reuse_tokenizers=False), overrides


def make_trainer(
    config: Path, data: PreparedData, run_dir: Path, overrides: list[str], *sets: str
) -> Trainer:
    """A trainer of `config` with `overrides` and then `sets`, over data prepared in `run_dir` (`prepared`);
    its device is the config's `train.device`."""
    cfg = load_config(config, [*overrides, *sets])
    return Trainer(cfg, RunDir(run_dir), data, resolve_device(cfg.train.device))


def updates(trainer: Trainer, count: int) -> list[float]:
    """The summed loss of each of the next `count` updates of the trainer's epoch."""
    out = []
    for _, (_, batches) in zip(range(count), trainer.stream.epoch(trainer.progress), strict=False):
        result = trainer.train_step(batches)
        assert result is not None
        out.append(result[0].item())
    return out


def run_cli(*args: str, input: str | None = None) -> tuple[int, str, str]:
    """Run `nmt ARGS` in-process; returns exit code, stdout and stderr."""
    result = CliRunner().invoke(app, list(args), input=input)
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def trained_args(corpus: Path, out: Path, *sets: str) -> list[str]:
    """`nmt train` arguments of the session's tiny Transformer (`trained_run`) on `corpus`, `sets` last: 300
    updates of 1,500 tokens after a 100-update warm-up, validated at 150 and 300. About half the time of the
    config's 3,000-token updates and 200-update warm-up, and as good on this task (test BLEU 87 and 84 with
    seeds 1234 and 7 at beam 3, against 84 with seed 1234): the model learns it by its number of updates,
    and the shorter warm-up reaches the learning rate sooner."""
    overrides = ["train.eval_every=150", "train.batch_tokens=1500", "train.warmup_steps=100", *sets]
    config = str(ROOT / "configs" / "tiny-transformer.yaml")
    args = ["train", config, "--data", str(corpus), "--out", str(out), "--device", "cpu"]
    return [*args, "--max-steps", "300", "--max-time", "0", *(arg for s in overrides for arg in ("--set", s))]


@pytest.fixture(scope="session")
def trained_run(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny Transformer trained for a few hundred steps through the CLI (`trained_args`), with its final
    report, its pictures not drawn (`skip_drawing`: no test reads them)."""
    run_dir = tmp_path_factory.mktemp("runs") / "tf"
    with pytest.MonkeyPatch.context() as patch:
        skip_drawing(patch)
        code, _, err = run_cli(*trained_args(corpus, run_dir))
    assert code == 0, err
    return run_dir


TINY_CONFIG = """\
data: {src_lang: src, tgt_lang: tgt, max_len: 64}
tokenizer: {vocab_size: 200}
model: {encoder_layers: 1, decoder_layers: 1, dropout: 0.1, transformer: {d_model: 32, heads: 2, ff_dim: 64}}
train: {device: cpu, batch_tokens: 600, pad_to_multiple: 1, lr: 2.0e-3, warmup_steps: 20, eval_every: 5,
        eval_max_sentences: 20, log_every: 1, max_time: 0.0}
search: {beam_size: 1, batch_tokens: 1000}
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


MULTILINGUAL_DIRECTIONS = ["xa-xb", "xb-xa", "xa-xc", "xc-xa"]
MULTILINGUAL_CONFIG = """\
data: {max_len: 64, multilingual: {directions: [xa-xb, xb-xa, xa-xc, xc-xa], weights: {xa-xc: 2.0}}}
tokenizer: {vocab_size: 200}
model: {encoder_layers: 1, decoder_layers: 1, dropout: 0.1, transformer: {d_model: 32, heads: 2, ff_dim: 64}}
train: {device: cpu, batch_tokens: 600, pad_to_multiple: 1, lr: 2.0e-3, warmup_steps: 20, eval_every: 5,
        eval_max_sentences: 8, log_every: 5, max_time: 0.0}
search: {beam_size: 2, batch_tokens: 2000, max_len_a: 1.0, max_len_b: 4}
"""


def train_multilingual(root: Path, tags: str, drawn: bool = True) -> Path:
    """A tiny run on four directions between three synthetic languages (xa, xb, xc), its tags on the
    `tags` side, trained for 10 steps with its final report (its pictures drawn, or not: `skip_drawing`);
    its data in root/data."""
    data = write_multilingual_corpus(root / "data", train=400, valid=12, test=6, vocab=40)
    (root / "config.yaml").write_text(MULTILINGUAL_CONFIG)
    run = root / "run"
    tagged = f"data.multilingual.tags={tags}"
    args = ["--data", str(data), "--out", str(run), "--max-steps", "10", "--set", tagged]
    with pytest.MonkeyPatch.context() as patch:
        if not drawn:
            skip_drawing(patch)
        code, _, err = run_cli("train", str(root / "config.yaml"), *args)
    assert code == 0, err
    return run


@pytest.fixture(scope="session")
def multilingual_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny multilingual run with its tags as the encoder's first source token."""
    return train_multilingual(tmp_path_factory.mktemp("multilingual"), "encoder")


@pytest.fixture(scope="session")
def decoder_tag_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny multilingual run with its tags as the decoder's first target token (the default); its
    pictures are not drawn (no test reads them; `multilingual_run`'s are drawn and checked)."""
    return train_multilingual(tmp_path_factory.mktemp("decoder-tags"), "decoder", drawn=False)


LEARNED_CONFIG = """\
data: {max_len: 64, multilingual: {directions: [xa-xb, xb-xa, xa-xc, xc-xa], tags: decoder}}
tokenizer: {vocab_size: 300}
model: {encoder_layers: 2, decoder_layers: 2, dropout: 0.0, transformer: {d_model: 64, heads: 4, ff_dim: 128}}
train: {device: cpu, batch_tokens: 2000, pad_to_multiple: 1, lr: 3.0e-3, warmup_steps: 100, eval_every: 400,
        eval_max_sentences: 50, log_every: 100, max_time: 0.0}
search: {beam_size: 1, batch_tokens: 2000}
"""


@pytest.fixture(scope="session")
def learned_multilingual(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A three-language run with decoder tags that learned its four directions (800 steps; for the slow
    layer), its data in ../data."""
    root = tmp_path_factory.mktemp("learned-multilingual")
    data = write_multilingual_corpus(root / "data", train=3000, valid=100, test=100, vocab=60)
    (root / "config.yaml").write_text(LEARNED_CONFIG)
    run = root / "run"
    args = ["--data", str(data), "--out", str(run), "--max-steps", "800"]
    code, _, err = run_cli("train", str(root / "config.yaml"), *args)
    assert code == 0, err
    return run


def train_args(tiny: Path, data: Path, out: Path, *extra: str) -> list[str]:
    return ["train", str(tiny), "--data", str(data), "--out", str(out), *extra]


@pytest.fixture(scope="session")
def terminology_run(tiny: Path, labelled: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny config trained 10 steps with terminology annotation (half the pairs, from the true links)."""
    run = tmp_path_factory.mktemp("terminology") / "run"
    sets = [f"data.terminology.links={labelled / 'train.links'}", "data.terminology.probability=0.5"]
    code, _, err = run_cli(*train_args(tiny, labelled, run, *FAST, *[a for s in sets for a in ("--set", s)]))
    assert code == 0, err
    return run


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


def skip_drawing(patch: pytest.MonkeyPatch) -> None:
    """Figures are built but never drawn: `savefig` writes UNDRAWN in place of the image, which nmt then
    writes where and as it writes an image. For tests that read a run's report, its files or their modes,
    not its pictures: drawing the curves and heatmaps is most of a tiny run's final report (those of
    tests/train/test_train.py and tests/train/test_multilingual.py are drawn and checked)."""
    import matplotlib.figure

    def save(figure: matplotlib.figure.Figure, target: Any, **kwargs: Any) -> None:
        if hasattr(target, "write"):
            target.write(UNDRAWN)
        else:
            Path(target).write_bytes(UNDRAWN)

    patch.setattr(matplotlib.figure.Figure, "savefig", save)


UNDRAWN = b"figure not drawn (tests/conftest.py skip_drawing)"


@pytest.fixture
def undrawn(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test's figures are not drawn (`skip_drawing`)."""
    skip_drawing(monkeypatch)


NO_REPORT = ["--set", "train.final_report=false"]  # for tests of training alone: an untrained model's report
# decodes every sentence to the length limit and draws its heatmaps, most of a short run's time
FAST = ["--max-steps", "10", *NO_REPORT]


@pytest.fixture(scope="session")
def kept_master(tiny: Path, small_corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """10 steps validated every 5, both validations kept as snapshots and averaged: trained once, read only
    through `kept_run`'s copies."""
    run = tmp_path_factory.mktemp("kept") / "kept"
    keep = ["--set", "train.keep_checkpoints=2", "--set", "train.average_checkpoints=2"]
    code, _, err = run_cli(*train_args(tiny, small_corpus, run, *FAST, *keep))
    assert code == 0, err
    return run


@pytest.fixture
def kept_run(kept_master: Path, tmp_path: Path) -> Path:
    """A test's own copy of `kept_master`, to resume, damage or overwrite."""
    return Path(shutil.copytree(kept_master, tmp_path / "kept"))


def train_losses(run_dir: Path) -> list[tuple[int, float]]:
    """(step, loss) of every training record in the run's metrics.jsonl."""
    records = map(json.loads, (run_dir / "metrics.jsonl").read_text().splitlines())
    return [(r["step"], r["loss"]) for r in records if r["kind"] == "train"]


def finite_weights(path: Path) -> bool:
    checkpoint = load_checkpoint(path)
    return all(torch.isfinite(t).all() for t in checkpoint["model"].values() if t.is_floating_point())


def assert_error_line_last(result: tuple[int, str, str], *fragments: str) -> None:
    """For errors after training started: exit code 2, the error is the last stderr line, no traceback."""
    code, out, err = result
    assert code == 2, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("nmt: error: ") and "Traceback" not in out + err, err
    assert sum("error" in line for line in err.splitlines()) == 1, err
    for fragment in fragments:
        assert fragment in last, (fragment, last)


def start_nmt(*args: str) -> subprocess.Popen:
    """`python -m nmt -q ARGS` in a process of its own, its standard streams pipes."""
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "nmt", "-q", *args]
    return subprocess.Popen(
        command, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def wait_until(
    condition: Callable[[], object], process: subprocess.Popen, poll: float = 0.005, timeout: float = 120
) -> None:
    """Poll `condition` until it holds; the process must still run meanwhile."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "timed out"
        time.sleep(poll)


def assert_interrupted(process: subprocess.Popen, *lines: str) -> str:
    """Exit code 130 and one line on stderr, one of `lines` (or starting with 'nmt: training interrupted')."""
    _, err = process.communicate(timeout=120)
    assert process.returncode == 130, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err and "Exception ignored" not in err, (
        err
    )
    assert err.strip() in lines or err.startswith("nmt: training interrupted at step "), err
    return err.strip()
