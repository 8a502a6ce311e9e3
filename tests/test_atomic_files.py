"""Everything nmt writes respects the umask (and an existing file's mode), as files made by `open` do; an
interrupted write keeps the old file; outputs that are not regular files are written as streams."""

import os
import stat
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import pytest

from nmt.atomic_files import atomic_write_text, current_umask, write_output
from nmt.config.yaml_file import load_config, save_config
from nmt.data.tokenizer_training import train_sentencepiece
from nmt.errors import UserError
from tests.conftest import assert_one_line_error, run_cli, train_args


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


@pytest.mark.usefixtures("undrawn")
def test_run_outputs_get_the_modes_the_umask_gives(
    umask: int, small_corpus: Path, tiny: Path, tmp_path: Path
) -> None:
    """The pictures' files are written, not drawn (`undrawn`): their modes are what is read."""
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
    """Also a command's --output (write_output: `nmt translate -o`)."""
    path = tmp_path / "shared.txt"
    path.write_text("old\n")
    path.chmod(0o640)
    atomic_write_text(path, "new\n")
    assert path.read_text() == "new\n" and mode(path) == 0o640
    write_output(path, lambda handle: handle.write(b"newer\n"))
    assert path.read_text() == "newer\n" and mode(path) == 0o640


# --- outputs written atomically, or as streams ----------------------------------------------------------


@pytest.mark.parametrize("command", ["translate", "evaluate", "plot-attention"])
def test_an_interrupted_write_keeps_the_old_output(
    command: str, trained_run: Path, corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kill between writing the new file and renaming it over the old one leaves the old one whole."""
    target = tmp_path / ("out.png" if command == "plot-attention" else "out.txt")
    target.write_text("old")
    args = {
        "translate": ["translate", str(trained_run), "-i", str(corpus / "test.src"), "-o", str(target)],
        "evaluate": ["evaluate", str(trained_run), "--split", "valid", "--json", str(target)],
        "plot-attention": ["plot-attention", str(trained_run), "--text", "kalo mi", "--out", str(target)],
    }[command]

    def killed(src: str, dst: str) -> None:
        if Path(dst) == target:
            raise KeyboardInterrupt
        os.rename(src, dst)

    monkeypatch.setattr(os, "replace", killed)
    code, _, err = run_cli(*args, "--beam-size", "1")
    assert code == 130, err
    assert target.read_text() == "old" and os.listdir(tmp_path) == [target.name]


def test_an_unwritable_output_is_one_line(trained_run: Path, tmp_path: Path) -> None:
    result = run_cli("translate", str(trained_run), "-o", str(tmp_path), input="kalo\n")
    assert_one_line_error(result, f"cannot write {tmp_path}: it is a folder")


def test_config_and_tokenizer_are_written_atomically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def killed(*_: object) -> None:
        raise KeyboardInterrupt

    cfg = load_config(None)
    save_config(cfg, tmp_path / "config.yaml")
    monkeypatch.setattr(os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        save_config(load_config(None, ["train.lr=1.0"]), tmp_path / "config.yaml")
    with pytest.raises(KeyboardInterrupt):
        train_sentencepiece(cfg.tokenizer, ["ab cd ef"] * 200, tmp_path / "spm.model")
    assert load_config(tmp_path / "config.yaml") == cfg
    assert os.listdir(tmp_path) == ["config.yaml"]


def test_translate_writes_into_a_fifo_without_replacing_it(trained_run: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    received: list[str] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_text()))
    reader.start()
    code, _, err = run_cli("translate", str(trained_run), "-o", str(fifo), input="a b\n\nc\n")
    reader.join(timeout=60)
    assert code == 0, err
    assert stat.S_ISFIFO(fifo.stat().st_mode) and len(received[0].splitlines()) == 3


def test_an_error_of_what_is_written_is_not_called_a_write_failure() -> None:
    """A stream's own failure (closed) is one line naming it; a ValueError of what produces the output (a
    translation's) is that error, not "cannot write …", which would send the user after the wrong cause."""

    def translate_then_fail(stream: BinaryIO) -> None:
        stream.write(b"a line\n")
        raise ValueError("the search failed")

    def close_then_write(stream: BinaryIO) -> None:
        stream.close()
        stream.write(b"a line\n")

    with pytest.raises(ValueError, match="the search failed"):
        write_output(Path(os.devnull), translate_then_fail)
    with pytest.raises(UserError, match=f"cannot write {os.devnull}"):
        write_output(Path(os.devnull), close_then_write)
