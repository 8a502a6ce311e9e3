"""benchmarks/serve_bench.py: the requests of its rows and its percentiles; in the slow layer, the whole
benchmark on the session's tiny run and its CTranslate2 export (LibreTranslate left out), which must print
its table with every row and each nmt server's lone-request line."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from benchmarks import serve_bench as bench
from tests.conftest import ROOT


def test_a_row_sends_its_target_and_two_requests_a_client_of_unseen_sentences() -> None:
    pool = iter(f"s{i}" for i in range(10_000))
    rows = {load: bench.requests_of(pool, *load, target=200) for load in bench.LOADS}
    assert {load: len(requests) for load, requests in rows.items()} == {
        (1, 1): 200,
        (4, 1): 200,
        (16, 1): 208,
        (1, 20): 10,
        (4, 20): 12,
        (16, 20): 32,
    }
    sent = [s for requests in rows.values() for request in requests for s in request]
    assert len(sent) == len(set(sent))  # no sentence twice: every row's are unseen
    assert all(len(request) == per for (_, per), requests in rows.items() for request in requests)


def test_percentiles_are_the_requests_own_latencies() -> None:
    row = bench.Row(seconds=2.0, sentences=10, latencies=[0.001 * i for i in range(1, 101)])
    assert (row.rate, row.ms(50), row.ms(95)) == (5.0, pytest.approx(51.0), pytest.approx(95.0))


@pytest.mark.slow
def test_the_benchmark_prints_its_table(trained_run: Path, corpus: Path, tmp_path: Path) -> None:
    command = [
        sys.executable,
        "-m",
        "benchmarks.serve_bench",
        "--run",
        str(trained_run),
        "--src",
        str(corpus / "train.src"),
        "--work",
        str(tmp_path),
        "--target",
        "4",
        "--lone",
        "5",
        "--memory-requests",
        "20",
        "--no-libretranslate",
    ]
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=1200)
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    for load in ("1 × 1", "4 × 1", "16 × 1", "1 × 20", "4 × 20", "16 × 20"):
        assert f"| {load} |" in out and f"| {load} again |" in out
    assert "| one text again and again |" in out
    for name in (bench.NMT, bench.CT2):
        assert f"{name}: a lone client's request of one sentence, p50" in out
        assert f"{name}: resident MiB every 2 of 20 new texts:" in out
    assert "exit codes after SIGTERM: {'nmt serve (run)': 0, 'nmt serve (CTranslate2 export)': 0}" in out


class _Echo(BaseHTTPRequestHandler):
    """A stand-in server: `POST /translate` answers each text upper-cased; it notes each connection's port."""

    protocol_version = "HTTP/1.1"  # kept-alive connections, as uvicorn's
    ports: ClassVar[set[int]] = set()

    def do_POST(self) -> None:
        texts = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["q"]
        body = json.dumps({"translatedText": [text.upper() for text in texts]}).encode()
        self.ports.add(self.client_address[1])
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_clients_share_the_requests_each_on_one_kept_alive_connection() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        requests = [[f"s{i}", f"t{i}"] for i in range(12)]
        expected = {"s0": "S0", "t0": "wrong"}
        row = bench.drive(f"http://127.0.0.1:{server.server_port}", {}, requests, 3, expected)
    finally:
        server.shutdown()
        server.server_close()
    assert (row.sentences, len(row.latencies), row.differ) == (24, 12, 1)
    assert len(_Echo.ports) == 3  # a connection a client, each kept for all its requests
    assert row.seconds >= max(row.latencies) > 0
