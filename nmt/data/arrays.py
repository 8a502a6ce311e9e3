"""Encoded sentences as flat token arrays plus offsets (in memory, or memory-mapped from a cache directory).

One side of a corpus is two arrays: `tokens`, every sentence's subword ids one after another (no bos/eos), in
the smallest unsigned type that holds the vocabulary, and `offsets` (int64, one more than the sentences):
sentence i is `tokens[offsets[i]:offsets[i + 1]]`. On disk they are the raw files `<side>.tokens` and
`<side>.offsets`, opened with `numpy.memmap`: memory does not grow with the corpus, and processes reading the
same files share the operating system's page cache.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np


class DamagedArrays(Exception):
    """Array files that do not match their description (truncated, missing, inconsistent offsets)."""


def token_dtype(vocab_size: int) -> np.dtype:
    """The smallest unsigned integer type holding ids 0 .. vocab_size - 1."""
    return np.dtype(np.uint16 if vocab_size <= 2**16 else np.uint32)


def flatten(ids: Sequence[Sequence[int]], dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """All ids one after another as `dtype`, and the length of each sequence (int64)."""
    lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
    tokens = np.fromiter(itertools.chain.from_iterable(ids), dtype=dtype, count=int(lengths.sum()))
    return tokens, lengths


@dataclass(frozen=True)
class TokenArray:
    """The sentences of one side: sentence i is `tokens[offsets[i]:offsets[i + 1]]`."""

    tokens: np.ndarray  # (total_tokens,) uint16 or uint32
    offsets: np.ndarray  # (sentences + 1,) int64, starting at 0

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int) -> np.ndarray:
        return self.tokens[self.offsets[i] : self.offsets[i + 1]]

    def lengths(self) -> np.ndarray:
        """Tokens of every sentence (int32: 4 bytes a sentence where planning holds them), without bos/eos."""
        return np.diff(self.offsets).astype(np.int32)

    @classmethod
    def from_ids(cls, ids: Sequence[Sequence[int]]) -> TokenArray:
        """An in-memory array of id sequences (for small splits and tests)."""
        tokens, lengths = flatten(ids, np.dtype(np.int64))
        dtype = token_dtype(int(tokens.max(initial=0)) + 1)
        return cls(tokens.astype(dtype), np.concatenate([np.zeros(1, np.int64), np.cumsum(lengths)]))


@dataclass(frozen=True)
class EncodedCorpus:
    """Subword ids of every pair: `src[i]`, `tgt[i]` are token arrays without bos/eos. A corpus encoded from a
    split's files knows the line (from 0) each pair came from; with guided alignment, `links[i]` holds the
    pair's alignment labels as subword positions, source and target in turn (s0, t0, s1, t1, …)."""

    src: TokenArray
    tgt: TokenArray
    lines: np.ndarray | None = None  # (pairs,) int64
    links: TokenArray | None = None

    def __post_init__(self) -> None:
        if len(self.src) != len(self.tgt):
            raise ValueError(f"{len(self.src)} source sentences but {len(self.tgt)} target sentences")
        for name in ("lines", "links"):
            value = getattr(self, name)
            if value is not None and len(value) != len(self.src):
                raise ValueError(f"{len(value)} {name} for {len(self.src)} sentence pairs")

    def __len__(self) -> int:
        return len(self.src)

    @classmethod
    def from_ids(cls, src: Sequence[Sequence[int]], tgt: Sequence[Sequence[int]]) -> EncodedCorpus:
        return cls(TokenArray.from_ids(src), TokenArray.from_ids(tgt))

    def lengths(self) -> tuple[np.ndarray, np.ndarray]:
        """Source and target lengths in tokens, eos/bos included."""
        return self.src.lengths() + 1, self.tgt.lengths() + 1


