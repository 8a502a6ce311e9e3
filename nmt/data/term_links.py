"""The word links trained annotation (nmt/data/terminology.py) reads for each direction of a run: given
(`data.terminology.links`, one Pharaoh line per line of the direction's training file; a multilingual run's
per direction, `NAME.SRC-TGT.EXT`) or computed by eflomal on the direction's training pairs and kept in the
data cache (eflomal samples with a seed of its own, so the cache is what makes a second run see the same
links)."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from nmt.align.eflomal import align_with_eflomal
from nmt.align.pharaoh import Link, read_links, write_links
from nmt.align.symmetrize import Method
from nmt.config.multilingual import Direction, RunDirections
from nmt.config.terminology import KEY, TerminologyConfig
from nmt.data.cache import Entry, cached
from nmt.data.corpus import file_lines
from nmt.data.splits import LanguageSplit
from nmt.errors import UserError

log = logging.getLogger(__name__)

SYMMETRIZATION: Method = "grow-diag-final-and"  # how eflomal's two directions become one alignment


def links_path(cfg: TerminologyConfig, directions: RunDirections, direction: Direction) -> Path | None:
    """The given links file of `direction` (None: eflomal computes them)."""
    if cfg.links is None:
        return None
    path = Path(cfg.links)
    if not directions.tagged:
        return path
    return path.with_name(f"{path.stem}.{direction.name}{path.suffix}")


def direction_links_file(
    cfg: TerminologyConfig,
    split: LanguageSplit,
    directions: RunDirections,
    direction: Direction,
    skip_bad_lines: bool,
    root: Path,
) -> Path:
    """The links file of `direction`'s training pairs: its own, or the one eflomal computed into the cache
    under `root` (found there, or built)."""
    path = links_path(cfg, directions, direction)
    if path is not None:
        return path
    lines = file_lines(split.pair_files(direction).src, skip_bad_lines)
    return _computed(split, direction, skip_bad_lines, lines, root)


def read_direction_links(
    path: Path, split: LanguageSplit, direction: Direction, skip_bad_lines: bool
) -> list[frozenset[Link]]:
    """The links of `path`, one set a line, checked to have a line per line of `direction`'s training
    file."""
    files = split.pair_files(direction)
    lines = file_lines(files.src, skip_bad_lines)
    found = read_links(path)
    if len(found) != lines:
        raise UserError(
            f"{path} has {len(found)} lines but the training file {files.src} has {lines}; the links of "
            f"{KEY}.links must be line-aligned with it"
        )
    return [line.possible for line in found]


def _computed(
    split: LanguageSplit, direction: Direction, skip_bad_lines: bool, lines: int, root: Path
) -> Path:
    """The eflomal links of `direction`'s training pairs (a Pharaoh file of `lines` lines, empty where no
    pair), built into the cache or found there."""
    inputs = {
        "train": split.identity(),
        "direction": direction.name,
        "skip_bad_lines": skip_bad_lines,
        "symmetrization": SYMMETRIZATION,
    }

    def fill(directory: Path) -> dict[str, Any]:
        src, tgt, numbers = [], [], []
        for pairs in split.pairs(direction, skip_bad_lines):
            src += pairs.src
            tgt += pairs.tgt
            numbers += pairs.numbers
        started = time.perf_counter()
        aligned = align_with_eflomal(src, tgt, SYMMETRIZATION).symmetrized
        by_line: list[set[Link]] = [set() for _ in range(lines)]
        for number, links in zip(numbers, aligned, strict=True):
            by_line[number] = links
        write_links(directory / "links", by_line)
        log.info("terminology: eflomal aligned %d pairs in %.1f s", len(src), time.perf_counter() - started)
        return {"pairs": len(src)}

    def use(directory: Path, _manifest: dict[str, Any]) -> Path:
        return directory / "links"

    return cached(Entry(root, "term-links", inputs), fill, use)
