"""`nmt translate` beside its exports on CPU, on the same test sentences, as one Markdown table: CTranslate2
called directly (float32 and int8), nmt's own CTranslate2 engine, Argos Translate and transformers.

    python -m benchmarks.export_bench --run RUN_DIR --data DIR --work /tmp/nmt-export-bench --threads 2

Each runtime and search is timed in a fresh process loading only that runtime (benchmarks/export_timing.py),
in interleaved rounds; the method: docs/exports.md ("Speed on 2 CPU cores").
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import os
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from benchmarks.common import fresh_process, machine, parser, table
from nmt.data.splits import read_directions
from nmt.decode.loading import load_trained
from nmt.decode.trained_run import TrainedRun
from nmt.evaluate.scores import score
from nmt.export.argos import export_package
from nmt.export.ctranslate2 import export_run
from nmt.export.huggingface import export_run as export_huggingface
from tests.argos_offline import harness

WARMUP = 20  # sentences translated untimed first
NMT = "nmt translate (PyTorch)"
NMT_INT8 = "nmt translate --int8 (PyTorch, int8 linear layers)"
CT2 = "CTranslate2 float32"
ENGINE = "nmt translate EXPORT_DIR (its CTranslate2 float32 engine)"
ARGOS = "Argos Translate (argostranslate, a call per sentence)"
LOG = "export-bench-runs.json"  # under --work: every child's run


@dataclass(frozen=True)
class Search:
    name: str
    beam_size: int
    length_penalty: float


@dataclass(frozen=True)
class Runtime:
    """A row's runtime: its child's key in benchmarks/export_timing.py RUNTIMES, what that loads, and the keys
    of the searches it runs (greedy, beam, argos)."""

    name: str
    child: str
    path: Path
    searches: tuple[str, ...]


@dataclass(frozen=True)
class Job:
    """One row: a runtime with one search, timed in a child process of its own each round."""

    runtime: Runtime
    search: str


@dataclass(frozen=True)
class Answer:
    """What one child reports (its pid, the runtimes it imported and the OpenMP libraries it mapped)."""

    translations: list[str]
    seconds: float
    pid: int
    modules: list[str]
    openmp: list[str]


Child = Callable[[Job], Answer]


def prepare_runtimes(run: TrainedRun, tmp: Path, argos: bool) -> list[Runtime]:
    """The runtimes in the table's order, their exports written in `tmp`."""
    run_dir, which, all_three = run.directory.path, run.checkpoint_name, ("greedy", "beam", "argos")
    float32, int8 = (export_run(run_dir, tmp / q, quantization=q, which=which) for q in ("float32", "int8"))
    huggingface = export_huggingface(run_dir, tmp / "huggingface", which=which)
    runtimes = [
        Runtime(NMT, "nmt", run_dir, all_three),
        Runtime(NMT_INT8, "nmt-int8", run_dir, ("greedy", "beam")),
        Runtime(CT2, "ctranslate2", float32, all_three),
        Runtime(ENGINE, "nmt-ctranslate2", float32, all_three),
        Runtime("CTranslate2 int8", "ctranslate2", int8, ("greedy", "beam")),
        Runtime("transformers generate (Hugging Face export)", "transformers", huggingface, ("greedy",)),
    ]
    if argos:
        package = export_package(run_dir, tmp / "package.argosmodel", which=which)
        runtimes.append(Runtime(ARGOS, "argos", package, ("argos",)))
    return runtimes


def searches(run: TrainedRun) -> dict[str, Search]:
    """Greedy, the run's beam search and Argos Translate's, by the keys Runtime.searches uses."""
    beam, alpha = run.cfg.search.beam_size, run.cfg.search.length_penalty
    return {
        "greedy": Search("greedy", 1, alpha),
        "beam": Search(f"beam {beam}, lp {alpha}", beam, alpha),
        "argos": Search("beam 4, lp 0.2 (Argos)", 4, 0.2),
    }


def measure(jobs: list[Job], rounds: int, child: Child) -> tuple[dict[Job, list[Answer]], list[dict]]:
    """Every job's answers, a round each: `rounds` rounds in turn, every job once a round in the same order,
    so that a drift of the machine hits every row alike; and a record of each child's run, in order."""
    answers: dict[Job, list[Answer]] = {job: [] for job in jobs}
    record = []
    for round_ in range(rounds):
        for job in jobs:
            answer = child(job)
            answers[job].append(answer)
            record.append({"round": round_, "runtime": job.runtime.name, "search": job.search})
            record[-1] |= {key: value for key, value in vars(answer).items() if key != "translations"}
            done = f"round {round_ + 1}/{rounds}: {job.runtime.name}, {job.search}: {answer.seconds:.3f} s"
            print(done, file=sys.stderr)
    return answers, record