class ArrayWriter:
    """Writes one side's `<name>.tokens` and `<name>.offsets` chunk by chunk into a directory: nothing is held
    per sentence, whatever the corpus size. Written through Python's file objects (not `ndarray.tofile`, whose
    short write on a full disk is an OSError without its errno), so a full disk raises ENOSPC."""

    def __init__(self, directory: Path, name: str, dtype: np.dtype) -> None:
        self.dtype = dtype
        self.tokens: BinaryIO = open(directory / f"{name}.tokens", "wb")  # noqa: SIM115 (closed in finish)
        self.offsets: BinaryIO = open(directory / f"{name}.offsets", "wb")  # noqa: SIM115 (closed in finish)
        self.offsets.write(np.zeros(1, np.int64).data)
        self.total, self.sentences = 0, 0

    def append(self, tokens: np.ndarray, lengths: np.ndarray) -> None:
        """Add sentences: their tokens one after another, and the length of each."""
        self.tokens.write(np.ascontiguousarray(tokens, dtype=self.dtype).data)
        self.offsets.write((self.total + np.cumsum(lengths, dtype=np.int64)).data)
        self.total += len(tokens)
        self.sentences += len(lengths)

    def finish(self) -> dict[str, Any]:
        """Flush both files to disk; returns their description for the manifest."""
        _sync_close(self.tokens)
        _sync_close(self.offsets)
        return {"dtype": self.dtype.name, "tokens": self.total, "sentences": self.sentences}

    def close(self) -> None:
        """Stop writing without finishing (the directory is being discarded): what is still buffered may not
        fit on a full disk, and is not needed."""
        for handle in (self.tokens, self.offsets):
            with contextlib.suppress(OSError):
                handle.close()


class ValueWriter:
    """Writes `<name>`, one int64 value per sentence pair (the line each pair came from), chunk by chunk."""

    def __init__(self, directory: Path, name: str) -> None:
        self.handle: BinaryIO = open(directory / name, "wb")  # noqa: SIM115 (closed in finish)
        self.count = 0

    def append(self, values: np.ndarray) -> None:
        self.handle.write(np.ascontiguousarray(values, dtype=np.int64).data)
        self.count += len(values)

    def finish(self) -> dict[str, Any]:
        _sync_close(self.handle)
        return {"values": self.count}

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.handle.close()


def open_values(directory: Path, name: str, description: dict[str, Any]) -> np.ndarray:
    """Memory-map `<name>` as `ValueWriter.finish` described it; DamagedArrays when it does not match."""
    try:
        count = int(description["values"])
    except (KeyError, TypeError, ValueError) as err:
        raise DamagedArrays(f"{name}: incomplete description {description!r}") from err
    return _map(directory / name, np.dtype(np.int64), count)


def _sync_close(handle: BinaryIO) -> None:
    handle.flush()
    os.fsync(handle.fileno())
    handle.close()


def open_token_array(directory: Path, name: str, description: dict[str, Any]) -> TokenArray:
    """Memory-map `<name>.tokens` and `<name>.offsets` as described by `ArrayWriter.finish`; raises
    DamagedArrays when a file is missing, has another size or its offsets do not fit the tokens."""
    try:
        dtype, count = np.dtype(description["dtype"]), int(description["tokens"])
        sentences = int(description["sentences"])
    except (KeyError, TypeError, ValueError) as err:
        raise DamagedArrays(f"{name}: incomplete description {description!r}") from err
    tokens = _map(directory / f"{name}.tokens", dtype, count)
    offsets = _map(directory / f"{name}.offsets", np.dtype(np.int64), sentences + 1)
    if offsets[0] != 0 or offsets[-1] != count or (np.diff(offsets) < 0).any():
        raise DamagedArrays(f"{name}.offsets do not describe {count} tokens")
    return TokenArray(tokens, offsets)


def _map(path: Path, dtype: np.dtype, count: int) -> np.ndarray:
    """A read-only memory map of `count` items (a plain ndarray view: cheaper to slice than np.memmap)."""
    try:
        size = path.stat().st_size
    except OSError as err:
        raise DamagedArrays(f"{path.name} is missing") from err
    if size != count * dtype.itemsize:
        raise DamagedArrays(f"{path.name} has {size} bytes, expected {count * dtype.itemsize}")
    if count == 0:
        return np.zeros(0, dtype)
    return np.memmap(path, dtype=dtype, mode="r", shape=(count,)).view(np.ndarray)


def open_corpus(directory: Path, arrays: dict[str, Any]) -> EncodedCorpus:
    """Both sides and the line of each pair memory-mapped from `directory`, as `arrays` (a cache manifest's)
    describes them."""
    src = open_token_array(directory, "src", arrays.get("src", {}))
    tgt = open_token_array(directory, "tgt", arrays.get("tgt", {}))
    return EncodedCorpus(src, tgt, open_values(directory, "pairs.lines", arrays.get("lines", {})))
