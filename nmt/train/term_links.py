"""The word links trained annotation (nmt/data/terminology.py) reads for each direction of a run: given
(`data.terminology.links`, one Pharaoh line per line of the direction's training file; a multilingual run's
per direction, `NAME.SRC-TGT.EXT`) or computed by eflomal on the direction's training pairs and kept in the
data cache (eflomal samples with a seed of its own, so the cache is what makes a second run see the same
links). Given links are checked against their pairs before any is used."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nmt.align.eflomal import align_with_eflomal
from nmt.align.pharaoh import Link, check_line, pharaoh_text, read_links
from nmt.align.symmetrize import Method
from nmt.atomic_files import atomic_write_text
from nmt.config.multilingual import Direction
from nmt.config.sections import DataConfig
from nmt.config.terminology import KEY, TerminologyConfig
from nmt.data.cache import Entry, cached, file_identity
from nmt.data.corpus import file_lines
from nmt.data.splits import language_split
from nmt.errors import UserError

log = logging.getLogger(__name__)

SYMMETRIZATION: Method = "grow-diag-final-and"  # how eflomal's two directions become one alignment


class RunTermLinks:
    """The links of each direction of the run `data` describes (nmt/data/terminology.py `TermLinks`), its
    eflomal links kept in the cache under `root`."""

    def __init__(self, data: DataConfig, terms: TerminologyConfig, root: Path) -> None:
        self.data, self.terms, self.root = data, terms, root
        self.split = language_split(data, "train")
        self._files: dict[Direction, Path] = {}

    def file(self, direction: Direction) -> Path:
        """The links file of `direction`: its own (`NAME.SRC-TGT.EXT` in a multilingual run), or eflomal's."""
        if direction not in self._files:
            self._files[direction] = self._given(direction) or self._computed(direction)
        return self._files[direction]

    def identity(self, direction: Direction) -> dict[str, Any]:
        return file_identity(self.file(direction))

    def read(self, direction: Direction) -> Sequence[frozenset[Link]]:
        """The links of `direction`, one set a line of its training file; a file of another length, or a link
        past its pair, is a UserError naming the file and line."""
        path, skip = self.file(direction), self.data.skip_bad_lines
        files = self.split.pair_files(direction)
        lines = file_lines(files.src, skip)
        found = [line.possible for line in read_links(path)]
        if len(found) != lines:
            raise UserError(
                f"{path} has {len(found)} lines but the training file {files.src} has {lines}; the links of "
                f"{KEY}.links must be line-aligned with it"
            )
        for pairs in self.split.pairs(direction, skip):
            for src, tgt, line in zip(pairs.src, pairs.tgt, pairs.numbers, strict=True):
                check_line(found[line], f"{path} line {line + 1}", len(src.split()), len(tgt.split()))
        return found

    def _given(self, direction: Direction) -> Path | None:
        if self.terms.links is None:
            return None
        path = Path(self.terms.links)
        if not self.data.directions.tagged:
            return path
        return path.with_name(f"{path.stem}.{direction.name}{path.suffix}")

    def _computed(self, direction: Direction) -> Path:
        """The eflomal links of `direction`'s training pairs (a Pharaoh file with a line per line of its
        training file, empty where no pair), built into the cache or found there."""
        skip = self.data.skip_bad_lines
        inputs = {
            "train": self.split.identity(),
            "direction": direction.name,
            "skip_bad_lines": skip,
            "symmetrization": SYMMETRIZATION,
        }

        def fill(directory: Path) -> dict[str, Any]:
            src, tgt, numbers = [], [], []
            for pairs in self.split.pairs(direction, skip):
                src += pairs.src
                tgt += pairs.tgt
                numbers += pairs.numbers
            started = time.perf_counter()
            aligned = align_with_eflomal(src, tgt, SYMMETRIZATION).symmetrized
            by_line: list[set[Link]] = [
                set() for _ in range(file_lines(self.split.pair_files(direction).src, skip))
            ]
            for number, links in zip(numbers, aligned, strict=True):
                by_line[number] = links
            atomic_write_text(directory / "links", pharaoh_text(by_line))
            log.info(
                "terminology: eflomal aligned %d pairs in %.1f s", len(src), time.perf_counter() - started
            )
            return {"pairs": len(src)}

        def use(directory: Path, _manifest: dict[str, Any]) -> Path:
            return directory / "links"

        return cached(Entry(self.root, "term-links", inputs), fill, use)
