"""Hugging Face `datasets` corpora → plain UTF-8 files `DIR/{train,valid,test}.{lang}` (the only network
code)."""

from __future__ import annotations

import itertools
import logging
import os
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import urlparse

from nmt.atomic_files import atomic_write
from nmt.data.corpus import data_layout, normalize
from nmt.errors import UserError

log = logging.getLogger(__name__)

SPLITS = {
    "train": "train",
    "validation": "valid",
    "valid": "valid",
    "val": "valid",
    "dev": "valid",
    "test": "test",
}


@dataclass(frozen=True)
class HubCorpus:
    """How to load a known corpus: dataset id, config name pattern and revision."""

    path: str
    config: str | None = None  # may use {src}, {tgt} and {pair} (the non-English language + "-en")
    revision: str | None = None


KNOWN = {
    "multi30k": HubCorpus("bentrevett/multi30k"),
    # a loading script upstream; its auto-converted Parquet files load without running code
    "iwslt2017": HubCorpus("IWSLT/iwslt2017", "iwslt2017-{src}-{tgt}", "refs/convert/parquet"),
    "wmt14": HubCorpus("wmt/wmt14", "{pair}"),
}


def resolve(name: str, src: str, tgt: str, hf_config: str | None) -> tuple[HubCorpus, str | None]:
    """The corpus to load for NAME (a known short name, a hub id or a local path) and its config name."""
    corpus = KNOWN.get(name.lower(), HubCorpus(name))
    other = tgt if src == "en" else src
    config = hf_config or (
        corpus.config.format(src=src, tgt=tgt, pair=f"{other}-en") if corpus.config else None
    )
    return corpus, config


def _local_data(src: str, tgt: str) -> str:
    """How to train on files instead: the command and every file name its data directory may hold."""
    layout = f"{data_layout(src)}, and the same names ending in .{tgt}"
    return f"for local files use `nmt train CONFIG --data DIR`, DIR holding {layout}"


def _check_hub_reachable(path: str, src: str, tgt: str) -> None:
    """Fail at once, instead of after minutes of retries, when the hub's host cannot even be resolved."""
    if Path(path).exists() or os.environ.get("HF_HUB_OFFLINE", "").upper() in {"1", "ON", "YES", "TRUE"}:
        return
    if os.path.isabs(path) or path.startswith(("./", "../")):  # a hub id is 'owner/name', never a path
        raise UserError(f"local dataset directory {path} does not exist")
    host = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co")).hostname or "huggingface.co"
    try:
        socket.getaddrinfo(host, 443)
    except OSError as err:
        raise UserError(
            f"cannot reach the Hugging Face hub ({host}) to download '{path}'; {_local_data(src, tgt)}"
        ) from err


BATCH_ROWS = 10_000  # records converted to Python at a time


def side(rows: Any, lang: str, split: str) -> Iterator[str]:
    """The `lang` sentences of a split whose records are flat {"de": …, "en": …} or {"translation": {…}},
    read in Arrow batches; raises UserError at once when the records have no `lang` field."""
    nested = "translation" in rows.column_names
    fields = (sorted(rows[0]["translation"]) if len(rows) else []) if nested else rows.column_names
    if lang not in fields:
        raise UserError(
            f"{split} records have no '{lang}' field (fields: {fields}); check --src-lang/--tgt-lang"
        )
    return _sentences(rows.select_columns(["translation"] if nested else [lang]), lang, nested)


def _sentences(rows: Any, lang: str, nested: bool) -> Iterator[str]:
    for batch in rows.iter(batch_size=BATCH_ROWS):
        texts = [pair[lang] for pair in batch["translation"]] if nested else batch[lang]
        yield from map(_one_line, texts)


def _one_line(text: Any) -> str:
    """A sentence on one line with runs of whitespace collapsed; a missing one (None) becomes empty."""
    return "" if text is None else normalize(str(text))


def _write_lines(lines: Iterator[str], handle: BinaryIO) -> None:
    """Write sentences one per line, a batch at a time."""
    for batch in iter(lambda: list(itertools.islice(lines, BATCH_ROWS)), []):
        handle.write("".join(line + "\n" for line in batch).encode("utf-8"))


def download(name: str, out: Path, src: str, tgt: str, hf_config: str | None = None) -> dict[str, int]:
    """Load a parallel corpus with `datasets` and write its splits as plain text, streaming each split's Arrow
    batches into its files; returns lines per split."""
    import datasets  # heavy import, only needed here

    corpus, config = resolve(name, src, tgt, hf_config)
    _check_hub_reachable(corpus.path, src, tgt)
    try:
        dataset = datasets.load_dataset(corpus.path, config, revision=corpus.revision)
    except Exception as err:  # datasets raises many types for 'not found', 'offline', 'bad config'
        reason = str(err).strip().splitlines()[0][:200] if str(err).strip() else type(err).__name__
        raise UserError(
            f"could not load dataset '{corpus.path}'{f' ({config})' if config else ''}: {reason}; "
            f"{_local_data(src, tgt)}"
        ) from err
    counts = {}
    for hf_split, rows in dataset.items():
        split = SPLITS.get(hf_split)
        if split is None:
            log.warning("skipping split '%s'", hf_split)
            continue
        for lang in (src, tgt):
            lines = side(rows, lang, hf_split)
            atomic_write(out / f"{split}.{lang}", lambda handle, lines=lines: _write_lines(lines, handle))
        counts[split] = len(rows)
    if "train" not in counts:
        raise UserError(f"dataset '{corpus.path}' has no train split (splits: {sorted(dataset)})")
    return counts
