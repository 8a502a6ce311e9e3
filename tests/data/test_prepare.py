"""Preparing the data through the cache: hits, misses on every input change, rebuilds of damaged entries."""

from __future__ import annotations

import builtins
import gc
import json
import logging
import os
from pathlib import Path

import numpy as np
import pytest

import nmt.data.arrays
import nmt.data.sample
from nmt.config.schema import Config
from nmt.config.yaml_file import load_config
from nmt.data.arrays import EncodedCorpus, TokenArray
from nmt.data.prepare import PreparedData, encoders, prepare_data
from nmt.data.splits import read_directions
from nmt.errors import UserError
from tests.conftest import ROOT, assert_one_line_error, copy_corpus, run_cli, train_args


@pytest.fixture
def data(corpus: Path, tmp_path: Path) -> Path:
    return copy_corpus(corpus, tmp_path / "data", lines=400)


def config(data: Path, *overrides: str) -> Config:
    settings = [f"data.dir={data}", "tokenizer.vocab_size=120", *overrides]
    return load_config(ROOT / "configs" / "tiny-transformer.yaml", settings)


def prepare(
    cfg: Config, run_dir: Path, cache: Path, caplog: pytest.LogCaptureFixture, reuse: bool = False
) -> tuple[PreparedData, str]:
    """prepare_data, and what it logged about the cache."""
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="nmt"):
        prepared = prepare_data(cfg, run_dir, reuse_tokenizers=reuse, cache=cache)
    return prepared, " ".join(r.getMessage() for r in caplog.records if "cache" in r.getMessage())


def arrays(prepared: PreparedData) -> list[np.ndarray]:
    train = prepared.train
    return [np.array(a) for a in (train.src.tokens, train.src.offsets, train.tgt.tokens, train.tgt.offsets)]


