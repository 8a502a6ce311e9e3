"""Data preparation at scale: synthetic WMT-like corpora prepared as `nmt train` does it, up to the first
update of the tiny Transformer, as one Markdown table (docs/benchmarks.md, "Corpora at scale").

    python -m benchmarks.scale_bench --pairs 100000 1000000 4500000 --work /tmp/nmt-scale
    python -m benchmarks.scale_bench --translate 10000 50000 200000 --work /tmp/nmt-scale
"""

from __future__ import annotations

import time

STARTED = time.time()  # before the heavy imports: a child's wall time to its first update counts them

import argparse  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import resource  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

from benchmarks.common import ROOT, fresh_process, memory_gib, nmt, parser, settings  # noqa: E402
from benchmarks.common import table as markdown  # noqa: E402

CONFIG = ROOT / "configs" / "tiny-transformer.yaml"
OVERRIDES = ["tokenizer.vocab_size=8000", "data.max_len=128", "train.final_report=false", "train.log_every=1"]
BLOCK = 200_000  # sentences generated at a time


def vocabulary(seed: int, size: int = 50_000) -> list[bytes]:
    """`size` distinct words of 1-4 syllables, the frequent (low-rank) ones shorter."""
    rng = np.random.default_rng(seed)
    consonants, vowels = "bcdfghjklmnprstvwz", "aeiou"
    syllables = [c + v for c in consonants for v in vowels]
    syllables += [c + v + e for c in "bdgkmp" for v in vowels for e in "nrs"]
    words: dict[str, None] = {}
    while len(words) < size:
        count = min(4, int(rng.geometric(0.45)) + (len(words) > 2000) + (len(words) > 15000))
        words["".join(syllables[i] for i in rng.integers(0, len(syllables), count))] = None
    return [word.encode() for word in words]


def write_side(path: Path, pairs: int, seed: int, words: list[bytes]) -> None:
    """`pairs` sentences of Zipf-distributed words (rank r drawn with probability ~ 1/r^1.05), lengths from a
    gamma distribution (mean 25) clipped to 5-60 words; written block by block with numpy."""
    rng = np.random.default_rng(seed)
    cdf = np.cumsum(1.0 / np.arange(1, len(words) + 1) ** 1.05)
    width = max(map(len, words)) + 1
    table = np.zeros((len(words), width), np.uint8)
    sizes = np.array([len(w) for w in words])
    for i, word in enumerate(words):
        table[i, : len(word)] = np.frombuffer(word, np.uint8)
    with open(path, "wb") as handle:
        for start in range(0, pairs, BLOCK):
            lengths = np.clip(np.rint(rng.gamma(5.0, 5.0, min(BLOCK, pairs - start))), 5, 60).astype(np.int64)
            ids = np.searchsorted(cdf, rng.random(int(lengths.sum())) * cdf[-1])
            rows = table[ids]
            separators = np.full(len(ids), ord(" "), np.uint8)
            separators[np.cumsum(lengths) - 1] = ord("\n")
            rows[np.arange(len(ids)), sizes[ids]] = separators
            handle.write(rows[np.arange(width) <= sizes[ids][:, None]].tobytes())


def write_corpus(directory: Path, pairs: int) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for side, seed in (("src", 1), ("tgt", 2)):
        words = vocabulary(seed)
        write_side(directory / f"train.{side}", pairs, 10 * seed, words)
        write_side(directory / f"valid.{side}", 1000, 10 * seed + 1, words)


# --- measured in a child process ----------------------------------------------------------------------------


def cpu_seconds() -> float:
    """CPU-seconds of this process and its finished children (the tokenizer trains in one)."""
    usages = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    return sum(usage.ru_utime + usage.ru_stime for usage in usages)


class AnonPeak:
    """The peak of this process's anonymous memory (its own, unlike the file-backed pages of the memory-mapped
    cache, which the kernel may map in large folios), sampled every 20 ms in a thread."""

    def __init__(self) -> None:
        self.peak = 0.0
        threading.Thread(target=self._sample, daemon=True).start()

    def _sample(self) -> None:
        while True:
            self.peak = max(self.peak, memory_gib("RssAnon"))
            time.sleep(0.02)


