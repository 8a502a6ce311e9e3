"""Tag placement and the target-language vocabulary over several seeds: the multilingual model of
benchmarks/multilingual_bench.py (six English-centric Multi30k directions, joint 8k vocabulary) trained with
its tags on the encoder and on the decoder, once per seed, then scored on test2016 (beam 5): the six trained
directions with and without `--target-vocabulary`, zero-shot de↔fr with and without the zero-shot vocabulary.
Every figure is the mean ± standard deviation over the seeds.

    python -m benchmarks.multilingual_seeds --data DIR --work WORK --seeds 1 2 3 --updates 1800 --device cuda

Each run trains a fixed number of updates (`--updates`, validated every 600) in a process of its own on
--device; scoring runs on --eval-device. Runs and results.json stay in WORK (an interrupted bench resumes).
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

from benchmarks.multilingual_bench import (
    CONFIG,
    MULTILINGUAL,
    TRAINED,
    ZERO_SHOT,
    Bench,
    direction_flags,
)

PLACEMENTS = ("encoder", "decoder")
ZERO_SHOT_SEARCHES = {"zero-shot vocabulary": [], "no vocabulary": ["--no-zero-shot-vocabulary"]}
TRAINED_SEARCHES = {"plain": [], "target vocabulary": ["--target-vocabulary"]}


def run_name(tags: str, seed: int) -> str:
    return f"multi-{tags}-s{seed}"


def train(bench: Bench, tags: str, seed: int) -> dict[str, Any]:
    """`nmt train` of one placement and seed for --updates updates (once); its updates and validation BLEU."""
    args, name = bench.args, run_name(tags, seed)

    def work() -> dict[str, Any]:
        run = bench.work / "runs" / name
        where = ["--data", str(args.data), "--out", str(run), "--overwrite", "--device", args.device]
        limits = ["--max-steps", str(args.updates), "--max-time", "0"]
        sets = [MULTILINGUAL, f"data.multilingual.tags={tags}", "tokenizer.vocab_size=8000"]
        sets += [f"train.seed={seed}", "train.eval_every=600", "train.eval_max_sentences=100"]
        sets += ["train.final_report=false"]
        bench.nmt("train", str(CONFIG), *where, *limits, *[a for s in sets for a in ("--set", s)])
        records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
        valid = [r for r in records if r["kind"] == "valid"]
        return {"updates": max(r["step"] for r in valid), "valid_bleu": max(r["bleu"] for r in valid)}

    return bench.step("trained", name, work)


def score(bench: Bench, tags: str, seed: int) -> None:
    """The trained directions (one `nmt evaluate`, every direction) and zero-shot de↔fr, each search."""
    name, device = run_name(tags, seed), ["--device", bench.args.eval_device]
    for search, flags in TRAINED_SEARCHES.items():
        bench.step("trained scores", f"{name}/{search}", lambda flags=flags: evaluate(bench, name, *flags))
    for direction in ZERO_SHOT:
        for search, flags in ZERO_SHOT_SEARCHES.items():
            key = f"{name}/{direction}/{search}"
            zero_shot = [*direction_flags(direction), "--zero-shot", *flags, *device]
            bench.evaluate(key, name, *zero_shot)


def evaluate(bench: Bench, run: str, *flags: str) -> dict[str, Any]:
    """Every trained direction's BLEU, chrF and off-target rate, and their means."""
    path = bench.work / "scores" / f"{run}-trained{''.join(flags)}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    test = ["--split", "test", "--json", str(path), "--device", bench.args.eval_device]
    bench.nmt("evaluate", str(bench.work / "runs" / run), *test, *flags)
    found = json.loads(path.read_text())
    keys = ("bleu", "chrf", "off_target")
    return {key: found[key] for key in keys} | {
        direction: {key: found["directions"][direction][key] for key in keys} for direction in TRAINED
    }


def spread(values: list[float]) -> str:
    """mean ± standard deviation (the mean alone for one value)."""
    if len(values) < 2:
        return f"{values[0]:.2f}" if values else "—"
    return f"{statistics.mean(values):.2f} ± {statistics.stdev(values):.2f}"


def trained_table(bench: Bench) -> str:
    """Per placement and search: each trained direction's BLEU and the means (BLEU, chrF, off-target)."""
    found, seeds = bench.results.get("trained scores", {}), bench.args.seeds
    head = "| tags | search | " + " | ".join(TRAINED) + " | mean BLEU | mean chrF | off-target % |"
    lines = [head, "|---|---|" + "---:|" * (len(TRAINED) + 3)]
    for tags in PLACEMENTS:
        for search in TRAINED_SEARCHES:
            rows = [found[key] for s in seeds if (key := f"{run_name(tags, s)}/{search}") in found]
            cells = [spread([r[d]["bleu"] for r in rows]) for d in TRAINED]
            cells += [spread([r[key] for r in rows]) for key in ("bleu", "chrf", "off_target")]
            lines.append(f"| {tags} | {search} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def zero_shot_table(bench: Bench) -> str:
    """Per placement and search: de→fr and fr→de BLEU, chrF and off-target rate."""
    found, seeds = bench.results.get("scores", {}), bench.args.seeds
    head = "| tags | search | de→fr BLEU | chrF | off-target % | fr→de BLEU | chrF | off-target % |"
    lines = [head, "|---|---|" + "---:|" * 6]
    for tags in PLACEMENTS:
        for search in ZERO_SHOT_SEARCHES:
            cells = []
            for direction in ZERO_SHOT:
                keys = [f"{run_name(tags, s)}/{direction}/{search}" for s in seeds]
                rows = [found[key] for key in keys if key in found]
                cells += [spread([r[key] for r in rows]) for key in ("bleu", "chrf", "off_target")]
            lines.append(f"| {tags} | {search} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, required=True, help="Multi30k: train/val/test2016, en de fr cs")
    parser.add_argument("--work", type=Path, required=True, help="runs, hypotheses and results.json")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--updates", type=int, default=1800, help="updates of each run")
    parser.add_argument("--device", default="cpu", help="where the runs train")
    parser.add_argument("--eval-device", default="cpu", help="where they are scored")
    parser.add_argument("--threads", type=int, default=1)
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    bench = Bench(args)
    for seed in args.seeds:
        for tags in PLACEMENTS:
            train(bench, tags, seed)
            score(bench, tags, seed)
    print(trained_table(bench))
    print()
    print(zero_shot_table(bench))


if __name__ == "__main__":
    main()
