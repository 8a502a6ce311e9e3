"""A multilingual run's data (nmt/data/prepare.py prepares a bilingual one's): one joint tokenizer with a tag
per language, trained on a balanced sample of every language; every direction's training pairs, tagged, in one
encoded corpus; each direction's validation pairs, tagged. Both go through the cache (nmt/data/cache.py),
whose keys cover the languages, the directions and the tags' placement: the epochs' draws of each direction
(weights, temperature) happen at batching and do not change what is cached."""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sentencepiece as spm

from nmt.config.multilingual import Direction, MultilingualConfig
from nmt.data.arrays import EncodedCorpus, TokenArray, open_corpus
from nmt.data.cache import Entry, cached
from nmt.data.corpus import ParallelText
from nmt.data.directions import DirectionData
from nmt.data.encode import Encoder, Part, encode_parts
from nmt.data.language_files import LanguageSplit, SplitCounts, language_split, multilingual, read_directions
from nmt.data.language_sample import write_language_sample
from nmt.data.language_tags import LanguageTags
from nmt.data.sample import SEED
from nmt.data.tokenizer import (
    Tokenizer,
    Tokenizers,
    install_tokenizers,
    load_tokenizers,
    tokenizer_paths,
    train_sentencepiece,
)

if TYPE_CHECKING:  # the data reads only its own sections of the config: no import of the models
    from nmt.config.schema import Config

log = logging.getLogger(__name__)

Prepared = tuple[Tokenizers, EncodedCorpus, ParallelText, EncodedCorpus, DirectionData]


@dataclass(frozen=True)
class TrainLanguages:
    """The training split of a multilingual run; checked and counted once, when needed (a cache miss)."""

    split: LanguageSplit
    cfg: MultilingualConfig
    skip_bad_lines: bool

    @functools.cached_property
    def counts(self) -> SplitCounts:
        return self.split.count(self.cfg.pairs, self.skip_bad_lines)


def prepare_languages(cfg: Config, run_dir: Path, reuse_tokenizers: bool, root: Path) -> Prepared:
    """What `prepare_data` prepares, for a multilingual run: the tokenizer (trained, from the cache, or with
    `reuse_tokenizers` the run's own), the training corpus of every direction, the validation split of every
    direction (its pairs one direction after another) and where each direction lies in them."""
    ml = multilingual(cfg.data)
    train = TrainLanguages(language_split(cfg.data, "train"), ml, cfg.data.skip_bad_lines)
    valid = read_directions(cfg.data, "valid")
    if reuse_tokenizers:
        tokenizers = load_tokenizers(run_dir, joint=True)
    else:
        tokenizers = _tokenizer(cfg, train, run_dir, root)
    tags = LanguageTags(tokenizers.src.tag_ids, ml.tags)
    tags.check(ml.languages)
    corpus, train_pairs = _encoded(cfg, train, tokenizers, tags, root)
    text = ParallelText(
        [s for t in valid.values() for s in t.src], [s for t in valid.values() for s in t.tgt]
    )
    src_ids, tgt_ids = [], []
    for direction, pairs in valid.items():
        encoders = _encoders(tokenizers.src, tags, direction)
        src_ids += encoders[0](pairs.src)
        tgt_ids += encoders[1](pairs.tgt)
    valid_ids = EncodedCorpus(TokenArray.from_ids(src_ids), TokenArray.from_ids(tgt_ids))
    directions = DirectionData.plan(ml, train_pairs, [len(t) for t in valid.values()], tags)
    _log_draws(directions)
    return tokenizers, corpus, text, valid_ids, directions


def _encoders(tokenizer: Tokenizer, tags: LanguageTags, direction: Direction) -> tuple[Encoder, Encoder]:
    """Source and target encoders of `direction`: the tokenizer's ids with the tag where `tags` puts it."""

    def source(sentences: list[str]) -> list[list[int]]:
        return [tags.source(ids, direction.tgt) for ids in tokenizer.encode(sentences)]

    def target(sentences: list[str]) -> list[list[int]]:
        return [tags.target(ids, direction.tgt) for ids in tokenizer.encode(sentences)]

    return source, target