def fastest(answers: list[Answer]) -> Answer:
    return min(answers, key=lambda answer: answer.seconds)


def child_process(
    args: argparse.Namespace,
    run: TrainedRun,
    sentences: Path,
    found: dict[str, Search],
    versions: dict[str, str],
) -> Child:
    """A job's child: `python -m benchmarks.export_timing` (its request and answer JSON files next to
    `sentences`), Argos Translate's run offline by the Python of its virtual environment (which adds its
    versions to `versions`)."""
    tmp = sentences.parent

    def run_child(job: Job) -> Answer:
        search = found[job.search]
        request = {"runtime": job.runtime.child, "path": str(job.runtime.path), "sentences": str(sentences)}
        request |= {"beam_size": search.beam_size, "length_penalty": search.length_penalty, "warmup": WARMUP}
        request |= {"checkpoint": run.checkpoint_name, "batch_tokens": run.cfg.search.batch_tokens}
        request |= {"threads": args.threads, "repeats": args.repeats}
        request |= {"from": run.cfg.data.src_lang, "to": run.cfg.data.tgt_lang}
        (tmp / "request.json").write_text(json.dumps(request), encoding="utf-8")
        (tmp / "answer.json").unlink(missing_ok=True)  # never the answer of the child before
        timing = ["-m", "benchmarks.export_timing", str(tmp / "request.json"), str(tmp / "answer.json")]
        if job.runtime.child == "argos":
            python = harness.argos_python(args.work, harness.ARGOSTRANSLATE)
            with tempfile.TemporaryDirectory(dir=tmp) as home:  # its packages installed afresh
                harness.run_offline(python, timing, Path(home))
        else:
            fresh_process([sys.executable, *timing])
        answer = json.loads((tmp / "answer.json").read_text(encoding="utf-8"))
        for name, version in answer.pop("versions").items():  # Argos Translate's environment's
            versions["its ctranslate2" if name == "ctranslate2" else name] = version
        return Answer(**answer)

    return run_child


def parse_args() -> argparse.Namespace:
    parse = parser(__doc__)
    parse.add_argument("--work", type=Path, default=Path("/tmp/nmt-export-bench"), help=f"Argos venv, {LOG}")
    parse.add_argument("--run", type=Path, required=True, help="A trained Transformer run.")
    parse.add_argument("--data", type=Path, required=True, help="Corpus with test.L or test2016.L.")
    parse.add_argument("--sentences", type=int, default=1000, help="Test sentences translated.")
    parse.add_argument("--threads", type=int, default=2, help="CPU threads of each runtime.")
    parse.add_argument("--repeats", type=int, default=3, help="Timed passes in a child; the fastest counts.")
    parse.add_argument("--rounds", type=int, default=3, help="Interleaved rounds; the fastest counts.")
    parse.add_argument("--without", nargs="*", default=[], choices=["argos"], help="Argos left out.")
    args = parse.parse_args()
    if min(args.repeats, args.rounds, args.sentences, args.threads) < 1:
        parse.error("--repeats, --rounds, --sentences and --threads must be at least 1")
    return args


def main() -> None:
    args = parse_args()
    load_before = os.getloadavg()[0]
    args.work.mkdir(parents=True, exist_ok=True)
    run = load_trained([args.run], torch.device("cpu"))
    (test,) = read_directions(replace(run.cfg.data, dir=str(args.data)), "test").values()
    sources, references = test.src[: args.sentences], test.tgt[: args.sentences]
    found = searches(run)
    with tempfile.TemporaryDirectory(prefix="exports-", dir=args.work) as tmp:
        runtimes = prepare_runtimes(run, Path(tmp), "argos" not in args.without)
        sentences = Path(tmp) / "sentences.json"
        sentences.write_text(json.dumps(sources, ensure_ascii=False), encoding="utf-8")
        names = ["torch", "ctranslate2", "sentencepiece", "transformers"]  # Argos's come with its rows
        versions = {name: importlib.metadata.version(name) for name in names}
        jobs = [Job(r, key) for key in found for r in runtimes if key in r.searches]  # nmt first each search
        answers, record = measure(jobs, args.rounds, child_process(args, run, sentences, found, versions))
    log = {"parent": os.getpid(), "rounds": args.rounds, "rows": len(jobs), "runs": record}
    (args.work / LOG).write_text(json.dumps(log, indent=1), encoding="utf-8")
    print(header(args, run, len(sources), versions, load_before, len(jobs)))
    head = ["runtime", "search", "BLEU", "sent/s", "target tok/s", "identical to nmt translate"]
    print(table(head, rows(jobs, answers, found, references, run), left=2))
    print("\n" + "\n".join(notes(jobs, answers, found, len(sources))))