def test_second_run_and_resume_hit_the_cache(
    data: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cfg, cache = config(data), tmp_path / "cache"
    first, log = prepare(cfg, tmp_path / "a", cache, caplog)
    assert "tokenizer cache miss" in log and "encoded cache miss" in log
    second, log = prepare(cfg, tmp_path / "b", cache, caplog)
    assert "tokenizer cache hit" in log and "encoded cache hit" in log and "miss" not in log
    assert (tmp_path / "a" / "spm.model").read_bytes() == (tmp_path / "b" / "spm.model").read_bytes()
    assert all(np.array_equal(x, y) for x, y in zip(arrays(first), arrays(second), strict=True))
    resumed, log = prepare(cfg, tmp_path / "a", cache, caplog, reuse=True)
    assert log == f"encoded cache hit: {next((cache / 'encoded').iterdir())}"  # the run's own tokenizer
    assert isinstance(resumed.train.src.tokens.base, np.memmap)


def test_cached_arrays_hold_what_encoding_in_memory_gives(
    data: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cfg = config(data, "data.max_len=6")
    prepared, _ = prepare(cfg, tmp_path / "run", tmp_path / "cache", caplog)
    ((direction, text),) = read_directions(cfg.data, "train").items()
    source, target = encoders(prepared.tokenizers, prepared.directions.tags, direction)
    memory = EncodedCorpus(TokenArray.from_ids(source(text.src)), TokenArray.from_ids(target(text.tgt)))
    src_len, tgt_len = memory.lengths()
    kept = np.flatnonzero(np.maximum(src_len, tgt_len) - 1 <= 6)
    assert 0 < len(kept) < len(memory) == 400  # some pairs are over data.max_len
    assert len(prepared.train) == len(kept)
    assert prepared.train.lines is not None and prepared.train.lines.tolist() == kept.tolist()  # their lines
    for i, k in enumerate(kept.tolist()):
        assert prepared.train.src[i].tolist() == memory.src[k].tolist()
        assert prepared.train.tgt[i].tolist() == memory.tgt[k].tolist()
    assert prepared.train.src.tokens.dtype == np.uint16


@pytest.mark.parametrize("max_len", [6, 1])
def test_encoding_gives_the_garbage_collector_back(
    max_len: int, data: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Encoding pauses Python's cyclic garbage collector; it is on again afterwards, also when encoding fails
    (data.max_len=1: no pair is short enough)."""
    cfg = config(data, f"data.max_len={max_len}")
    assert gc.isenabled()
    if max_len == 1:
        with pytest.raises(UserError, match=r"no training pair is within data\.max_len=1"):
            prepare(cfg, tmp_path / "run", tmp_path / "cache", caplog)
    else:
        prepare(cfg, tmp_path / "run", tmp_path / "cache", caplog)
    assert gc.isenabled()


@pytest.mark.parametrize(
    ("change", "tokenizer", "encoded"),
    [
        ("append a line", "miss", "miss"),
        ("same size and time, other bytes", "miss", "miss"),
        ("data.max_len=32", "hit", "miss"),
        ("data.skip_bad_lines=true", "miss", "miss"),
        ("data.unescape_entities=false", "miss", "miss"),  # the text read changes: so do both entries
        ("tokenizer.vocab_size=100", "miss", "miss"),
        ("nothing", "hit", "hit"),
    ],
)
def test_every_input_change_misses(
    change: str,
    tokenizer: str,
    encoded: str,
    data: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    cache, overrides = tmp_path / "cache", []
    prepare(config(data), tmp_path / "a", cache, caplog)
    train = data / "train.tgt"
    if change == "append a line":
        for side in ("src", "tgt"):
            with open(data / f"train.{side}", "a") as handle:
                handle.write("kalo mi\n")
    elif change == "same size and time, other bytes":
        stat, text = train.stat(), train.read_bytes()
        train.write_bytes(text[:-3] + bytes(reversed(text[-3:-1])) + b"\n")
        os.utime(train, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        assert (train.stat().st_size, train.stat().st_mtime_ns) == (stat.st_size, stat.st_mtime_ns)
    elif change != "nothing":
        overrides = [change]
    _, log = prepare(config(data, *overrides), tmp_path / "b", cache, caplog)
    assert f"tokenizer cache {tokenizer}" in log and f"encoded cache {encoded}" in log, log


DAMAGES = [
    "truncated tokens",
    "missing offsets",
    "garbled manifest",
    "no manifest",
    "flipped model byte",
    "bad offsets",
]


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_entry_is_rebuilt_never_used(
    damage: str, data: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cache = tmp_path / "cache"
    first, _ = prepare(config(data), tmp_path / "a", cache, caplog)
    expected = arrays(first)
    del first
    encoded, tokenizer = next((cache / "encoded").iterdir()), next((cache / "tokenizer").iterdir())
    if damage == "truncated tokens":
        (encoded / "src.tokens").write_bytes((encoded / "src.tokens").read_bytes()[:-2])
    elif damage == "missing offsets":
        (encoded / "tgt.offsets").unlink()
    elif damage == "garbled manifest":
        (encoded / "manifest.json").write_text('{"format": 1, "key": ')
    elif damage == "no manifest":
        (encoded / "manifest.json").unlink()
    elif damage == "flipped model byte":
        model = bytearray((tokenizer / "spm.model").read_bytes())
        model[len(model) // 2] ^= 0xFF
        (tokenizer / "spm.model").write_bytes(bytes(model))
    else:  # offsets rewritten to fit the sizes the manifest records, but not the tokens
        manifest = json.loads((encoded / "manifest.json").read_text())
        offsets = np.fromfile(encoded / "src.offsets", dtype=np.int64)
        offsets[1], offsets[2] = offsets[2], offsets[1]
        offsets.tofile(encoded / "src.offsets")
        manifest["files"]["src.offsets"] = {"bytes": offsets.nbytes}
        (encoded / "manifest.json").write_text(json.dumps(manifest))
    second, log = prepare(config(data), tmp_path / "b", cache, caplog)
    broken = "tokenizer" if damage == "flipped model byte" else "encoded"
    assert f"{broken} cache entry" in log and "is damaged" in log and f"{broken} cache rebuild" in log, log
    assert all(np.array_equal(x, y) for x, y in zip(expected, arrays(second), strict=True))


def test_an_abandoned_build_is_cleared(data: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A build killed half-way leaves a temporary directory, never an entry: the next build removes it."""
    cache = tmp_path / "cache"
    abandoned = cache / "encoded" / ".0123abcd.999999999.xyz"
    abandoned.mkdir(parents=True)
    (abandoned / "src.tokens").write_bytes(b"\0" * 10)
    prepare(config(data), tmp_path / "a", cache, caplog)
    assert not abandoned.exists()
    assert [p.name.startswith(".") for p in (cache / "encoded").iterdir()] == [False]


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full, always full")
@pytest.mark.parametrize("module", [nmt.data.sample, nmt.data.arrays], ids=["tokenizer sample", "encoding"])
def test_a_full_disk_while_building_the_cache_is_one_line(
    module: object, small_corpus: Path, tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every file the module writes goes to /dev/full (its writes fail as on a full disk: ENOSPC, or a
    short write); the run says so in one line, leaves nothing half-built in the cache, and runs once there is
    room."""
    cache, run = tmp_path / "cache", tmp_path / "run"
    monkeypatch.setenv("NMT_CACHE", str(cache))
    args = train_args(tiny, small_corpus, run, "--max-steps", "1", "--set", "train.final_report=false")

    def full_disk(path: Path, mode: str = "r", *args: object, **kwargs: object) -> object:
        return builtins.open("/dev/full" if "w" in mode else path, mode, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(module, "open", full_disk, raising=False)
        result = run_cli("-q", *args)
    assert_one_line_error(
        result, f"disk full while building the corpus cache in {cache} (NMT_CACHE)", "free space", "NMT_CACHE"
    )
    assert not [path for path in cache.rglob("*") if path.name.startswith(".")]  # no temporary directory
    assert not (cache / "encoded").exists() or not any((cache / "encoded").iterdir())
    assert not run.exists()
    code, _, err = run_cli(*args)
    assert code == 0, err