def _tokenizer(cfg: Config, train: TrainLanguages, run_dir: Path, root: Path) -> Tokenizers:
    """The joint tokenizer with the run's language tags, trained on a balanced sample of the training split
    (from the cache), copied into `run_dir`."""
    languages = train.cfg.languages
    inputs = {
        "sentencepiece": spm.__version__,
        "tokenizer": dataclasses.asdict(cfg.tokenizer),
        "train": train.split.identity(),
        "skip_bad_lines": cfg.data.skip_bad_lines,
        "sample_seed": SEED,
        "languages": list(languages),
    }

    def fill(directory: Path) -> dict[str, Any]:
        sample, sentences = write_language_sample(train.split, train.counts, cfg.tokenizer, directory)
        started = time.perf_counter()
        path = tokenizer_paths(directory, joint=True)[0]
        train_sentencepiece(cfg.tokenizer, sample, path, languages)
        sample.path.unlink()
        log.info(
            "tokenizer: %d pieces (%d language tags) trained in %.1f s on %d sentences of %s",
            len(Tokenizer(path)),
            len(languages),
            time.perf_counter() - started,
            sentences,
            ", ".join(languages),
        )
        return {"sample_sentences": sentences}

    def install(directory: Path, _manifest: dict[str, Any]) -> Tokenizers:
        return install_tokenizers(directory, run_dir, joint=True)

    return cached(Entry(root, "tokenizer", inputs), fill, install)


def _encoded(
    cfg: Config, train: TrainLanguages, tokenizers: Tokenizers, tags: LanguageTags, root: Path
) -> tuple[EncodedCorpus, list[int]]:
    """Every direction's training pairs, tagged, in one corpus memory-mapped from the cache (encoded first on
    a miss), and how many pairs each direction holds (its rows follow those of the directions before)."""
    directions = train.cfg.pairs
    inputs = {
        "tokenizers": [tokenizers.src.fingerprint],
        "train": train.split.identity(),
        "max_len": cfg.data.max_len,
        "skip_bad_lines": cfg.data.skip_bad_lines,
        "directions": [direction.name for direction in directions],
        "tags": train.cfg.tags,
    }

    def fill(directory: Path) -> dict[str, Any]:
        parts = []
        for direction in directions:
            chunks = train.split.pairs(direction, cfg.data.skip_bad_lines)
            files = train.split.pair_files(direction)
            source, target = _encoders(tokenizers.src, tags, direction)
            parts.append(Part(f"train {direction.name}", files, chunks, source, target))
        lines = sum(train.counts.directions.values())
        return encode_parts(parts, lines, tokenizers, cfg.data.max_len, directory)

    def use(directory: Path, manifest: dict[str, Any]) -> tuple[EncodedCorpus, dict[str, Any]]:
        return open_corpus(directory, manifest.get("arrays", {})), manifest

    corpus, manifest = cached(Entry(root, "encoded", inputs), fill, use)
    pairs = [manifest["parts"][f"train {direction.name}"] for direction in directions]
    log.info(
        "train: %d pairs, %d tokens in %d directions: %s",
        len(corpus),
        len(corpus.src.tokens) + len(corpus.tgt.tokens),
        len(directions),
        ", ".join(f"{d.name} {n}" for d, n in zip(directions, pairs, strict=True)),
    )
    return corpus, pairs


def _log_draws(directions: DirectionData) -> None:
    if directions.resampled:
        log.info(
            "each epoch draws %s examples",
            ", ".join(
                f"{d.name} {drawn} ({drawn / max(n, 1):.2f}×)"
                for d, n, drawn in zip(
                    directions.directions, directions.train_pairs, directions.draws, strict=True
                )
            ),
        )
