"""Serving at every load: `nmt serve` on a run, `nmt serve` on its CTranslate2 export and LibreTranslate on
its Argos package, each in a process of its own (docs/serving.md, "Speed at every load", gives the method).

    python -m benchmarks.serve_bench --run RUN_DIR --src FILE [--data DIR] --work DIR [--beam-size 4]
        [--target 200] [--lone 100] [--loads 1x1,4x20] [--memory-requests 100000]
        [--libretranslate-python PYTHON | --no-libretranslate]

LibreTranslate runs offline from a Python with `libretranslate` (default: a virtual environment made once
under --work); without it its columns are left out.
"""

from __future__ import annotations

import http.client
import json
import math
import multiprocessing
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from argparse import Namespace
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from benchmarks.common import ROOT, machine, memory_gib, nmt, parser, settings, table
from nmt.config.yaml_file import load_saved_config
from tests.argos_offline import harness

LOADS = ((1, 1), (4, 1), (16, 1), (1, 20), (4, 20), (16, 20))  # clients, sentences a request
NMT, CT2, LT = "nmt serve (run)", "nmt serve (CTranslate2 export)", "LibreTranslate (Argos package)"
LONE = "1 × 1, each sentence right after the same in process"
TRANSLATOR: list[Any] = []  # in a reference process (`reference_process`): its translator


@dataclass
class Server:
    name: str
    process: subprocess.Popen
    url: str

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()

    def mib(self) -> float:
        """Its resident memory."""
        return 1024 * memory_gib(pid=self.process.pid)


@dataclass
class Row:
    """One load on one server: per request its latency; sentences sent; answers unlike in-process ones."""

    seconds: float = 0.0
    sentences: int = 0
    latencies: list[float] = field(default_factory=list)
    differ: int = 0

    @property
    def rate(self) -> float:
        return self.sentences / self.seconds

    def ms(self, p: float) -> float:
        ordered = sorted(self.latencies)
        return 1000 * ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]

    def cell(self) -> str:
        return f"{self.rate:.1f}, {self.ms(50):.1f}, {self.ms(95):.1f}"

    def add(self, sentences: list[str], seconds: float, answer: Any, expected: dict[str, str]) -> None:
        """One request answered."""
        self.latencies.append(seconds)
        self.sentences += len(sentences)
        found = answer["translatedText"]
        self.differ += sum(s in expected and expected[s] != t for s, t in zip(sentences, found, strict=True))


def start_nmt(name: str, path: Path, beam: int) -> Server:
    """`nmt serve PATH` on a free port, once a line of its output names its address."""
    command = [sys.executable, "-m", "nmt", "serve", str(path), "--port", "0", "--device", "cpu"]
    command += ["--beam-size", str(beam)]
    process = subprocess.Popen(command, stderr=subprocess.STDOUT, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    log: list[str] = []
    for line in process.stdout:
        log.append(line)
        found = re.search(r"serving .*(http://127\.0\.0\.1:[0-9]+)", line)
        if found:
            threading.Thread(target=log.extend, args=(process.stdout,), daemon=True).start()
            return Server(name, process, found.group(1))
    raise SystemExit(f"{name} did not start (exit code {process.wait()}):\n{''.join(log[-20:])}")


def requests_of(pool: Iterator[str], clients: int, per: int, target: int) -> list[list[str]]:
    """The requests of one row: at least `target` sentences and two requests a client."""
    count = max(2 * clients, math.ceil(target / per))
    count = math.ceil(count / clients) * clients
    return [[next(pool) for _ in range(per)] for _ in range(count)]


class Client:
    """One kept-alive HTTP/1.1 connection of the standard library's client, the leanest in Python, so that a
    latency is the server's (httpx adds 1.5–1.9 ms of its own to each request on this machine's cores)."""

    def __init__(self, url: str, timeout: float = 600) -> None:
        address = urlsplit(url)
        self.connection = http.client.HTTPConnection(address.hostname or "", address.port, timeout=timeout)

    def ask(self, path: str, fields: dict[str, Any] | None = None) -> tuple[float, Any]:
        """Seconds from a GET of `path` (a POST of `fields` as JSON) to its answer, and the answer's JSON."""
        body = None if fields is None else json.dumps(fields).encode()
        method, start = "GET" if body is None else "POST", time.perf_counter()
        self.connection.request(method, path, body, {"Content-Type": "application/json"})
        response = self.connection.getresponse()
        answer = response.read()
        seconds = time.perf_counter() - start
        if response.status != 200:
            raise http.client.HTTPException(f"HTTP {response.status}: {answer[:300]!r}")
        return seconds, json.loads(answer)


def drive(
    url: str, pair: dict[str, str], requests: list[list[str]], clients: int, expected: dict[str, str]
) -> Row:
    """`clients` clients, a thread and a connection each, sharing `requests`, each sending its next once
    answered."""
    row, queue, lock = Row(), iter(requests), threading.Lock()

    def one_client(_: int) -> None:
        client = Client(url)
        while (sentences := next(queue, None)) is not None:
            answer = client.ask("/translate", {"q": sentences, **pair})
            with lock:
                row.add(sentences, *answer, expected)

    start = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(one_client, range(clients)))
    row.seconds = time.perf_counter() - start
    return row


