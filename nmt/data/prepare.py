"""Corpus → tokenizers (trained on a bounded sample, cached, or the run's own) → encoded training pairs
(memory-mapped from the cache) and the validation split (in memory), ready for batching.

Nothing is read twice that the cache holds: a second run on the same data finds its tokenizer and encoded
training split there, and `--resume` (or another process of the job) its encoded split. Each phase logs
its time and size; see nmt/data/cache.py for where the cache lives and what its keys cover.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sentencepiece as spm

from nmt.data.arrays import EncodedCorpus, TokenArray, open_corpus
from nmt.data.cache import Entry, cache_root, cached, file_identity
from nmt.data.corpus import ParallelText, SplitFiles, count_lines, read_split, split_files
from nmt.data.directions import DirectionData
from nmt.data.encode import encode_split
from nmt.data.prepare_languages import prepare_languages
from nmt.data.sample import SEED, write_sample
from nmt.data.tokenizer import Tokenizers, install_tokenizers, load_tokenizers, train_tokenizers

if TYPE_CHECKING:  # the data reads only its own sections of the config: no import of the models
    from nmt.config.schema import Config

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PreparedData:
    tokenizers: Tokenizers
    train: EncodedCorpus
    valid: ParallelText
    valid_ids: EncodedCorpus
    directions: DirectionData | None = None  # a multilingual run's (nmt/data/prepare_languages.py)


@dataclass(frozen=True)
class TrainFiles:
    """The training split's files; their line count is taken (and the files checked) once, when needed."""

    files: SplitFiles
    skip_bad_lines: bool

    @functools.cached_property
    def checked(self) -> tuple[int, float]:
        """The line count (see `count_lines` for the checks) and the seconds the check took."""
        started = time.perf_counter()
        return count_lines(self.files, self.skip_bad_lines), time.perf_counter() - started

    @property
    def lines(self) -> int:
        return self.checked[0]

    @functools.cached_property
    def identity(self) -> list[dict[str, Any]]:
        return [file_identity(path) for path in (self.files.src, self.files.tgt) if path is not None]


def prepare_data(
    cfg: Config, run_dir: Path, reuse_tokenizers: bool, cache: Path | None = None
) -> PreparedData:
    """Check the data, get the tokenizers into `run_dir` (trained, or from the cache; with
    `reuse_tokenizers`, those already there), encode the training split into the cache (`cache`, default
    `cache_root()`) or open it there, and encode the validation split."""
    root = cache or cache_root()
    if cfg.data.multilingual is not None:
        return PreparedData(*prepare_languages(cfg, run_dir, reuse_tokenizers, root))
    train = TrainFiles(split_files(cfg.data, "train"), cfg.data.skip_bad_lines)
    valid = read_split(cfg.data, "valid")
    if reuse_tokenizers:
        tokenizers = load_tokenizers(run_dir, cfg.tokenizer.joint)
    else:
        tokenizers = _tokenizers(cfg, train, run_dir, root)
    return PreparedData(tokenizers, _encoded(cfg, train, tokenizers, root), valid, encode(tokenizers, valid))


def _tokenizers(cfg: Config, train: TrainFiles, run_dir: Path, root: Path) -> Tokenizers:
    """The tokenizers trained on a sample of the training split, from the cache, copied into `run_dir`."""
    inputs = {
        "sentencepiece": spm.__version__,
        "tokenizer": dataclasses.asdict(cfg.tokenizer),
        "train": train.identity,
        "skip_bad_lines": cfg.data.skip_bad_lines,
        "sample_seed": SEED,
    }

    def fill(directory: Path) -> dict[str, Any]:
        sample = write_sample(train.files, train.lines, cfg.tokenizer, directory)
        started = time.perf_counter()
        tokenizers = train_tokenizers(cfg.tokenizer, sample.src, sample.tgt, directory)
        sample.src.path.unlink()
        sample.tgt.path.unlink()
        log.info(
            "tokenizer: %d pieces trained in %.1f s on %d sentences of %d lines (checked in %.1f s)",
            len(tokenizers.src),
            time.perf_counter() - started,
            sample.sentences,
            *train.checked,
        )
        return {"sample_sentences": sample.sentences}

    def install(directory: Path, _manifest: dict[str, Any]) -> Tokenizers:
        return install_tokenizers(directory, run_dir, cfg.tokenizer.joint)

    return cached(Entry(root, "tokenizer", inputs), fill, install)


def _encoded(cfg: Config, train: TrainFiles, tokenizers: Tokenizers, root: Path) -> EncodedCorpus:
    """The training split encoded by `tokenizers`, memory-mapped from the cache (encoded first on a miss)."""
    inputs = {
        "tokenizers": [tokenizers.src.fingerprint, tokenizers.tgt.fingerprint],
        "train": train.identity,
        "max_len": cfg.data.max_len,
        "skip_bad_lines": cfg.data.skip_bad_lines,
    }

    def fill(directory: Path) -> dict[str, Any]:
        return encode_split(
            train.files, train.lines, tokenizers, cfg.data.max_len, cfg.data.skip_bad_lines, directory
        )

    def use(directory: Path, manifest: dict[str, Any]) -> tuple[EncodedCorpus, dict[str, Any]]:
        return open_corpus(directory, manifest.get("arrays", {})), manifest

    corpus, manifest = cached(Entry(root, "encoded", inputs), fill, use)
    dropped = ", ".join(f"{count} {why.replace('_', ' ')}" for why, count in manifest["dropped"].items())
    log.info(
        "train: %d pairs, %d tokens (%.1f MiB on disk) of %d lines (dropped: %s)",
        len(corpus),
        len(corpus.src.tokens) + len(corpus.tgt.tokens),
        sum(f["bytes"] for f in manifest["files"].values()) / 2**20,
        manifest["lines"],
        dropped,
    )
    return corpus


def encode(tokenizers: Tokenizers, text: ParallelText) -> EncodedCorpus:
    """Subword ids of both sides of a (small) parallel text, in memory."""
    src, tgt = tokenizers.src.encode(text.src), tokenizers.tgt.encode(text.tgt)
    return EncodedCorpus(TokenArray.from_ids(src), TokenArray.from_ids(tgt))
