"""Two systems' outputs of one test set, as files: what the scoring tests score and compare."""

import random
from pathlib import Path

import pytest


def degraded(lines: list[str], seed: int, share: float) -> list[str]:
    """`lines` with a word dropped or swapped in about `share` of them (a system's errors, reproducibly)."""
    rng = random.Random(seed)
    out = []
    for line in lines:
        words = line.split()
        if len(words) > 2 and rng.random() < share:
            i = rng.randrange(len(words) - 1)
            words = words[:i] + words[i + 1 :] if rng.random() < 0.5 else [*words[:i], words[i + 1], words[i]]
        out.append(" ".join(words))
    return out


@pytest.fixture(scope="module")
def systems(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A test set's references and two systems' outputs of it, as files."""
    folder = tmp_path_factory.mktemp("systems")
    references = (corpus / "test.tgt").read_text().splitlines()
    found = {}
    for name, lines in (
        ("references", references),
        ("system", degraded(references, 1, 0.4)),
        ("baseline", degraded(references, 2, 0.7)),
    ):
        found[name] = folder / f"{name}.txt"
        found[name].write_text("".join(line + "\n" for line in lines))
    return found


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines()
