"""Corpus → tokenizers (trained on a bounded sample, cached, or the run's own) → encoded training pairs
(memory-mapped from the cache) and the validation split (in memory), ready for batching; for every run alike,
a bilingual run being the one direction without tags of a multilingual one.

Every direction's training pairs go into one encoded corpus, one direction after another, with the
target-language tag where the run places one; the validation pairs too, and `DirectionData` says where each
direction lies and how each epoch draws it. Nothing is read twice that the cache holds: a second run on the
same data finds its tokenizer and encoded training split there (the keys cover the languages, the directions
and the tags' placement; the epochs' draws happen at batching), and `--resume` (or another process of the
job) its encoded split. Each phase logs its time and size; see nmt/data/cache.py for where the cache lives.
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

from nmt.config.multilingual import Direction, RunDirections
from nmt.data.arrays import EncodedCorpus, TokenArray, open_corpus
from nmt.data.cache import Entry, cache_root, cached
from nmt.data.corpus import ParallelText
from nmt.data.directions import DirectionData
from nmt.data.encode import Encoder, Part, encode_parts
from nmt.data.language_tags import LanguageTags
from nmt.data.sample import SEED, Sample, write_sample
from nmt.data.splits import LanguageSplit, SplitCounts, language_split, read_directions
from nmt.data.terminology import TermLinks, annotated_chunks
from nmt.data.tokenizer import Tokenizers, install_tokenizers, load_tokenizers
from nmt.data.tokenizer_training import Joined, train_tokenizers

if TYPE_CHECKING:  # the data reads only its own sections of the config: no import of the models
    from nmt.config.schema import Config

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PreparedData:
    tokenizers: Tokenizers
    train: EncodedCorpus
    valid: ParallelText  # every direction's pairs, one direction after another
    valid_ids: EncodedCorpus
    directions: DirectionData


@dataclass(frozen=True)
class TrainSplit:
    """The training split of a run; checked and counted once, when needed (a cache miss)."""

    split: LanguageSplit
    directions: RunDirections
    skip_bad_lines: bool

    @functools.cached_property
    def counts(self) -> SplitCounts:
        return self.split.count(self.directions.directions, self.skip_bad_lines)


def prepare_data(
    cfg: Config,
    run_dir: Path,
    reuse_tokenizers: bool,
    cache: Path | None = None,
    term_links: TermLinks | None = None,
) -> PreparedData:
    """Check the data, get the tokenizers into `run_dir` (trained, or from the cache `cache`, default
    `cache_root()`; with `reuse_tokenizers`, those already there), encode every direction's training pairs
    into the cache (or open them there; annotated with terms from `term_links` under data.terminology) and
    encode every direction's validation pairs."""
    root = cache or cache_root()
    directions = cfg.data.directions
    train = TrainSplit(language_split(cfg.data, "train"), directions, cfg.data.skip_bad_lines)
    valid = read_directions(cfg.data, "valid")
    if reuse_tokenizers:
        tokenizers = load_tokenizers(run_dir, cfg.tokenizer.joint, cfg.tokenizer.vocabulary)
    else:
        tokenizers = _tokenizers(cfg, train, run_dir, root)
    tags = LanguageTags.of(directions, tokenizers.src.tag_ids)
    corpus, train_pairs = _encoded(cfg, train, tokenizers, tags, root, term_links)
    text = ParallelText(
        [s for t in valid.values() for s in t.src], [s for t in valid.values() for s in t.tgt]
    )
    src_ids, tgt_ids = [], []
    for direction, pairs in valid.items():
        source, target = encoders(tokenizers, tags, direction)
        src_ids += source(pairs.src)
        tgt_ids += target(pairs.tgt)
    valid_ids = EncodedCorpus(TokenArray.from_ids(src_ids), TokenArray.from_ids(tgt_ids))
    plan = DirectionData.plan(directions, train_pairs, [len(t) for t in valid.values()], tags)
    _log_draws(plan)
    return PreparedData(tokenizers, corpus, text, valid_ids, plan)


def encoders(tokenizers: Tokenizers, tags: LanguageTags, direction: Direction) -> tuple[Encoder, Encoder]:
    """Source and target encoders of `direction`: the tokenizers' ids with the tag where `tags` puts it."""

    def source(sentences: list[str]) -> list[list[int]]:
        return [tags.source(ids, direction.tgt) for ids in tokenizers.src.encode(sentences)]

    def target(sentences: list[str]) -> list[list[int]]:
        return [tags.target(ids, direction.tgt) for ids in tokenizers.tgt.encode(sentences)]

    return source, target


