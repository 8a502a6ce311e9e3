"""Fixtures of the server's tests: the session's tiny trained run loaded as a catalog, and the app over it
driven in-process by Starlette's TestClient (the batcher runs as it does under uvicorn)."""

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

pytest.importorskip("starlette", reason="nmt serve's packages are not installed (pip install -e '.[serve]')")

from starlette.testclient import TestClient

from nmt.serve.app import create_app
from nmt.serve.engines import Catalog, load_catalog
from nmt.serve.payloads import Limits

KEY = "secret-key-123"


@pytest.fixture(scope="session")
def catalog(trained_run: Path) -> Catalog:
    return load_catalog([trained_run], "torch", torch.device("cpu"), None, [])


def make_client(catalog: Catalog, limits: Limits | None = None, keys: frozenset[str] | None = None,
                max_tokens: int = 4096, max_delay: float = 0.005) -> TestClient:  # fmt: skip
    return TestClient(create_app(catalog, limits or Limits(), keys, max_tokens, max_delay))


@pytest.fixture(scope="module")
def client(catalog: Catalog) -> Iterator[TestClient]:
    with make_client(catalog) as test_client:
        yield test_client


def sentences_of(corpus: Path, n: int = 6) -> list[str]:
    return (corpus / "test.src").read_text().splitlines()[:n]