def measure_server(
    server: Server,
    args: Namespace,
    sentences: list[str],
    lone: list[str],
    reference: ProcessPoolExecutor | None,
) -> tuple[dict[str, Row], list[float]]:
    """After a warm-up: one client sending the `lone` sentences one a request, each right after the same
    sentence translated in `reference`'s process (so that both see the machine alike); every load, unseen then
    again; one text again and again. Rows by name, and the in-process seconds of the lone sentences."""
    pair, warm = args.pair, [[s] for s in sentences[-20:]]
    drive(server.url, pair, warm, 1, {})  # never measured
    expected: dict[str, str] = {}
    lone_row, in_process, client = Row(), [], Client(server.url)
    for sentence in lone:
        if reference is not None:
            seconds, expected[sentence] = reference.submit(alone, sentence).result()
            in_process.append(seconds)
        lone_row.add([sentence], *client.ask("/translate", {"q": [sentence], **pair}), expected)
    lone_row.seconds = sum(lone_row.latencies)
    rows, pool = {LONE: lone_row}, iter(sentences)
    loads = [(clients, per, requests_of(pool, clients, per, args.target)) for clients, per in args.loads]
    if reference is not None:
        sent = [s for _, _, requests in loads for request in requests for s in request]
        expected |= dict(zip(sent, reference.submit(batched, sent).result(), strict=True))
    for clients, per, requests in loads:
        for key in (f"{clients} × {per}", f"{clients} × {per} again"):
            rows[key] = drive(server.url, pair, requests, clients, expected)
            print(f"{server.name}, {key}: {rows[key].cell()}", file=sys.stderr, flush=True)
    same = [[lone[0]]] * args.target
    rows["one text again and again"] = drive(server.url, pair, same, 1, expected)
    return rows, in_process


def lone_line(name: str, rows: dict[str, Row], in_process: list[float], health: dict[str, Any]) -> str:
    """A server's lone requests beside the same sentences in process; its answers unlike in-process ones."""
    search, served = 1000 * statistics.median(in_process), rows[LONE].ms(50)
    differ = sum(row.differ for row in rows.values())
    return (
        f"{name}: a lone client's request of one sentence, p50 {served:.1f} ms; the same {len(in_process)} "
        f"sentences in process, each just before, {search:.1f} ms (+{served - search:.1f} ms); answers "
        f"unlike in-process ones: {differ}; /health cache {health['cache']}"
    )


