"""Everything nmt writes respects the umask (and an existing file's mode), as files made by `open` do."""

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from nmt.atomic_files import atomic_write_text, current_umask
from tests.conftest import run_cli, train_args


@pytest.fixture(params=[0o022, 0o077])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_current_umask_reads_without_changing(umask: int) -> None:
    assert current_umask() == umask and current_umask() == umask


def test_run_outputs_get_the_modes_the_umask_gives(
    umask: int, small_corpus: Path, tiny: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    code, _, err = run_cli(*train_args(tiny, small_corpus, run, "--max-steps", "5"))
    assert code == 0, err
    translation = tmp_path / "out.txt"
    code, _, err = run_cli("translate", str(run), "-o", str(translation), input="kalo mi\n")
    assert code == 0, err
    expected = 0o666 & ~umask
    written = ["best.pt", "last.pt", "config.yaml", "spm.model", "report.json", "metrics.jsonl", "curves.png"]
    for path in [*(run / name for name in written), run / "attention" / "valid-0.png", translation]:
        assert mode(path) == expected, (path.name, oct(mode(path)))


def test_a_replaced_file_keeps_its_mode(umask: int, tmp_path: Path) -> None:
    path = tmp_path / "shared.txt"
    path.write_text("old\n")
    path.chmod(0o640)
    atomic_write_text(path, "new\n")
    assert path.read_text() == "new\n" and mode(path) == 0o640
