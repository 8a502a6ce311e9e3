"""`nmt translate` beside its exports on CPU, on the same test sentences, as one Markdown table: CTranslate2
(float32 and int8), the Argos Translate package run by argostranslate, and the Hugging Face export run by
transformers.

    python -m benchmarks.export_bench --run RUN_DIR --data DIR --work /tmp/nmt-export-bench --threads 2

Each runtime translates the first --sentences test sentences (test.L or test2016.L of --data, or --src and
--ref) --repeats times after an untimed warm-up on 20 of them (the fastest pass counts), on --threads CPU
threads, in batches of the run's search.batch_size sorted by length (as `nmt translate` does), with the
searches it can run:

- greedy: nmt, CTranslate2 float32 and int8, transformers `generate` (num_beams=1);
- the run's beam size and length penalty: nmt, CTranslate2 float32 and int8;
- Argos Translate's own search, beam 4 and length penalty 0.2: nmt, CTranslate2 float32, and argostranslate
  (argos-translate-lt, LibreTranslate's argostranslate, in a virtual environment made once under --work and
  run offline by benchmarks/argos_offline/, the harness of the Argos tests too), translating one
  sentence a call as LibreTranslate does a request, its sentence splitter included.

The PyTorch runtimes (nmt, transformers) run all their searches before CTranslate2 first runs in the process
(see `load_runtimes`). BLEU is sacreBLEU's against the references; target tok/s counts the run's sentencepiece
pieces of the output (re-encoded, the same count for every runtime); "identical to nmt translate" counts the
sentences whose translation equals nmt's (PyTorch) with the same search.

Without --run it writes a Multi30k-sized synthetic reordering corpus (29,000 / 1,014 / 1,000 pairs, 300-word
lexicon, 3-10 words a sentence) in --work and trains configs/tiny-transformer.yaml on it for --steps updates.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from benchmarks.argos_offline import harness
from nmt.data.batching import sorted_groups
from nmt.data.corpus import SplitFiles, read_files
from nmt.data.splits import read_directions
from nmt.data.synthetic import write_reordering_corpus
from nmt.decode.exported import import_ctranslate2, load_export
from nmt.decode.loading import load_trained
from nmt.decode.trained_run import TrainedRun
from nmt.decode.translator import TorchTranslator, Translator
from nmt.evaluate.scores import score
from nmt.export.argos import export_package
from nmt.export.ctranslate2 import export_run
from nmt.export.huggingface import export_run as export_huggingface
from nmt.export.huggingface import import_transformers

ROOT = Path(__file__).resolve().parents[1]
WARMUP = 20  # sentences translated untimed first
RUNTIMES = ("int8", "huggingface", "argos")  # those --without can leave out
ARGOS = "Argos Translate (argostranslate, a call per sentence)"


@dataclass(frozen=True)
class Search:
    name: str
    beam_size: int
    length_penalty: float


Timed = Callable[[list[str], Search], tuple[list[str], float]]  # translations and the seconds they took


@dataclass(frozen=True)
class Runtime:
    name: str
    timed: Timed
    searches: tuple[str, ...]  # keys of the searches it runs: greedy, beam, argos


def timed(translate_with: Callable[[list[str], Search], list[str]], repeats: int) -> Timed:
    """`translate_with` timed after an untimed warm-up on the first WARMUP sentences: the fastest of
    `repeats` runs."""

    def run(sources: list[str], search: Search) -> tuple[list[str], float]:
        translate_with(sources[:WARMUP], search)
        fastest = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            translations = translate_with(sources, search)
            fastest = min(fastest, time.perf_counter() - start)
        return translations, fastest

    return run


def train_run(work: Path, steps: int) -> Path:
    """The tiny Transformer trained on a fresh Multi30k-sized synthetic corpus in `work`."""
    data = write_reordering_corpus(work / "data", train=29_000, valid=1_014, test=1_000, vocab=300)
    run_dir = work / "run"
    command = [sys.executable, "-m", "nmt", "-q", "train", str(ROOT / "configs" / "tiny-transformer.yaml")]
    command += ["--data", str(data), "--out", str(run_dir), "--device", "cpu", "--max-steps", str(steps)]
    subprocess.run([*command, "--max-time", "0", "--overwrite"], check=True)
    return run_dir


def translator_runtime(
    name: str, translator: Translator, batch_size: int, repeats: int, searches: tuple[str, ...]
) -> Runtime:
    """A runtime that translates through nmt's Translator (the torch run, or a CTranslate2 export)."""

    def translate_with(sentences: list[str], search: Search) -> list[str]:
        searching = translator.with_search(
            beam_size=search.beam_size, length_penalty=search.length_penalty, nbest=1, batch_size=batch_size
        )
        return searching.translate(sentences)

    return Runtime(name, timed(translate_with, repeats), searches)


def nmt_runtime(run: TrainedRun, batch_size: int, repeats: int) -> Runtime:
    translator = TorchTranslator.of_run(run)
    return translator_runtime(
        "nmt translate (PyTorch)", translator, batch_size, repeats, ("greedy", "beam", "argos")
    )