def memory(anon_peak: AnonPeak) -> dict[str, float]:
    """Peak RSS (this process's, and its children's), peak anonymous memory, and now: RSS anonymous and
    file-backed, and the private part (smaps_rollup), in GiB."""
    rollup = dict(line.split(":", 1) for line in Path("/proc/self/smaps_rollup").read_text().splitlines()[1:])
    return {
        "peak_anon_gib": max(anon_peak.peak, memory_gib("RssAnon")),
        "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
        "child_peak_rss_gib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20,
        "rss_anon_gib": memory_gib("RssAnon"),
        "rss_file_gib": memory_gib("RssFile"),
        "private_gib": sum(int(rollup[k].split()[0]) for k in ("Private_Clean", "Private_Dirty")) / 2**20,
    }


def child_train(args: argparse.Namespace) -> None:
    """`nmt train` in this process, timing its phases; writes the figures at the first update to args.json."""
    import nmt.data.prepare as prepare
    import nmt.data.splits as splits
    import nmt.train.command as training
    import nmt.train.update_stream as update_stream
    from nmt.config.schema import replace
    from nmt.config.yaml_file import load_config

    phases: dict[str, list[float]] = {}
    anon_peak = AnonPeak()

    def timed(name: str, function: Any) -> Any:
        def wrapper(*a: Any, **k: Any) -> Any:
            wall, cpu = time.time(), cpu_seconds()
            try:
                return function(*a, **k)
            finally:
                seconds = phases.setdefault(name, [0.0, 0.0])
                seconds[0] += time.time() - wall
                seconds[1] += cpu_seconds() - cpu

        return wrapper

    for module, name, phase in (
        (splits.LanguageSplit, "count", "check"),
        (prepare, "write_sample", "tokenizer"),
        (prepare, "train_tokenizers", "tokenizer"),
        (prepare, "encode_parts", "encoding"),
        (update_stream, "token_budget_groups", "planning"),
    ):
        setattr(module, name, timed(phase, getattr(module, name)))
    step = training.Trainer.train_step  # the class nmt/train/loop.py defines

    def first_step(self: Any, batches: Any) -> Any:
        result = step(self, batches)
        if "first_update" not in phases:
            phases["first_update"] = [time.time() - STARTED, cpu_seconds()]
            record = {"rank": self.world.rank, "phases": phases, "memory": memory(anon_peak)}
            Path(f"{args.json}.{self.world.rank}").write_text(json.dumps(record))
        return result

    training.Trainer.train_step = first_step
    cfg = load_config(CONFIG, [f"data.dir={args.data}", "train.device=cpu", "train.max_time=0.0", *OVERRIDES])
    cfg = replace(cfg, train={"max_steps": args.steps})
    training.train(cfg, Path(args.out), resume=args.resume)


def child_spm(args: argparse.Namespace) -> None:
    """CPU-seconds of sentencepiece's batch encoding of the training split's cleaned text (--gc-paused: with
    Python's cyclic garbage collector off)."""
    from nmt.config.yaml_file import load_config
    from nmt.data.splits import language_split
    from nmt.data.tokenizer import load_tokenizers

    cfg = load_config(CONFIG, [f"data.dir={args.data}", *OVERRIDES])
    tokenizers = load_tokenizers(Path(args.out), cfg.tokenizer.joint)
    if args.gc_paused:
        gc.disable()
    cpu = 0.0
    (direction,) = cfg.data.directions.directions
    for pairs in language_split(cfg.data, "train").pairs(direction, skip_bad_lines=False):
        for side, sentences in ((tokenizers.src, pairs.src), (tokenizers.tgt, pairs.tgt)):
            before = cpu_seconds()
            side.encode(sentences)
            cpu += cpu_seconds() - before
    Path(f"{args.json}.0").write_text(json.dumps({"spm_cpu": cpu}))


