"""`nmt serve` refuses what it cannot serve with one line `nmt: error: …` and exit code 2."""

import socket
import sys
from pathlib import Path

import pytest

from tests.conftest import assert_one_line_error, run_cli


def test_a_directory_that_is_no_run(tmp_path: Path) -> None:
    assert_one_line_error(run_cli("serve", str(tmp_path), "--port", "0"), str(tmp_path))


def test_a_busy_port(trained_run: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        assert_one_line_error(
            run_cli("serve", str(trained_run), "--port", port), f"127.0.0.1:{port}", "in use"
        )


@pytest.mark.parametrize(
    ("content", "named"),
    [
        (None, "cannot read"),
        ("\n# a comment\n\n", "holds no key"),
        ("short\n", "at least 8"),
        (b"\xff\xfe", "UTF-8"),
    ],
)
def test_a_bad_api_key_file(
    trained_run: Path, tmp_path: Path, content: str | bytes | None, named: str
) -> None:
    path = tmp_path / "keys"
    if isinstance(content, str):
        path.write_text(content)
    elif content is not None:
        path.write_bytes(content)
    result = run_cli("serve", str(trained_run), "--port", "0", "--api-key-file", str(path))
    assert_one_line_error(result, "--api-key-file", named)


def test_an_unknown_engine_or_host(trained_run: Path) -> None:
    assert_one_line_error(run_cli("serve", str(trained_run), "--engine", "onnx"), "--engine onnx")
    assert_one_line_error(run_cli("serve", str(trained_run), "--host", "no.such.host.invalid"), "--host")


def test_an_unknown_default_model(trained_run: Path) -> None:
    result = run_cli("serve", str(trained_run), "--port", "0", "--default", "nope")
    assert_one_line_error(result, "--default nope: no such model; served: ")


def test_without_the_web_packages_it_says_how_to_install_them(
    trained_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "uvicorn", None)  # import uvicorn raises ImportError
    assert_one_line_error(run_cli("serve", str(trained_run)), 'pip install -e ".[serve]"')