def rows(
    jobs: list[Job],
    answers: dict[Job, list[Answer]],
    found: dict[str, Search],
    references: list[str],
    run: TrainedRun,
) -> list[list[str]]:
    """The table's rows, each job's fastest round."""
    found_rows = []
    for job in jobs:
        best = fastest(answers[job])
        ours = fastest(answers[next(j for j in jobs if j.search == job.search)]).translations  # nmt's
        n = len(best.translations)
        identical = "—" if job.runtime.name == NMT else f"{same_lines(ours, best.translations)}/{n}"
        tokens = sum(len(ids) for ids in run.tokenizers.tgt.encode(best.translations))
        bleu = score(best.translations, references).bleu
        speeds = [f"{n / best.seconds:,.0f}", f"{tokens / best.seconds:,.0f}"]
        found_rows.append([job.runtime.name, found[job.search].name, f"{bleu:.2f}", *speeds, identical])
    return found_rows


def notes(jobs: list[Job], answers: dict[Job, list[Answer]], found: dict[str, Search], n: int) -> list[str]:
    """The lines under the table: nmt's CTranslate2 engine and nmt's own searches against CTranslate2 called
    directly, Argos Translate's output against CTranslate2's, and how far the rounds of a row spread."""
    best = {(job.runtime.name, job.search): fastest(answers[job]) for job in jobs}
    lines = []
    against_ct2 = {
        ENGINE: "nmt's CTranslate2 engine's speed ÷ CTranslate2 called directly",
        NMT: f"{NMT}: its speed ÷ CTranslate2 float32's",
        NMT_INT8: f"{NMT_INT8}: its speed ÷ CTranslate2 float32's",
    }
    for runtime, label in against_ct2.items():
        ratios = [
            f"{found[key].name}: {best[(CT2, key)].seconds / best[(runtime, key)].seconds:.2f}"
            for key in found
            if (runtime, key) in best
        ]
        lines.append(f"{label}: {'; '.join(ratios)}.")
    if (ARGOS, "argos") in best:
        same = same_lines(best[(CT2, "argos")].translations, best[(ARGOS, "argos")].translations)
        lines.append(f"Argos Translate's output equals CTranslate2 float32's: {same}/{n}.")
    spread = max(max(a.seconds for a in answers[job]) / fastest(answers[job]).seconds for job in jobs)
    lines.append(f"The slowest round of a row took at most {spread:.2f} times its fastest.")
    return lines


def same_lines(ours: list[str], theirs: list[str]) -> int:
    return sum(a == b for a, b in zip(ours, theirs, strict=True))


def header(
    args: argparse.Namespace, run: TrainedRun, n: int, versions: dict[str, str], load_before: float, rows: int
) -> str:
    """What was measured, on what, with what, when, and how each row was timed."""
    budget = run.cfg.search.batch_tokens
    model = f"{run.directory.path} ({run.checkpoint_name}.pt, step {run.checkpoint.get('step')})"
    batches = f"the first {n} sentences of the test split of {args.data}, batches within {budget} tokens"
    cpu = f"{machine()}, {args.threads} threads a runtime"
    load = f"load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after"
    software = ", ".join(f"{name} {version}" for name, version in versions.items())
    method = (
        f"Method: each row (runtime and search) in a fresh process of its own that loads only its runtime; "
        f"an untimed warm-up on {WARMUP} sentences, then the fastest of {args.repeats} passes; {args.rounds} "
        f"interleaved rounds over the {rows} rows, each row its fastest round; {args.threads} threads a "
        f"runtime; batches within {budget} tokens sorted by length (Argos Translate: a sentence a call)."
    )
    date = f"{datetime.datetime.now():%Y-%m-%d %H:%M}"
    return f"{model}, {batches}; {cpu} ({load}); {software}; {date}.\n\n{method}\n"


if __name__ == "__main__":
    main()