# --- the parent ---------------------------------------------------------------------------------------------


def run_child(
    mode: str, data: Path, out: Path, json_path: Path, env: dict[str, str], *extra: str, nproc: int = 1
) -> list[dict]:
    """Run this module as a child (under torchrun when nproc > 1; `env` puts the repository on its path);
    returns its records by rank."""
    command = [sys.executable]
    if nproc > 1:
        command += ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc)]
    command += ["-m", "benchmarks.scale_bench", "--child", mode, "--data", str(data), "--out", str(out)]
    fresh_process([*command, "--json", str(json_path), *extra], env)
    return [json.loads(Path(f"{json_path}.{rank}").read_text()) for rank in range(nproc)]


def measure(pairs: int, work: Path, nproc: int, keep: bool, cold_only: bool = False) -> list[dict[str, Any]]:
    data, cache, runs = work / f"corpus-{pairs}", work / f"cache-{pairs}", work / f"runs-{pairs}"
    if not (data / "train.tgt").is_file():
        write_corpus(data, pairs)
    for path in (cache, runs):
        shutil.rmtree(path, ignore_errors=True)
    env = os.environ | {"NMT_CACHE": str(cache), "PYTHONPATH": str(ROOT)}
    rows, spm = [], []
    kinds = [("cold", runs / "a", ["--steps=1"]), ("warm", runs / "b", ["--steps=1"])]
    kinds += [("resume", runs / "a", ["--steps=2", "--resume"])] if nproc == 1 else []
    for kind, out, flags in kinds[:1] if cold_only else kinds:
        records = run_child("train", data, out, work / f"{kind}.json", env, *flags, nproc=nproc)
        size = sum(f.stat().st_size for f in cache.rglob("*") if f.is_file()) / 2**20
        rows += [{"pairs": pairs, "run": kind, "cache_mib": size, "nproc": nproc, **r} for r in records]
        if kind == "cold" and not cold_only:  # the reference, twice around the short runs (the noise)
            spm.append(run_child("spm", data, runs / "a", work / "spm.json", env)[0]["spm_cpu"])
    if not cold_only:
        spm.append(run_child("spm", data, runs / "a", work / "spm.json", env)[0]["spm_cpu"])
        paused = run_child("spm", data, runs / "a", work / "spm.json", env, "--gc-paused")[0]["spm_cpu"]
        rows[0] |= {"spm_cpu": sum(spm) / len(spm), "spm_runs": spm, "spm_paused_cpu": paused}
    for path in [] if keep else [data, cache, runs]:
        shutil.rmtree(path, ignore_errors=True)
    return rows


def _phase(row: dict[str, Any], name: str) -> float:
    return row["phases"].get(name, [0.0, 0.0])[0]


def _ratio(row: dict[str, Any], reference: str) -> str:
    return f"{row['phases']['first_update'][1] / row[reference]:.2f}" if reference in row else ""


COLUMNS = [  # header, cell
    ("pairs", lambda r: f"{r['pairs']:,}"),
    ("run", lambda r: r["run"] + (f", rank {r['rank']}" if r["nproc"] > 1 else "")),
    ("check s", lambda r: f"{_phase(r, 'check'):.1f}"),
    ("tokenizer s", lambda r: f"{_phase(r, 'tokenizer'):.1f}"),
    ("encoding s", lambda r: f"{_phase(r, 'encoding'):.1f}"),
    ("planning s", lambda r: f"{_phase(r, 'planning'):.2f}"),
    ("to 1st update s", lambda r: f"{r['phases']['first_update'][0]:.1f}"),
    ("CPU-s to 1st update", lambda r: f"{r['phases']['first_update'][1]:.0f}"),
    (
        "spm encode CPU-s",
        lambda r: "{:.0f} ({:.0f}, {:.0f})".format(r["spm_cpu"], *r["spm_runs"]) if "spm_cpu" in r else "",
    ),
    ("CPU ratio", lambda r: _ratio(r, "spm_cpu")),
    ("spm, collector paused CPU-s", lambda r: f"{r['spm_paused_cpu']:.0f}" if "spm_paused_cpu" in r else ""),
    ("CPU ratio to it", lambda r: _ratio(r, "spm_paused_cpu")),
    (
        "peak RSS GiB (tokenizer child)",
        lambda r: "{peak_rss_gib:.2f} ({child_peak_rss_gib:.2f})".format(**r["memory"]),
    ),
    ("peak anon GiB", lambda r: f"{r['memory']['peak_anon_gib']:.2f}"),
    (
        "RSS at 1st update: anon + file GiB",
        lambda r: "{rss_anon_gib:.2f} + {rss_file_gib:.2f}".format(**r["memory"]),
    ),
    ("private GiB", lambda r: f"{r['memory']['private_gib']:.2f}"),
    ("cache MiB", lambda r: f"{r['cache_mib']:.0f}"),
]


