"""A training split → subword ids on disk, a chunk at a time: read and cleaned in one thread while
sentencepiece encodes the previous one on all cores, length-filtered, appended to each side's token array."""

from __future__ import annotations

import contextlib
import gc
import logging
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from nmt.data.arrays import ArrayWriter, ValueWriter, flatten, token_dtype
from nmt.data.corpus import Pairs, SplitFiles, Tally
from nmt.data.tokenizer import Tokenizers
from nmt.errors import UserError

log = logging.getLogger(__name__)


@dataclass
class _Sides:
    """The writers of both sides and of the line each pair came from, and the pairs dropped for length."""

    src: ArrayWriter
    tgt: ArrayWriter
    lines: ValueWriter
    too_long: int = 0


Encoder = Callable[[list[str]], list[list[int]]]  # sentences → subword ids (a tokenizer's, maybe tagged)


@dataclass(frozen=True)
class Part:
    """Pairs to encode into the arrays, after those of the parts before: a direction of the training split,
    with encoders that insert its tag where the run has tags; `name` and `files` name it in messages."""

    name: str
    files: SplitFiles
    chunks: Iterator[Pairs]
    src: Encoder
    tgt: Encoder


def encode_parts(
    parts: list[Part], lines: int, tokenizers: Tokenizers, max_len: int, directory: Path
) -> dict[str, Any]:
    """Encode the parts (of `lines` lines in all, checked) one after another into `src.*` and `tgt.*` arrays
    in `directory`; pairs with an empty side, and those over `max_len` subwords on a side, are dropped with a
    warning; `pairs.lines` records the line (from 0, of its part's files) of every pair kept. Returns the
    arrays' description, the counts and how many pairs each part holds (its rows follow those of the parts
    before), for the cache manifest."""
    started, tally, kept = time.perf_counter(), Tally(), {}
    sides = _Sides(
        ArrayWriter(directory, "src", token_dtype(len(tokenizers.src))),
        ArrayWriter(directory, "tgt", token_dtype(len(tokenizers.tgt))),
        ValueWriter(directory, "pairs.lines"),
    )
    bar = tqdm(total=lines, desc="encoding", unit=" lines", unit_scale=True, disable=None, mininterval=1.0)
    try:
        with _collector_paused(), ThreadPoolExecutor(max_workers=1) as reader, bar:
            for part in parts:
                before, own = sides.src.sentences, Tally()
                pending = reader.submit(next, part.chunks, None)
                while (pairs := pending.result()) is not None:
                    # read the next chunk while this one encodes
                    pending = reader.submit(next, part.chunks, None)
                    own.add(pairs)
                    tally.add(pairs)
                    _encode(pairs, part, max_len, sides)
                    bar.update(pairs.lines)
                own.report(part.name, part.files)
                kept[part.name] = sides.src.sentences - before
    except BaseException:
        sides.src.close()
        sides.tgt.close()
        sides.lines.close()
        raise
    _report_long(tally.kept, sides.too_long, max_len)
    arrays = {"src": sides.src.finish(), "tgt": sides.tgt.finish(), "lines": sides.lines.finish()}
    seconds = time.perf_counter() - started
    tokens = arrays["src"]["tokens"] + arrays["tgt"]["tokens"]
    log.info(
        "train: encoded %d pairs (%d tokens) in %.1f s, %.0f lines/s",
        arrays["src"]["sentences"],
        tokens,
        seconds,
        lines / max(seconds, 1e-9),
    )
    dropped = {"bad_utf8": tally.bad, "empty_side": tally.lines - tally.kept, "too_long": sides.too_long}
    return {"arrays": arrays, "lines": tally.lines, "dropped": dropped, "parts": kept}


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off: encoding allocates millions of lists of ints, which hold no
    cycles, and the collections their allocation triggers cost ~8% of sentencepiece's batch encoding."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _encode(pairs: Pairs, part: Part, max_len: int, sides: _Sides) -> None:
    """Encode one chunk of pairs with every core and append those within `max_len` subwords."""
    src, src_len = flatten(part.src(pairs.src), sides.src.dtype)
    tgt, tgt_len = flatten(part.tgt(pairs.tgt), sides.tgt.dtype)
    keep, lines = np.maximum(src_len, tgt_len) <= max_len, np.asarray(pairs.numbers, dtype=np.int64)
    if not keep.all():
        sides.too_long += int((~keep).sum())
        src, tgt = src[np.repeat(keep, src_len)], tgt[np.repeat(keep, tgt_len)]
        src_len, tgt_len, lines = src_len[keep], tgt_len[keep], lines[keep]
    sides.src.append(src, src_len)
    sides.tgt.append(tgt, tgt_len)
    sides.lines.append(lines)


def _report_long(pairs: int, too_long: int, max_len: int) -> None:
    if too_long == pairs:
        raise UserError(f"no training pair is within data.max_len={max_len} subwords; raise data.max_len")
    if too_long:
        log.warning(
            "dropped %d of %d training pairs longer than data.max_len=%d subwords", too_long, pairs, max_len
        )
