"""Parallel text on disk → cleaned, line-aligned (source, target) sentence lists."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from nmt.config import DataConfig
from nmt.errors import UserError

log = logging.getLogger(__name__)

SPLIT_NAMES = {"train": ("train",), "valid": ("valid", "val", "dev"), "test": ("test", "test2016")}


@dataclass(frozen=True)
class ParallelText:
    """Aligned sentences: `src[i]` translates to `tgt[i]`."""

    src: list[str]
    tgt: list[str]

    def __len__(self) -> int:
        return len(self.src)


@dataclass(frozen=True)
class SplitFiles:
    """Where one split lives: a source/target file pair, or one TSV file (source, target columns)."""

    src: Path
    tgt: Path | None  # None: `src` is a TSV file holding both sides


def split_files(cfg: DataConfig, split: str) -> SplitFiles:
    """Locate the files of `split` ('train', 'valid' or 'test') from the data config, or raise UserError."""
    explicit = getattr(cfg, split)
    if explicit:
        path = Path(explicit)
        if path.suffix == ".tsv":
            if not path.is_file():
                raise UserError(f"data.{split}: TSV file {path} does not exist")
            return SplitFiles(path, None)
        return _pair(path.parent, path.name, cfg, f"data.{split}={explicit}")
    if cfg.dir is None:
        raise UserError(
            f"no {split} data: pass --data DIR (holding {split}.{cfg.src_lang}) or set data.{split}"
        )
    directory = Path(cfg.dir)
    if directory.is_file():
        raise UserError(f"--data {directory} is a file; pass the directory holding {split}.{cfg.src_lang}")
    if not directory.is_dir():
        raise UserError(
            f"data directory {directory} does not exist; check --data or run `nmt download` first"
        )
    for stem in SPLIT_NAMES[split]:
        if (directory / f"{stem}.{cfg.src_lang}").exists() or (directory / f"{stem}.{cfg.tgt_lang}").exists():
            return _pair(directory, stem, cfg, f"--data {directory}")
    names = " or ".join(f"{stem}.{cfg.src_lang}" for stem in SPLIT_NAMES[split])
    found = sorted(p.name for p in directory.iterdir())[:12]
    raise UserError(
        f"no {split} files in {directory}: expected {names} (and .{cfg.tgt_lang}); found {found}; "
        f"check --src-lang/--tgt-lang"
    )


def _pair(directory: Path, stem: str, cfg: DataConfig, origin: str) -> SplitFiles:
    src, tgt = directory / f"{stem}.{cfg.src_lang}", directory / f"{stem}.{cfg.tgt_lang}"
    for path, flag in ((src, "--src-lang"), (tgt, "--tgt-lang")):
        if not path.is_file():
            raise UserError(f"{path} does not exist ({origin}); check the path and {flag}")
    return SplitFiles(src, tgt)


SKIP_HINT = "set data.skip_bad_lines=true to drop such lines"


def read_lines(
    path: Path, skip_bad_lines: bool = False, skip_hint: str = SKIP_HINT
) -> tuple[list[str], list[int]]:
    """Lines of a UTF-8 file (newline removed) and the 1-based numbers of lines skipped as invalid UTF-8.

    Invalid UTF-8 raises UserError naming the file and line (and how to skip such lines), unless
    `skip_bad_lines` replaces each bad line with an empty one (dropped with its partner: the alignment holds).
    """
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise UserError(f"cannot read {path}: {err.strerror}") from err
    return decode_lines(raw, str(path), skip_bad_lines, skip_hint)


def decode_lines(
    raw: bytes, name: str, skip_bad_lines: bool = False, skip_hint: str = SKIP_HINT
) -> tuple[list[str], list[int]]:
    """`read_lines` for bytes already read (from `name`, e.g. a file or standard input)."""
    try:
        return raw.decode("utf-8").removeprefix("\ufeff").split("\n")[: _count_lines(raw)], []
    except UnicodeDecodeError:
        pass
    lines, bad = [], []
    for number, chunk in enumerate(raw.split(b"\n")[: _count_lines(raw)], start=1):
        try:
            lines.append(chunk.decode("utf-8"))
        except UnicodeDecodeError as err:
            if not skip_bad_lines:
                raise UserError(
                    f"{name} line {number} is not valid UTF-8 (byte {err.start}); fix it or {skip_hint}"
                ) from err
            lines.append("")
            bad.append(number)
    if lines:
        lines[0] = lines[0].removeprefix("\ufeff")
    return lines, bad


def _count_lines(raw: bytes) -> int:
    """Number of lines, counting a last line without a newline."""
    return raw.count(b"\n") + (0 if raw.endswith(b"\n") or not raw else 1)


def normalize(line: str) -> str:
    """Strip the line and collapse every run of whitespace (tabs, NBSP, CR …) into one space."""
    return " ".join(line.split())


def read_split(cfg: DataConfig, split: str) -> ParallelText:
    """Read, check and clean one split; pairs with an empty side are dropped and counted in the log."""
    return read_files(split_files(cfg, split), split, cfg.skip_bad_lines)


def read_files(files: SplitFiles, split: str, skip_bad_lines: bool = False) -> ParallelText:
    """Read, check and clean a file pair or TSV file; pairs with an empty side are dropped and counted."""
    if files.tgt is None:
        src, tgt = _read_tsv(files.src, skip_bad_lines)
        names = str(files.src)
    else:
        src, bad_src = read_lines(files.src, skip_bad_lines)
        tgt, bad_tgt = read_lines(files.tgt, skip_bad_lines)
        if len(src) != len(tgt):
            raise UserError(
                f"{files.src} has {len(src)} lines but {files.tgt} has {len(tgt)}; "
                f"the files of a split must be line-aligned"
            )
        if bad_src or bad_tgt:
            log.warning("%s: skipped %d lines that are not valid UTF-8", split, len(set(bad_src + bad_tgt)))
        names = f"{files.src} / {files.tgt}"
    pairs = [(normalize(s), normalize(t)) for s, t in zip(src, tgt, strict=True)]
    kept = [(s, t) for s, t in pairs if s and t]
    if not kept:
        raise UserError(f"{names} holds no sentence pairs (of {len(pairs)} lines, none with both sides)")
    if len(kept) < len(pairs):
        log.warning(
            "%s: dropped %d of %d pairs with an empty side", split, len(pairs) - len(kept), len(pairs)
        )
    return ParallelText([s for s, _ in kept], [t for _, t in kept])


def _read_tsv(path: Path, skip_bad_lines: bool) -> tuple[list[str], list[str]]:
    lines, _ = read_lines(path, skip_bad_lines)
    src, tgt = [], []
    for number, line in enumerate(lines, start=1):
        columns = line.rstrip("\r").split("\t")
        if len(columns) < 2 and line.strip():
            raise UserError(f"{path} line {number} has no tab; a TSV corpus needs source<TAB>target per line")
        src.append(columns[0])
        tgt.append(columns[1] if len(columns) > 1 else "")
    return src, tgt