def ctranslate2_runtime(
    run: TrainedRun, out: Path, quantization: str, threads: int, batch_size: int, repeats: int
) -> Runtime:
    export_run(run.directory.path, out, quantization=quantization, which=run.checkpoint_name)
    searches = ("greedy", "beam", "argos") if quantization == "float32" else ("greedy", "beam")
    exported = load_export(out, "cpu", threads)
    return translator_runtime(f"CTranslate2 {quantization}", exported, batch_size, repeats, searches)


def huggingface_runtime(run: TrainedRun, out: Path, batch_size: int, repeats: int) -> Runtime:
    """transformers' greedy `generate` on the Hugging Face export, on torch's threads (as nmt)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the export is a local directory: never ask the Hub
    transformers = import_transformers()
    export_huggingface(run.directory.path, out, which=run.checkpoint_name)
    tokenizer = transformers.AutoTokenizer.from_pretrained(out)
    model = transformers.AutoModelForSeq2SeqLM.from_pretrained(out).eval()

    def generate(sentences: list[str], search: Search) -> list[str]:
        ids = tokenizer(sentences, truncation=True)["input_ids"]
        outputs = [""] * len(sentences)
        for group in sorted_groups([len(i) for i in ids], batch_size):
            batch = tokenizer.pad({"input_ids": [ids[i] for i in group]}, return_tensors="pt")
            with torch.inference_mode():
                generated = model.generate(**batch, num_beams=search.beam_size)  # (batch, out_len)
            texts = tokenizer.batch_decode(generated, skip_special_tokens=True)
            for i, text in zip(group, texts, strict=True):
                outputs[i] = text
        return outputs

    return Runtime("transformers generate (Hugging Face export)", timed(generate, repeats), ("greedy",))


def argos_runtime(run: TrainedRun, tmp: Path, args: argparse.Namespace, versions: dict[str, str]) -> Runtime:
    """argostranslate translating a sentence a call in its own virtual environment, offline; the driver
    warms up and times itself (and tells its versions, added to `versions`)."""
    package = export_package(run.directory.path, tmp / "package.argosmodel", which=run.checkpoint_name)
    python = harness.argos_python(args.work, harness.ARGOSTRANSLATE)
    src, tgt = run.cfg.data.src_lang, run.cfg.data.tgt_lang

    def argos(sentences: list[str], search: Search) -> tuple[list[str], float]:
        request = {
            "mode": "bench",
            "packages": [str(package)],
            "from": src,
            "to": tgt,
            "sentences": sentences,
            "threads": args.threads,
            "warmup": WARMUP,
            "repeats": args.repeats,
        }
        with tempfile.TemporaryDirectory(dir=tmp) as home:
            answer = harness.run_offline(python, request, Path(home))
        versions["argos-translate-lt"] = answer["versions"]["argos-translate-lt"]
        versions["its ctranslate2"] = answer["versions"]["ctranslate2"]
        return answer["translations"], answer["seconds"]

    return Runtime(ARGOS, argos, ("argos",))


def sentence_pairs(args: argparse.Namespace, run: TrainedRun) -> tuple[list[str], list[str]]:
    """The first --sentences source sentences and their references."""
    if args.src:
        text = read_files(SplitFiles(args.src, args.ref), "test")
    else:
        data = replace(run.cfg.data, dir=str(args.data or args.work / "data"))
        (text,) = read_directions(data, "test").values()
    return text.src[: args.sentences], text.tgt[: args.sentences]


def cpu_model() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    for line in cpuinfo.read_text().splitlines() if cpuinfo.is_file() else []:
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--work",
        type=Path,
        required=True,
        help="Directory for the Argos venv (kept), exports (removed after) and a trained run.",
    )
    parser.add_argument("--run", type=Path, help="A trained Transformer run (default: train one in --work).")
    parser.add_argument("--data", type=Path, help="Corpus with test.L or test2016.L (default: --work/data).")
    parser.add_argument("--src", type=Path, help="Test source sentences (with --ref, instead of --data).")
    parser.add_argument("--ref", type=Path, help="Their reference translations.")
    parser.add_argument("--steps", type=int, default=1000, help="Training updates when training.")
    parser.add_argument("--sentences", type=int, default=1000, help="Test sentences translated.")
    parser.add_argument("--threads", type=int, default=2, help="CPU threads of each runtime.")
    parser.add_argument("--repeats", type=int, default=3, help="Timed runs of each; the fastest counts.")
    parser.add_argument("--without", nargs="*", default=[], choices=RUNTIMES, help="Runtimes left out.")
    args = parser.parse_args()
    if (args.src is None) != (args.ref is None) or (args.src and args.data):
        parser.error("give --src and --ref together, or --data")
    if args.repeats < 1 or args.sentences < 1:
        parser.error("--repeats and --sentences must be at least 1")
    return args


def main() -> None:
    args = parse_args()
    load_before = os.getloadavg()[0]
    args.work.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(args.threads)
    run = load_trained([args.run or train_run(args.work, args.steps)], torch.device("cpu"))
    sources, references = sentence_pairs(args, run)
    versions = {"torch": torch.__version__, "ctranslate2": import_ctranslate2().__version__}
    with tempfile.TemporaryDirectory(prefix="exports-", dir=args.work) as tmp:
        runtimes = load_runtimes(args, run, Path(tmp), versions)
        rows, argos_line = measure(runtimes, searches(run), sources, references, run)
    print(header(args, run, len(sources), versions, load_before))
    print("| runtime | search | BLEU | sent/s | target tok/s | identical to nmt translate |")
    print("|---|---|---:|---:|---:|---:|")
    print("\n".join(rows) + argos_line)


def searches(run: TrainedRun) -> dict[str, Search]:
    """Greedy, the run's beam search and Argos Translate's, by the keys Runtime.searches uses."""
    beam, alpha = run.cfg.search.beam_size, run.cfg.search.length_penalty
    return {
        "greedy": Search("greedy", 1, alpha),
        "beam": Search(f"beam {beam}, lp {alpha}", beam, alpha),
        "argos": Search("beam 4, lp 0.2 (Argos)", 4, 0.2),
    }


def load_runtimes(
    args: argparse.Namespace, run: TrainedRun, tmp: Path, versions: dict[str, str]
) -> list[Runtime]:
    """The runtimes that --without leaves in, in the order they are measured: those on PyTorch's threads
    first (nmt, transformers), then those of the exports written in `tmp` (CTranslate2, Argos Translate).

    CTranslate2 brings an OpenMP runtime of its own: once it has run in a process whose PyTorch threads
    already exist, every parallel PyTorch operation takes about twice as long, which would charge
    CTranslate2's presence to the PyTorch runtimes. Measured first, they run as they do alone."""
    batch_size, repeats = run.cfg.search.batch_size, args.repeats
    runtimes = [nmt_runtime(run, batch_size, repeats)]
    if "huggingface" not in args.without:
        runtimes.append(huggingface_runtime(run, tmp / "huggingface", batch_size, repeats))
        versions["transformers"] = import_transformers().__version__
    for quantization in ("float32", "int8")[: 1 + ("int8" not in args.without)]:
        out = tmp / f"ctranslate2-{quantization}"
        runtimes.append(ctranslate2_runtime(run, out, quantization, args.threads, batch_size, repeats))
    if "argos" not in args.without:
        runtimes.append(argos_runtime(run, tmp, args, versions))
    return runtimes