def memory_series(server: Server, pair: dict[str, str], sentences: list[str], count: int) -> str:
    """Resident MiB every tenth of `count` requests of new texts (two pool sentences joined), 16 clients."""
    texts = (f"{a} {b}" for a in sentences for b in sentences)
    series, step = [server.mib()], max(1, count // 10)
    for _ in range(10):
        drive(server.url, pair, [[next(texts)] for _ in range(step)], 16, {})
        series.append(server.mib())
    shown = ", ".join(f"{mib:.0f}" for mib in series)
    return f"{server.name}: resident MiB every {count // 10} of {count} new texts: {shown}"


def reference_process(path: Path, engine: str, beam: int, threads: int) -> ProcessPoolExecutor:
    """A fresh process of a server's engine on its threads, its translator loaded (`alone`, `batched`)."""
    spawn = multiprocessing.get_context("spawn")
    return ProcessPoolExecutor(1, spawn, initializer=_load, initargs=(path, engine, beam, threads))


def _load(path: Path, engine: str, beam: int, threads: int) -> None:
    import torch

    from nmt.decode.loading import load_models

    torch.set_num_threads(threads)
    [model] = load_models([path], engine, torch.device("cpu"), None, {"beam_size": beam}, threads=threads)
    TRANSLATOR.append(model.translator)


def alone(sentence: str) -> tuple[float, str]:
    """Seconds and translation of one sentence alone (encode, search, decode), as a lone request's."""
    start = time.perf_counter()
    [translation] = TRANSLATOR[0].translate([sentence])
    return time.perf_counter() - start, translation


def batched(sentences: list[str]) -> list[str]:
    return TRANSLATOR[0].translate(sentences)


def export(args: Namespace) -> tuple[Path, list[Path]]:
    """The run's CTranslate2 export and Argos packages (its own and a reverse tiny run's), made once."""
    ct2, packages, reverse_run = args.work / "ctranslate2", args.work / "packages", args.work / "reverse-run"
    if not ct2.is_dir():
        nmt("export", args.run, ct2, "--to", "ctranslate2")
    if args.no_libretranslate:
        return ct2, []
    packages.mkdir(parents=True, exist_ok=True)
    own, reverse = packages / "own.argosmodel", packages / "reverse.argosmodel"
    if not own.is_file():
        nmt("export", args.run, own, "--to", "argos")
    if not reverse.is_file():
        config, data = ROOT / "configs" / "tiny-transformer.yaml", args.data or args.src.parent
        direction = ["--src-lang", args.pair["target"], "--tgt-lang", args.pair["source"]]
        flags = ["--max-steps", "5", "--device", "cpu", *settings("train.final_report=false")]
        nmt("train", config, "--data", data, "--out", reverse_run, *direction, *flags)
        nmt("export", reverse_run, reverse, "--to", "argos")
    return ct2, [own, reverse]


def start_libretranslate(args: Namespace, packages: list[Path]) -> Server | None:
    """LibreTranslate serving the packages, offline (its network guard refuses anything beyond loopback)."""
    try:
        python = args.libretranslate_python or harness.argos_python(args.work, harness.LIBRETRANSLATE)
    except RuntimeError as err:
        print(f"LibreTranslate left out: {err}", file=sys.stderr)
        return None
    home = args.work / "libretranslate-home"
    shutil.rmtree(home, ignore_errors=True)
    env = harness.environment(home) | {"ARGOS_BEAM_SIZE": str(args.beam_size)}
    install = "import sys, argostranslate.package as p; [p.install_from_path(f) for f in sys.argv[1:]]"
    subprocess.run([str(python), "-c", install, *map(str, packages)], check=True, env=env)
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    languages = f"{args.pair['source']},{args.pair['target']}"
    command = [str(Path(python).parent / "libretranslate"), "--host", "127.0.0.1", "--port", str(port)]
    process = subprocess.Popen(
        [*command, "--load-only", languages], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and process.poll() is None:
        try:
            Client(url, timeout=5).ask("/languages")
            return Server(LT, process, url)
        except (OSError, http.client.HTTPException):
            time.sleep(0.5)
    process.kill()
    print("LibreTranslate left out: it did not answer within 300 s", file=sys.stderr)
    return None


def arguments() -> Namespace:
    parse = parser(__doc__)
    parse.add_argument("--run", type=Path, required=True, help="A run directory (read only).")
    parse.add_argument("--src", type=Path, required=True, help="Sentences, one a line: NAME.<source lang>.")
    parse.add_argument("--data", type=Path, help="The reverse package's data (default: --src's folder).")
    parse.add_argument("--work", type=Path, required=True, help="Exports, packages and a venv (kept).")
    parse.add_argument("--beam-size", type=int, default=4, help="Every server's (LibreTranslate's is 4).")
    parse.add_argument("--target", type=int, default=200, help="Sentences a row sends at least.")
    parse.add_argument("--memory-requests", type=int, default=0, help="Requests of the memory series.")
    parse.add_argument("--libretranslate-python", type=Path, default=None)
    parse.add_argument("--no-libretranslate", action="store_true")
    parse.add_argument("--lone", type=int, default=100, help="Sentences of the in-process reference.")
    loads = ",".join(f"{c}x{p}" for c, p in LOADS)
    parse.add_argument("--loads", default=loads, help="CLIENTSxSENTENCES rows, e.g. 1x1,4x20.")
    args = parse.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    try:
        args.loads = [tuple(int(n) for n in load.split("x")) for load in args.loads.split(",")]
    except ValueError:
        parse.error(f"--loads {args.loads}: write CLIENTSxSENTENCES rows, e.g. 1x1,4x20")
    tgt_lang = load_saved_config(args.run / "config.yaml").data.tgt_lang
    args.pair = {"source": args.src.suffix.lstrip("."), "target": tgt_lang}
    return args


def main() -> None:
    args = arguments()
    sentences = list(dict.fromkeys(s for s in args.src.read_text(encoding="utf-8").splitlines() if s.strip()))
    lone, sentences = sentences[: args.lone], sentences[args.lone :]
    needed = 20 + sum(len(requests_of(iter(sentences), c, p, args.target)) * p for c, p in args.loads)
    if len(sentences) < needed:
        raise SystemExit(
            f"{args.src}: {len(sentences)} distinct sentences after --lone; the rows need {needed}"
        )
    load_before = os.getloadavg()
    ct2, packages = export(args)
    threads = max(1, len(os.sched_getaffinity(0)) - 1)
    results: dict[str, dict[str, Row]] = {}
    lines, memory, codes = [], [], {}
    for name, path, engine in ((NMT, args.run, "torch"), (CT2, ct2, "ctranslate2")):
        reference = reference_process(path, engine, args.beam_size, threads)
        server = start_nmt(name, path, args.beam_size)
        try:
            results[name], in_process = measure_server(server, args, sentences, lone, reference)
            if args.memory_requests:
                memory.append(memory_series(server, args.pair, sentences, args.memory_requests))
            lines.append(lone_line(name, results[name], in_process, Client(server.url).ask("/health")[1]))
        finally:
            codes[name] = server.stop()
            reference.shutdown()
    found = start_libretranslate(args, packages) if packages else None
    if found is not None:
        try:
            results[LT] = measure_server(found, args, sentences, lone, None)[0]
        finally:
            codes[LT] = found.stop()
    print(
        f"{machine('torch', 'ctranslate2', 'fastapi', 'uvicorn')}; load average {load_before[0]:.2f} before, "
        f"{os.getloadavg()[0]:.2f} after; beam {args.beam_size}; nmt serve: {threads} search thread(s), the "
        f"default cache\n\n{comparison(results)}\n"
    )
    print("\n".join([*lines, *memory, f"exit codes after SIGTERM: {codes}"]))


def comparison(results: dict[str, dict[str, Row]]) -> str:
    """Per row, each server's sentences/s and p50 and p95 ms, and nmt serve's rates ÷ LibreTranslate's."""
    compared = [NMT, CT2] if LT in results else []
    rows = []
    for key in results[NMT]:
        rates = [f"{results[name][key].rate / results[LT][key].rate:.2f}×" for name in compared]
        rows.append([key, *(rows_of[key].cell() for rows_of in results.values()), *rates])
    head = ["clients × sentences a request", *(f"{name}: sent/s, p50, p95 ms" for name in results)]
    return table([*head, *(f"{name} ÷ LibreTranslate" for name in compared)], rows)


if __name__ == "__main__":
    main()
