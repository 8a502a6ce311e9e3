"""Serving at every load: `nmt serve` on a run, `nmt serve` on its CTranslate2 export and LibreTranslate on
its Argos package, each in a process of its own (docs/serving.md, "Speed at every load", gives the method).

    python -m benchmarks.serve_bench --run RUN_DIR --src FILE [--data DIR] --work DIR [--beam-size 4]
        [--target 200] [--lone 100] [--loads 1x1,4x20] [--memory-requests 100000]
        [--libretranslate-python PYTHON | --no-libretranslate]

LibreTranslate runs offline from a Python with `libretranslate` (default: a virtual environment made once
under --work); without it its columns are left out.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from benchmarks.common import ROOT, machine, memory_gib, parser, settings, table
from tests.argos_offline import harness

LOADS = ((1, 1), (4, 1), (16, 1), (1, 20), (4, 20), (16, 20))  # clients, sentences a request
NMT, CT2, LT = "nmt serve (run)", "nmt serve (CTranslate2 export)", "LibreTranslate (Argos package)"


@dataclass
class Server:
    name: str
    process: subprocess.Popen
    url: str
    pid: int  # whose resident memory is read
    log: list[str] = field(default_factory=list)

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()


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


def start(name: str, command: list[str], env: dict[str, str] | None = None, ready: str = "") -> Server:
    """A server process, once a line of its output names its address (`ready`: the line to wait for)."""
    process = subprocess.Popen(command, stderr=subprocess.STDOUT, stdout=subprocess.PIPE, text=True, env=env)
    assert process.stdout is not None
    log: list[str] = []
    for line in process.stdout:
        log.append(line)
        found = re.search(r"(http://127\.0\.0\.1:[0-9]+)", line)
        if found and ready in line:
            threading.Thread(target=log.extend, args=(process.stdout,), daemon=True).start()
            return Server(name, process, found.group(1), process.pid, log)
    raise SystemExit(f"{name} did not start (exit code {process.wait()}):\n{''.join(log[-20:])}")


def start_nmt(name: str, path: Path, args: argparse.Namespace) -> Server:
    command = [sys.executable, "-m", "nmt", "serve", str(path), "--port", "0", "--device", "cpu"]
    return start(name, [*command, "--beam-size", str(args.beam_size)], ready="serving")


def requests_of(pool: Iterator[str], clients: int, per: int, target: int) -> list[list[str]]:
    """The requests of one row: at least `target` sentences and two requests a client."""
    count = max(2 * clients, math.ceil(target / per))
    count = math.ceil(count / clients) * clients
    return [[next(pool) for _ in range(per)] for _ in range(count)]


async def drive(
    url: str, pair: dict[str, str], requests: list[list[str]], clients: int, expected: dict[str, str]
) -> Row:
    """`clients` clients sharing `requests`, each sending its next once answered."""
    row, queue = Row(), iter(requests)
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=600) as client:

        async def one_client() -> None:
            for sentences in queue:
                start = time.perf_counter()
                response = await client.post("/translate", json={"q": sentences, **pair})
                row.latencies.append(time.perf_counter() - start)
                response.raise_for_status()
                found = response.json()["translatedText"]
                row.sentences += len(sentences)
                row.differ += sum(
                    s in expected and expected[s] != t for s, t in zip(sentences, found, strict=True)
                )

        start = time.perf_counter()
        await asyncio.gather(*(one_client() for _ in range(clients)))
        row.seconds = time.perf_counter() - start
    return row


def measure_server(
    server: Server,
    args: argparse.Namespace,
    sentences: list[str],
    lone: list[str],
    reference: InProcess | None,
) -> tuple[dict[str, Row], list[float]]:
    """After a warm-up: one client sending the `lone` sentences one a request, each right after the same
    sentence translated in `reference`'s process (so that both see the machine alike); every load, unseen then
    again; one text again and again. Rows by name, and the in-process seconds of the lone sentences."""
    pair, warm = args.pair, [[s] for s in sentences[-20:]]
    asyncio.run(drive(server.url, pair, warm, 1, {}))  # never measured
    expected: dict[str, str] = {}
    lone_row, in_process = Row(), []
    with httpx.Client(base_url=server.url, timeout=600) as client:
        for sentence in lone:
            if reference is not None:
                seconds, expected[sentence] = reference.translate(sentence)
                in_process.append(seconds)
            start = time.perf_counter()
            response = client.post("/translate", json={"q": [sentence], **pair})
            lone_row.latencies.append(time.perf_counter() - start)
            response.raise_for_status()
            lone_row.sentences += 1
            translation = response.json()["translatedText"][0]
            lone_row.differ += sentence in expected and expected[sentence] != translation
    lone_row.seconds = sum(lone_row.latencies)
    rows, pool = {"lone": lone_row}, iter(sentences)
    loads = [(clients, per, requests_of(pool, clients, per, args.target)) for clients, per in args.loads]
    if reference is not None:
        sent = [s for _, _, requests in loads for request in requests for s in request]
        expected |= dict(zip(sent, reference.translate(sent), strict=True))
    for clients, per, requests in loads:
        for key in (f"{clients} × {per}", f"{clients} × {per} again"):
            rows[key] = asyncio.run(drive(server.url, pair, requests, clients, expected))
            print(f"{server.name}, {key}: {_cell(rows[key])}", file=sys.stderr, flush=True)
    same = [[lone[0]]] * args.target
    rows["one text again and again"] = asyncio.run(drive(server.url, pair, same, 1, expected))
    return rows, in_process


def memory_series(server: Server, pair: dict[str, str], sentences: list[str], count: int) -> list[float]:
    """Resident MiB every tenth of `count` requests of new texts (two pool sentences joined), 16 clients."""
    texts = (f"{a} {b}" for a in sentences for b in sentences)
    series, step = [1024 * memory_gib(pid=server.pid)], max(1, count // 10)
    for _ in range(10):
        asyncio.run(drive(server.url, pair, [[next(texts)] for _ in range(step)], 16, {}))
        series.append(1024 * memory_gib(pid=server.pid))
    return series


class InProcess:
    """A fresh process of a server's engine on its threads (`in_process_child`): each sentence translated
    alone (encode, search, decode), as a lone request is, timed; or a list translated in batches, untimed."""

    def __init__(self, path: Path, engine: str, beam: int, threads: int) -> None:
        command = [sys.executable, "-m", "benchmarks.serve_bench", "--in-process"]
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self._ask([str(path), engine, beam, threads])

    def _ask(self, request: object) -> Any:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline()
        if not answer:
            raise SystemExit(f"the in-process search failed (exit code {self.process.wait()})")
        return json.loads(answer)

    def translate(self, sentences: str | list[str]) -> Any:
        """Seconds and translation of one sentence alone, or the translations of a list."""
        return self._ask(sentences)

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait()


def in_process_child() -> None:
    import torch

    from nmt.decode.loading import load_models

    path, engine, beam, threads = json.loads(sys.stdin.readline())
    torch.set_num_threads(threads)
    device, search = torch.device("cpu"), {"beam_size": beam}
    [model] = load_models([Path(path)], engine, device, None, search, threads=threads)
    translator = model.translator
    print(json.dumps("ready"), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        if isinstance(request, list):
            print(json.dumps(translator.translate(request)), flush=True)
            continue
        start = time.perf_counter()
        [translation] = translator.translate([request])
        print(json.dumps([time.perf_counter() - start, translation]), flush=True)


def export(args: argparse.Namespace) -> tuple[Path, list[Path]]:
    """The run's CTranslate2 export and Argos packages (its own and a reverse tiny run's), made once."""
    ct2, packages = args.work / "ctranslate2", args.work / "packages"
    nmt = [sys.executable, "-m", "nmt"]
    if not ct2.is_dir():
        subprocess.run([*nmt, "export", str(args.run), str(ct2), "--to", "ctranslate2"], check=True)
    if args.no_libretranslate:
        return ct2, []
    packages.mkdir(parents=True, exist_ok=True)
    own = packages / "own.argosmodel"
    if not own.is_file():
        subprocess.run([*nmt, "export", str(args.run), str(own), "--to", "argos"], check=True)
    reverse, reverse_run = packages / "reverse.argosmodel", args.work / "reverse-run"
    if not reverse.is_file():
        src, tgt = args.pair["source"], args.pair["target"]
        config = str(ROOT / "configs" / "tiny-transformer.yaml")
        train = ["train", config, "--data", str(args.data or args.src.parent), "--src-lang", tgt]
        train += ["--tgt-lang", src]
        flags = ["--max-steps", "5", "--device", "cpu", "--out", str(reverse_run)]
        subprocess.run([*nmt, *train, *flags, *settings("train.final_report=false")], check=True)
        subprocess.run([*nmt, "export", str(reverse_run), str(reverse), "--to", "argos"], check=True)
    return ct2, [own, reverse]


def start_libretranslate(args: argparse.Namespace, packages: list[Path]) -> Server | None:
    """LibreTranslate serving the packages, offline (its network guard refuses anything beyond loopback)."""
    try:
        python = args.libretranslate_python or harness.argos_python(args.work, harness.LIBRETRANSLATE)
    except RuntimeError as err:
        print(f"LibreTranslate left out: {err}", file=sys.stderr)
        return None
    home = args.work / "libretranslate-home"
    shutil.rmtree(home, ignore_errors=True)
    env = harness.environment(home) | {"ARGOS_BEAM_SIZE": str(args.beam_size)}
    install = (
        "import sys; from argostranslate import package; [package.install_from_path(p) for p in sys.argv[1:]]"
    )
    subprocess.run([str(python), "-c", install, *map(str, packages)], check=True, env=env)
    port = free_port()
    program = Path(python).parent / "libretranslate"
    languages = f"{args.pair['source']},{args.pair['target']}"
    command = [str(program), "--host", "127.0.0.1", "--port", str(port), "--load-only", languages]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and process.poll() is None:
        try:
            httpx.get(f"{url}/languages", timeout=5).raise_for_status()
            return Server(LT, process, url, process.pid)
        except httpx.HTTPError:
            time.sleep(0.5)
    process.kill()
    print("LibreTranslate left out: it did not answer within 300 s", file=sys.stderr)
    return None


def free_port() -> int:
    import socket

    with socket.socket() as handle:
        handle.bind(("127.0.0.1", 0))
        return handle.getsockname()[1]


def arguments() -> argparse.Namespace:
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
    src_lang = args.src.suffix.lstrip(".")
    config = (args.run / "config.yaml").read_text(encoding="utf-8")
    tgt_lang = re.search(r"tgt_lang: *([A-Za-z_-]+)", config).group(1)  # type: ignore[union-attr]
    args.pair = {"source": src_lang, "target": tgt_lang}
    return args


def main() -> None:
    if sys.argv[1:] == ["--in-process"]:
        in_process_child()
        return
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
    in_process: dict[str, list[float]] = {}
    health, memory, codes = {}, {}, {}
    for name, path, engine in ((NMT, args.run, "torch"), (CT2, ct2, "ctranslate2")):
        reference = InProcess(path, engine, args.beam_size, threads)
        server = start_nmt(name, path, args)
        try:
            results[name], in_process[name] = measure_server(server, args, sentences, lone, reference)
            if args.memory_requests:
                memory[name] = memory_series(server, args.pair, sentences, args.memory_requests)
            health[name] = httpx.get(f"{server.url}/health").json()
        finally:
            codes[name] = server.stop()
            reference.close()
    found = start_libretranslate(args, packages) if packages else None
    if found is not None:
        try:
            results[LT] = measure_server(found, args, sentences, lone, None)[0]
        finally:
            codes[LT] = found.stop()
    report(args, results, in_process, health, memory, codes, threads, (load_before, os.getloadavg()))


def report(
    args: argparse.Namespace,
    results: dict[str, dict[str, Row]],
    in_process: dict[str, list[float]],
    health: dict[str, dict],
    memory: dict[str, list[float]],
    codes: dict[str, int],
    threads: int,
    loads: tuple[tuple[float, ...], tuple[float, ...]],
) -> None:
    print(
        f"{machine('torch', 'ctranslate2', 'fastapi', 'uvicorn')}; load average {loads[0][0]:.2f} before, "
        f"{loads[1][0]:.2f} after; beam {args.beam_size}; nmt serve: {threads} search thread(s), the default "
        "cache\n"
    )
    servers = list(results)
    compared = [name for name in (NMT, CT2) if name in results and LT in results]
    rows = []
    for key in results[servers[0]]:
        rows.append([NAMES.get(key, key), *(_cell(results[name][key]) for name in servers)])
        rows[-1] += [f"{results[name][key].rate / results[LT][key].rate:.2f}×" for name in compared]
    head = ["clients × sentences a request", *(f"{name}: sent/s, p50, p95 ms" for name in servers)]
    print(table([*head, *(f"{name} ÷ LibreTranslate" for name in compared)], rows))
    print()
    for name, seconds in in_process.items():
        search, served = 1000 * statistics.median(seconds), results[name]["lone"]
        differ = sum(row.differ for row in results[name].values())
        print(
            f"{name}: a lone client's request of one sentence, p50 {served.ms(50):.1f} ms; the same "
            f"{len(seconds)} sentences in process, each just before, {search:.1f} ms "
            f"(+{served.ms(50) - search:.1f} ms); answers unlike in-process ones: {differ}; /health cache "
            f"{health[name]['cache']}"
        )
    for name, series in memory.items():
        shown = ", ".join(f"{mib:.0f}" for mib in series)
        print(
            f"{name}: resident MiB every {args.memory_requests // 10} of {args.memory_requests} new texts: "
            f"{shown}"
        )
    print(f"exit codes after SIGTERM: {codes}")


NAMES = {"lone": "1 × 1, each sentence right after the same in process"}


def _cell(row: Row) -> str:
    return f"{row.rate:.1f}, {row.ms(50):.1f}, {row.ms(95):.1f}"


if __name__ == "__main__":
    main()
