"""Benchmark `nmt serve` under concurrency, beside offline translation of the same sentences, in one run.

    python -m benchmarks.serve_bench RUN_DIR --src FILE [--clients 64] [--sentences 1000] [--requests N]
        [--bad-every K] [--sequential 200] [--device cpu] [--max-delay-ms 10] [--max-batch-tokens 8192]

Starts `nmt serve RUN_DIR --beam-size 1` on 127.0.0.1 (a free port), then measures, with greedy search:
- offline: the library call `nmt translate` makes (`Translator.translate`, the run's batch size)
  on the sentences, in this process; also one batch of `--clients` sentences (a batch's decoding time);
- one request at a time: one client sending the first `--sequential` sentences one after another;
- concurrent: `--clients` asyncio + httpx clients, each sending one sentence a request (LibreTranslate's
  POST /translate) and the next once answered, `--requests` in all (cycling through the sentences), with a
  malformed request every `--bad-every` requests when given;
- HTTP only: the same clients sending as many malformed requests, which the server refuses without decoding
  anything: what the clients and the server's HTTP path alone reach on this machine, a ceiling for the row
  above when they share its cores.
Every answer must equal the offline translation of its own sentence, every bad request must get a 4xx:
the script says how many did not (none lost, none swapped). It prints a Markdown table, the server's
resident memory before and after the load, and stops the server with SIGTERM (its exit code must be 0).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import torch

from nmt.decode.loading import load_trained
from nmt.decode.translator import TorchTranslator

BAD_BODIES = [
    b'{"q": ',
    b'{"q": 3, "source": "x"}',
    b"\xff\xfe",
    b'{"q": "a", "source": "zz", "target": "yy"}',
]


@dataclass
class Load:
    """What one load run saw: per request its latency; the answers that were wrong or missing."""

    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)
    wrong: int = 0
    bad_sent: int = 0
    bad_refused: int = 0


def start_server(run_dir: Path, args: argparse.Namespace) -> tuple[subprocess.Popen, str]:
    command = [
        sys.executable,
        "-m",
        "nmt",
        "serve",
        str(run_dir),
        "--port",
        "0",
        "--beam-size",
        "1",
        "--device",
        args.device,
        "--max-delay-ms",
        str(args.max_delay_ms),
        "--max-batch-tokens",
        str(args.max_batch_tokens),
    ]
    server = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    assert server.stderr is not None
    for line in server.stderr:
        found = re.search(r"on (http://[0-9.]+:[0-9]+)", line)
        if found:  # keep the pipe drained: a server blocked writing a warning would stall the benchmark
            threading.Thread(target=server.stderr.read, daemon=True).start()
            return server, found.group(1)
    raise SystemExit(f"the server did not start (exit code {server.wait()})")


def rss_mib(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmRSS:\s+([0-9]+) kB", status).group(1)) / 1024  # type: ignore[union-attr]


async def load(
    url: str,
    pair: dict[str, str],
    sentences: list[str],
    expected: list[str],
    clients: int,
    requests: int,
    bad_every: int,
) -> Load:
    """`clients` clients sharing `requests` requests, each waiting for its answer before the next."""
    result, counter = Load(), iter(range(requests))
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=600) as client:

        async def one_client() -> None:
            for n in counter:
                if bad_every and n % bad_every == bad_every - 1:
                    body = BAD_BODIES[n % len(BAD_BODIES)]
                    response = await client.post(
                        "/translate", content=body, headers={"content-type": "application/json"}
                    )
                    result.bad_sent += 1
                    result.bad_refused += 400 <= response.status_code < 500
                    continue
                i = n % len(sentences)
                start = time.perf_counter()
                response = await client.post("/translate", json={"q": sentences[i], **pair})
                result.latencies.append(time.perf_counter() - start)
                ok = response.status_code == 200 and response.json().get("translatedText") == expected[i]
                result.wrong += not ok

        start = time.perf_counter()
        await asyncio.gather(*(one_client() for _ in range(clients)))
        result.seconds = time.perf_counter() - start
    return result


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def row(name: str, sentences: int, seconds: float, latencies: list[float] | None, wrong: str) -> str:
    ms = ["", "", ""] if not latencies else [f"{1000 * percentile(latencies, p):.0f}" for p in (50, 95, 99)]
    return (
        f"| {name} | {sentences} | {seconds:.1f} | {sentences / seconds:.1f} | {' | '.join(ms)} | {wrong} |"
    )


@dataclass
class Measured:
    """Everything one run of the script measured."""

    sentences: int
    offline: float  # seconds for all sentences, batched
    one_batch: float  # seconds for one batch of --clients sentences
    sequential: Load
    concurrent: Load
    http_only: Load  # every request malformed: refused, nothing decoded
    rss: tuple[float, float]  # MiB before and after the load
    health: dict
    exit_code: int


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--src", type=Path, required=True, help="Sentences to translate, one a line.")
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--sentences", type=int, default=1000, help="The first N lines of --src.")
    parser.add_argument("--requests", type=int, default=0, help="Concurrent requests in all (default: N).")
    parser.add_argument("--bad-every", type=int, default=0, help="A malformed request every K requests.")
    parser.add_argument("--sequential", type=int, default=200, help="Sentences sent one at a time.")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--max-delay-ms", type=float, default=10.0)
    parser.add_argument("--max-batch-tokens", type=int, default=8192)
    return parser.parse_args()


def measure(args: argparse.Namespace) -> Measured:
    """Offline first (its translations are the reference), then the server: one at a time, concurrent."""
    sentences = [s for s in args.src.read_text(encoding="utf-8").splitlines() if s.strip()][: args.sentences]
    run = load_trained([args.run_dir], torch.device(args.device), overrides=["search.beam_size=1"])
    pair = {"source": run.cfg.data.src_lang, "target": run.cfg.data.tgt_lang}
    translator = TorchTranslator.of_run(run)
    translator.translate(sentences[:8])  # warm-up: the first call pays one-off costs
    start = time.perf_counter()
    expected = translator.translate(sentences)
    offline = time.perf_counter() - start
    start = time.perf_counter()
    translator.translate(sentences[: args.clients])
    one_batch = time.perf_counter() - start
    del run, translator
    server, url = start_server(args.run_dir, args)
    try:
        httpx.get(f"{url}/health", timeout=60).raise_for_status()
        before = rss_mib(server.pid)
        sequential = asyncio.run(
            load(url, pair, sentences[: args.sequential], expected, 1, args.sequential, 0)
        )
        total = args.requests or len(sentences)
        concurrent = asyncio.run(load(url, pair, sentences, expected, args.clients, total, args.bad_every))
        after = rss_mib(server.pid)
        http_only = asyncio.run(load(url, pair, sentences, expected, args.clients, len(sentences), 1))
        health = httpx.get(f"{url}/health").json()
    finally:
        server.send_signal(signal.SIGTERM)
        code = server.wait(timeout=120)
    return Measured(
        len(sentences), offline, one_batch, sequential, concurrent, http_only, (before, after), health, code
    )


def report(args: argparse.Namespace, m: Measured) -> None:
    good, seq, conc = len(m.concurrent.latencies), m.sequential, m.concurrent
    print(
        f"{m.sentences} sentences of {args.src}, greedy, device {args.device}, torch threads "
        f"{torch.get_num_threads()}, --max-delay-ms {args.max_delay_ms}, --max-batch-tokens "
        f"{args.max_batch_tokens}; {os.cpu_count()} CPUs\n"
    )
    print("| mode | sentences | s | sentences/s | p50 ms | p95 ms | p99 ms | wrong or missing |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    print(row("offline (`nmt translate`'s call, batched)", m.sentences, m.offline, None, "reference"))
    print(row("one request at a time", args.sequential, seq.seconds, seq.latencies, str(seq.wrong)))
    print(row(f"{args.clients} concurrent clients", good, conc.seconds, conc.latencies, str(conc.wrong)))
    http = m.http_only
    not_refused = str(http.bad_sent - http.bad_refused)
    print(
        row(
            f"HTTP only: {args.clients} clients, refused requests",
            http.bad_sent,
            http.seconds,
            None,
            not_refused,
        )
    )
    seq_rate, conc_rate, offline_rate = (
        args.sequential / seq.seconds,
        good / conc.seconds,
        m.sentences / m.offline,
    )
    http_rate = http.bad_sent / http.seconds
    print(
        f"\nconcurrent / offline: {conc_rate / offline_rate:.2f}; concurrent / one at a time: "
        f"{conc_rate / seq_rate:.1f}; HTTP only / offline: {http_rate / offline_rate:.2f}"
    )
    bound = 2 * args.max_delay_ms / 1000 + m.one_batch
    print(
        f"p99 {percentile(conc.latencies, 99):.3f} s; 2 × max delay + one batch of {args.clients} offline "
        f"({m.one_batch:.3f} s) = {bound:.3f} s"
    )
    if conc.bad_sent:
        print(f"bad requests: {conc.bad_sent} sent, {conc.bad_refused} refused with a 4xx")
    print(
        f"server RSS: {m.rss[0]:.0f} MiB before the load, {m.rss[1]:.0f} MiB after; batches "
        f"{m.health['batches']} for {m.health['sentences']} sentences; exit code after SIGTERM "
        f"{m.exit_code}"
    )
    summary = {
        "offline_sps": offline_rate,
        "sequential_sps": seq_rate,
        "concurrent_sps": conc_rate,
        "http_only_rps": http_rate,
        "wrong": conc.wrong + seq.wrong,
        "bad_sent": conc.bad_sent,
        "bad_refused": conc.bad_refused,
        "rss_mib": m.rss,
        "exit_code": m.exit_code,
    }
    print(json.dumps(summary))


def main() -> None:
    args = arguments()
    report(args, measure(args))


if __name__ == "__main__":
    main()
