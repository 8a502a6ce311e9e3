"""What the benchmarks share: their command line, commands run and timed in a fresh process of their own,
results kept in a JSON file that an interrupted benchmark resumes from, mean ± spread over seeds, Markdown
tables, and the CPU the figures were measured on. The standard library only: the processes of
benchmarks/export_timing.py must load nothing but the runtime they time.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parents[1]
NMT_COMMAND = [sys.executable, "-m", "nmt", "-q"]  # an nmt command, in a process of its own
T = TypeVar("T")


def parser(doc: str | None) -> argparse.ArgumentParser:
    """A benchmark's command line, the module's docstring as its help."""
    return argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)


def split_at_dashes(argv: list[str]) -> tuple[list[str], list[str]]:
    """The arguments before `--`, and those after it (which the benchmark passes on to every run)."""
    split = argv.index("--") if "--" in argv else len(argv)
    return argv[:split], argv[split + 1 :]


def settings(*sets: str) -> list[str]:
    """`--set KEY=VALUE` options of an nmt command."""
    return [option for setting in sets for option in ("--set", setting)]


@dataclass(frozen=True)
class Finished:
    """A command that ran in a process of its own: its standard output, its wall and CPU seconds (its own and
    its children's) and its peak resident memory."""

    stdout: str
    seconds: float
    cpu_seconds: float
    peak_mib: float


def fresh_process(command: Sequence[str], env: dict[str, str] | None = None) -> Finished:
    """Run `command` from the repository's root in a process of its own; a failure is a RuntimeError ending
    with the end of the command's standard error."""
    started = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        if os.waitstatus_to_exitcode(status):
            raise RuntimeError(f"{' '.join(command)} failed:\n{err.read()[-3000:]}")
        cpu = usage.ru_utime + usage.ru_stime
        return Finished(out.read(), seconds, cpu, usage.ru_maxrss / 1024)


class Results:
    """A JSON file of results by section and key, each worked out once: written after each, and merged with
    what other processes of the benchmark wrote into it meanwhile (each one working out other keys)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.results: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}

    def step(self, section: str, key: str, work: Callable[[], Any]) -> Any:
        """`work()`'s result, kept under section/key."""
        done = self.results.setdefault(section, {})
        if key not in done:
            started = time.monotonic()
            done[key] = work()
            print(f"{section} {key}: {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
            self.save()
        return done[key]

    def save(self) -> None:
        with open(self.path.with_name(f".{self.path.stem}.lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if self.path.exists():
                for section, done in json.loads(self.path.read_text()).items():
                    if isinstance(done, dict) and isinstance(self.results.get(section), dict):
                        self.results[section] = done | self.results[section]
                    else:
                        self.results.setdefault(section, done)
            self.path.write_text(json.dumps(self.results, indent=2) + "\n")


def nmt(*args: str | Path, env: dict[str, str] | None = None) -> Finished:
    """`nmt ARGS` in a process of its own (`fresh_process`)."""
    return fresh_process([*NMT_COMMAND, *map(str, args)], env)


def fastest(work: Callable[[], T], repeats: int) -> tuple[T, float]:
    """The result of `work()` and the wall seconds of its fastest of `repeats` runs (warm it up before)."""
    seconds = math.inf
    for _ in range(repeats):
        started = time.perf_counter()
        result = work()
        seconds = min(seconds, time.perf_counter() - started)
    return result, seconds


def memory_gib(key: str = "VmRSS", pid: int | str = "self") -> float:
    """One memory figure of a process from /proc/PID/status (VmRSS, RssAnon, RssFile, …), in GiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{key}:"):
            return int(line.split()[1]) / 2**20
    raise KeyError(key)


def spread(values: Sequence[float], bold: bool = False) -> str:
    """The mean ± standard deviation, to two decimals (of one value the mean alone, of none a dash); `bold`:
    the mean in bold."""
    if not values:
        return "—"
    mean = f"{statistics.mean(values):.2f}"
    deviation = f" ± {statistics.stdev(values):.2f}" if len(values) > 1 else ""
    return (f"**{mean}**" if bold else mean) + deviation


def table(head: Sequence[str], rows: Iterable[Sequence[object]], left: int = 1) -> str:
    """A Markdown table: the column names, then a line per row; the first `left` columns aligned left, the
    others right."""
    lines = [cells(*head), "|" + "---|" * left + "---:|" * (len(head) - left)]
    return "\n".join(lines + [cells(*row) for row in rows])


def cells(*row: object) -> str:
    """A line of a Markdown table."""
    return "| " + " | ".join(map(str, row)) + " |"


def machine(*packages: str) -> str:
    """The CPU (model name, cores this process may use, and the instruction sets torch uses where it is
    loaded), Python's version and the versions of `packages`."""
    cpuinfo = Path("/proc/cpuinfo")
    model = re.search(r"^model name\s*:(.*)", cpuinfo.read_text() if cpuinfo.is_file() else "", re.MULTILINE)
    cpu = model.group(1).strip() if model else platform.processor() or platform.machine()
    torch = sys.modules.get("torch")
    sets = f" ({torch.backends.cpu.get_cpu_capability()})" if torch else ""
    found = [f"Python {platform.python_version()}", *(f"{p} {metadata.version(p)}" for p in packages)]
    return f"{cpu}, {len(os.sched_getaffinity(0))} cores{sets}; {', '.join(found)}"