def table(rows: list[dict[str, Any]]) -> str:
    """One Markdown row per run (and process)."""
    return markdown([head for head, _ in COLUMNS], ([cell(r) for _, cell in COLUMNS] for r in rows), left=0)


def measure_translate(counts: list[int], work: Path) -> str:
    """Peak RSS and time of `nmt translate` over `counts` lines, as a Markdown table."""
    from nmt.data.synthetic import reordering_pairs, write_reordering_corpus

    data, run = work / "reorder", work / "reorder-run"
    write_reordering_corpus(data)
    env = os.environ | {"NMT_CACHE": str(work / "reorder-cache")}
    train = ["train", CONFIG, "--data", data, "--out", run, "--device", "cpu", "--max-steps", "300"]
    nmt(*train, "--overwrite", *settings("train.final_report=false"), env=env)
    rows = []
    for count in counts:
        source = work / f"translate-{count}.txt"
        source.write_text("".join(line + "\n" for line in reordering_pairs(count, 300, 3, 10, seed=5)[0]))
        greedy = ["-o", f"{source}.out", "--beam-size", "1", "--device", "cpu"]
        done = nmt("translate", run, "-i", source, *greedy, env=env)
        rows.append([f"{count:,}", f"{done.seconds:.0f}", f"{done.cpu_seconds:.0f}", f"{done.peak_mib:.0f}"])
    return markdown(["lines", "wall s", "CPU-s", "peak RSS MiB"], rows, left=0)


def main() -> None:
    parse = parser(__doc__)
    parse.add_argument("--pairs", type=int, nargs="+", default=[100_000])
    parse.add_argument("--work", type=Path, default=Path("/tmp/nmt-scale"))
    parse.add_argument("--nproc", type=int, default=1)
    parse.add_argument("--keep", action="store_true", help="Keep corpora, caches and runs.")
    parse.add_argument("--cold-only", action="store_true", help="The cold run alone (no spm reference).")
    parse.add_argument("--translate", type=int, nargs="+", help="Time `nmt translate` on these line counts.")
    parse.add_argument("--child", choices=["train", "spm"], help=argparse.SUPPRESS)
    for name in ("--data", "--out", "--json"):
        parse.add_argument(name, help=argparse.SUPPRESS)
    parse.add_argument("--steps", type=int, default=1, help=argparse.SUPPRESS)
    parse.add_argument("--resume", action="store_true", help=argparse.SUPPRESS)
    parse.add_argument("--gc-paused", action="store_true", help=argparse.SUPPRESS)
    args = parse.parse_args()
    if args.child:
        (child_train if args.child == "train" else child_spm)(args)
        if int(os.environ.get("WORLD_SIZE", "1")) > 1:  # as nmt/__main__.py: gloo threads may abort shutdown
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)
        return
    if args.translate:
        print(measure_translate(args.translate, args.work))
        return
    options = (args.work, args.nproc, args.keep, args.cold_only)
    rows = [row for pairs in args.pairs for row in measure(pairs, *options)]
    print(table(rows))


if __name__ == "__main__":
    main()
