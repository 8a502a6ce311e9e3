"""Fixtures of the server's tests: the session's tiny trained run loaded as a catalog, the app over it driven
in-process by Starlette's TestClient (the batcher runs as it does under uvicorn), the offline translations
answers must equal, and `nmt serve` started as a process (`start`, `server`)."""

import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

pytest.importorskip("starlette", reason="nmt serve's packages are not installed (pip install -e '.[serve]')")

from starlette.testclient import TestClient

from nmt.decode.trained_run import load_run
from nmt.decode.translate import translate
from nmt.serve.app import create_app
from nmt.serve.engines import Catalog, load_catalog
from nmt.serve.payloads import Limits

KEY = "secret-key-123"


@pytest.fixture(scope="session")
def catalog(trained_run: Path) -> Catalog:
    return load_catalog([trained_run], "torch", torch.device("cpu"), None, None)


def make_client(catalog: Catalog, limits: Limits | None = None, keys: frozenset[str] | None = None,
                max_tokens: int = 4096, max_delay: float = 0.005) -> TestClient:  # fmt: skip
    return TestClient(create_app(catalog, limits or Limits(), keys, max_tokens, max_delay))


@pytest.fixture(scope="module")
def client(catalog: Catalog) -> Iterator[TestClient]:
    with make_client(catalog) as test_client:
        yield test_client


def sentences_of(corpus: Path, n: int = 6) -> list[str]:
    return (corpus / "test.src").read_text().splitlines()[:n]


@pytest.fixture(scope="module")
def offline(trained_run: Path, corpus: Path) -> dict[str, str]:
    run = load_run(trained_run, torch.device("cpu"))
    sentences = sentences_of(corpus)
    return dict(zip(sentences, translate(run, sentences), strict=True))


def start(run_dir: Path, *flags: str) -> tuple[subprocess.Popen, str]:
    """`nmt serve RUN_DIR --port 0 FLAGS` and the address it logged once listening."""
    command = [sys.executable, "-m", "nmt", "serve", str(run_dir), "--port", "0", "--device", "cpu", *flags]
    server = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    assert server.stderr is not None
    for line in server.stderr:
        found = re.search(r"on (http://[^ ]+) \(", line)
        if found:
            threading.Thread(target=server.stderr.read, daemon=True).start()  # keep the pipe drained
            return server, found.group(1)
    raise AssertionError(f"nmt serve did not start: exit code {server.wait()}")


@pytest.fixture(scope="module")
def server(trained_run: Path) -> Iterator[str]:
    process, url = start(trained_run)
    yield url
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=60) == 0
