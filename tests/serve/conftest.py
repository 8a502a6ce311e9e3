"""Fixtures of the server's tests: the session's tiny trained run loaded as a catalog, the app over it driven
in-process by Starlette's TestClient (the batcher runs as it does under uvicorn), the offline translations
answers must equal, and `nmt serve` started as a process (`start`, `server`)."""

import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

pytest.importorskip("fastapi", reason="nmt serve's packages are not installed (pip install -e '.[serve]')")

from starlette.testclient import TestClient

from nmt.decode.trained_run import load_run
from nmt.decode.translator import TorchTranslator
from nmt.serve.app import create_app
from nmt.serve.engines import Catalog, load_catalog
from nmt.serve.requests import Limits

KEY = "secret-key-123"


@pytest.fixture(scope="session")
def catalog(trained_run: Path) -> Catalog:
    return load_catalog([trained_run], "torch", torch.device("cpu"), None, None)


def make_client(
    catalog: Catalog,
    limits: Limits | None = None,
    keys: frozenset[str] | None = None,
    max_tokens: int = 4096,
    max_delay: float = 0.005,
) -> TestClient:
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
    return dict(zip(sentences, TorchTranslator.of_run(run).translate(sentences), strict=True))


@dataclass
class Served:
    """`nmt serve` running as a process: the process, its address, and the lines it writes to stderr."""

    process: subprocess.Popen
    url: str
    log: list[str]
    drain: threading.Thread  # reads stderr into `log` until the process ends

    def stop(self, sig: signal.Signals = signal.SIGTERM) -> int:
        """Send `sig`; the exit code (the process must end within a minute)."""
        self.process.send_signal(sig)
        return self.process.wait(timeout=60)

    def stderr(self) -> str:
        """All the process wrote to stderr (once it has ended)."""
        self.drain.join(timeout=30)
        return "".join(self.log)


def start(run_dir: Path, *flags: str) -> Served:
    """`nmt serve RUN_DIR --port 0 FLAGS`, once it has logged the address it listens on."""
    command = [sys.executable, "-m", "nmt", "serve", str(run_dir), "--port", "0", "--device", "cpu", *flags]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    log: list[str] = []
    assert process.stderr is not None
    for line in process.stderr:
        log.append(line)
        found = re.search(r"on (http://[^ ]+) \(", line)
        if found:
            drain = threading.Thread(target=log.extend, args=(process.stderr,), daemon=True)
            drain.start()
            return Served(process, found.group(1), log, drain)
    raise AssertionError(f"nmt serve did not start: exit code {process.wait()}: {''.join(log)}")


@pytest.fixture(scope="module")
def server(trained_run: Path) -> Iterator[str]:
    served = start(trained_run)
    yield served.url
    assert served.stop() == 0