def measure(
    runtimes: list[Runtime],
    searches: dict[str, Search],
    sources: list[str],
    references: list[str],
    run: TrainedRun,
) -> tuple[list[str], str]:
    """The table's rows, search by search (nmt first in each), and a line comparing Argos with CTranslate2
    at Argos' search (empty without Argos). Each runtime runs all its searches before the next one starts
    (see `load_runtimes`)."""
    timings = {
        (runtime.name, key): runtime.timed(sources, search)
        for runtime in runtimes
        for key, search in searches.items()
        if key in runtime.searches
    }
    rows, argos_line = [], ""
    for key, search in searches.items():
        found: dict[str, list[str]] = {}
        for runtime in (r for r in runtimes if key in r.searches):
            translations, seconds = timings[runtime.name, key]
            found[runtime.name] = translations
            rows.append(row(runtime.name, search, translations, seconds, references, run, found))
        if ARGOS in found:
            same = same_lines(found["CTranslate2 float32"], found[ARGOS])
            argos_line = f"\n\nArgos Translate's output equals CTranslate2 float32's: {same}/{len(sources)}."
    return rows, argos_line


def row(
    name: str,
    search: Search,
    translations: list[str],
    seconds: float,
    references: list[str],
    run: TrainedRun,
    found: dict[str, list[str]],
) -> str:
    """One table row; `found` holds the translations of this search so far, nmt's first."""
    ours, n = next(iter(found.values())), len(translations)
    identical = "—" if translations is ours else f"{same_lines(ours, translations)}/{n}"
    tokens = sum(len(ids) for ids in run.tokenizers.tgt.encode(translations))
    bleu = score(translations, references).bleu
    speeds = f"{n / seconds:,.0f} | {tokens / seconds:,.0f}"
    return f"| {name} | {search.name} | {bleu:.2f} | {speeds} | {identical} |"


def same_lines(ours: list[str], theirs: list[str]) -> int:
    return sum(a == b for a, b in zip(ours, theirs, strict=True))


def header(
    args: argparse.Namespace, run: TrainedRun, n: int, versions: dict[str, str], load_before: float
) -> str:
    """What was measured, on what, with what, when."""
    source = args.src or f"the test split of {args.data or args.work / 'data'}"
    machine = f"{cpu_model()}, {os.cpu_count()} cores, {args.threads} threads a runtime"
    load = f"load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after"
    model = f"{run.directory.path} ({run.checkpoint_name}.pt, step {run.checkpoint.get('step')})"
    batches = f"the first {n} sentences of {source}, batches of {run.cfg.search.batch_size} sorted by length"
    software = ", ".join(f"{name} {version}" for name, version in versions.items())
    date = f"{datetime.datetime.now():%Y-%m-%d %H:%M}"
    return f"{model}, {batches}; {machine} ({load}); {software}; {date}.\n"


if __name__ == "__main__":
    main()
