"""eflomal (Östling & Tiedemann 2016), a fast statistical word aligner, run as an outside program.

eflomal is GPL-3 licensed, so nmt never imports it: it runs the `eflomal-align` command that
`pip install eflomal` installs (it works offline), on the two tokenized sides written to a temporary
directory, reads back the links of both directions (eflomal writes both source-target, 0-based) and
symmetrizes them with nmt's symmetrizer. eflomal lower-cases words itself, splits at whitespace, and samples
with a seed of its own choosing: two runs may differ slightly.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from nmt.align.pharaoh import Link, check_links, read_links
from nmt.align.symmetrize import Method, symmetrize
from nmt.atomic_files import atomic_write_text
from nmt.errors import UserError

PROGRAM = "eflomal-align"
MISSING = (
    f"{PROGRAM} was not found: install eflomal with `pip install eflomal` (GPL-3 licensed, so an outside "
    f"program that nmt runs, not a dependency of nmt)"
)


@dataclass(frozen=True)
class EflomalLinks:
    """Links of every sentence pair, (source word, target word): each direction, and their symmetrization."""

    forward: list[set[Link]]
    reverse: list[set[Link]]
    symmetrized: list[set[Link]]


def eflomal_program() -> str:
    """The path of `eflomal-align`: on PATH, or beside this Python (a virtual environment not activated)."""
    found = shutil.which(PROGRAM) or shutil.which(PROGRAM, path=str(Path(sys.executable).parent))
    if found is None:
        raise UserError(MISSING)
    return found


def align_with_eflomal(
    src: Sequence[str],
    tgt: Sequence[str],
    method: Method = "grow-diag-final-and",
    options: Sequence[str] = (),
) -> EflomalLinks:
    """Align whitespace-tokenized sentence pairs with eflomal in both directions and symmetrize them with
    `method`; `options` go to `eflomal-align` as they are (e.g. ["--model", "3", "--n-samplers", "3"])."""
    if len(src) != len(tgt):
        raise ValueError(f"{len(src)} source sentences but {len(tgt)} target sentences")
    program = eflomal_program()
    with tempfile.TemporaryDirectory(prefix="nmt-eflomal-") as tmp:
        folder = Path(tmp)
        for name, sentences in (("src", src), ("tgt", tgt)):
            atomic_write_text(folder / name, "".join(" ".join(s.split()) + "\n" for s in sentences))
        command = [program, "-s", str(folder / "src"), "-t", str(folder / "tgt")]
        command += ["-f", str(folder / "forward"), "-r", str(folder / "reverse"), "--overwrite", *options]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode:
            last = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
            raise UserError(f"{PROGRAM} failed: {last}")
        lengths = [(len(s.split()), len(t.split())) for s, t in zip(src, tgt, strict=True)]
        directions = []
        for name in ("forward", "reverse"):
            links = read_links(folder / name)
            check_links(links, folder / name, lengths, "the text given to eflomal")
            directions.append([set(line.possible) for line in links])
    forward, reverse = directions
    symmetrized = [symmetrize(f, r, method) for f, r in zip(forward, reverse, strict=True)]
    return EflomalLinks(forward, reverse, symmetrized)