def _tokenizers(cfg: Config, train: TrainSplit, run_dir: Path, root: Path) -> Tokenizers:
    """The tokenizers trained on a sample of the training split (from the cache), copied into `run_dir`: one
    joint model (with the run's language tags, where it places them), or a source and a target model."""
    directions, joint = train.directions, cfg.tokenizer.joint
    tagged = directions.languages if directions.tagged else ()
    inputs = {
        "sentencepiece": spm.__version__,
        "tokenizer": dataclasses.asdict(cfg.tokenizer),
        "train": train.split.identity(),
        "skip_bad_lines": cfg.data.skip_bad_lines,
        "unescape_entities": cfg.data.unescape_entities,
        "sample_seed": SEED,
        "languages": list(directions.languages),
        "tags": list(tagged),
    }
    symbols = cfg.data.terminology.markers if cfg.data.terminology else ()
    if symbols:
        inputs["symbols"] = list(symbols)

    def fill(directory: Path) -> dict[str, Any]:
        sample = write_sample(train.split, train.counts, cfg.tokenizer, directory)
        started = time.perf_counter()
        tokenizers = train_tokenizers(cfg.tokenizer, *_sides(sample, directions), directory, tagged, symbols)
        sample.remove()
        log.info(
            "tokenizer: %d pieces%s trained in %.1f s on %d sentences of %s",
            len(tokenizers.src),
            f" ({len(tagged)} language tags)" if tagged else "",
            time.perf_counter() - started,
            sample.sentences,
            ", ".join(sample.languages),
        )
        return {"sample_sentences": sample.sentences}

    def install(directory: Path, _manifest: dict[str, Any]) -> Tokenizers:
        return install_tokenizers(directory, run_dir, joint)

    return cached(Entry(root, "tokenizer", inputs), fill, install)


def _sides(sample: Sample, directions: RunDirections) -> tuple[Joined, Joined]:
    """The sampled sentences of the languages the run translates from, and of the others (a bilingual run:
    its source and its target language), each side's languages sorted."""
    sources = {d.src for d in directions.directions}
    return (
        Joined(tuple(lines for lang, lines in sample.languages.items() if lang in sources)),
        Joined(tuple(lines for lang, lines in sample.languages.items() if lang not in sources)),
    )


def _encoded(
    cfg: Config,
    train: TrainSplit,
    tokenizers: Tokenizers,
    tags: LanguageTags,
    root: Path,
    links: TermLinks | None,
) -> tuple[EncodedCorpus, list[int]]:
    """Every direction's training pairs, tagged where the run has tags, in one corpus memory-mapped from the
    cache (encoded first on a miss), and how many pairs each direction holds (its rows follow those of the
    directions before)."""
    directions = train.directions.directions
    inputs = {
        "tokenizers": [tokenizers.src.fingerprint, tokenizers.tgt.fingerprint],
        "train": train.split.identity(),
        "max_len": cfg.data.max_len,
        "skip_bad_lines": cfg.data.skip_bad_lines,
        "unescape_entities": cfg.data.unescape_entities,
        "directions": [direction.name for direction in directions],
        "tags": tags.placement,
    }
    terms, skip = cfg.data.terminology, cfg.data.skip_bad_lines
    if terms is not None:
        if links is None:
            raise ValueError(
                "data.terminology annotates with word links: pass them (nmt/train/term_links.py)"
            )
        settings = dataclasses.asdict(terms) | {"links": [links.identity(d) for d in directions]}
        inputs["terminology"] = settings | {"seed": cfg.train.seed}

    def fill(directory: Path) -> dict[str, Any]:
        parts = []
        for direction in directions:
            chunks = train.split.pairs(direction, skip)
            if terms is not None and links is not None:
                linked = links.read(direction)
                chunks = annotated_chunks(chunks, linked, terms, cfg.train.seed, direction.name)
            files = train.split.pair_files(direction)
            name = train.directions.label("train", direction)
            parts.append(Part(name, files, chunks, *encoders(tokenizers, tags, direction)))
        lines = sum(train.counts.directions.values())
        return encode_parts(parts, lines, tokenizers, cfg.data.max_len, directory)

    def use(directory: Path, manifest: dict[str, Any]) -> tuple[EncodedCorpus, dict[str, Any]]:
        return open_corpus(directory, manifest.get("arrays", {})), manifest

    corpus, manifest = cached(Entry(root, "encoded", inputs), fill, use)
    pairs = list(manifest["parts"].values())
    dropped = ", ".join(f"{count} {why.replace('_', ' ')}" for why, count in manifest["dropped"].items())
    each = ", ".join(f"{d.name} {n}" for d, n in zip(directions, pairs, strict=True))
    log.info(
        "train: %d pairs, %d tokens (%.1f MiB on disk) of %d lines (dropped: %s)%s",
        len(corpus),
        len(corpus.src.tokens) + len(corpus.tgt.tokens),
        sum(f["bytes"] for f in manifest["files"].values()) / 2**20,
        manifest["lines"],
        dropped,
        f" in {len(directions)} directions: {each}" if train.directions.tagged else "",
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
