"""Random online back-translation (ROBT) against zero-shot off-target output, over several seeds: each seed's
multilingual model (decoder tags, six English-centric Multi30k directions: benchmarks/multilingual_seeds.py)
continued for --updates updates by `nmt train --init-from`, once as it is (the control) and once with
`data.multilingual.back_translation` (--share of each batch's pairs, greedy), then scored on test2016 (beam
5): zero-shot de↔fr with and without the zero-shot vocabulary, the control's pivot through English, and the
six trained directions. Every figure is the mean ± standard deviation over the seeds; the cost is the
updates per second of each arm (one thread, the same machine).

    python -m benchmarks.multilingual_robt --data DIR --work WORK \
        --parents 'SEEDS_WORK/runs/multi-decoder-s{seed}'

Runs, scores and results.json stay in WORK (an interrupted bench resumes).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from benchmarks.multilingual_bench import CONFIG, MULTILINGUAL, TRAINED, ZERO_SHOT, Bench, direction_flags
from benchmarks.multilingual_seeds import ZERO_SHOT_SEARCHES, evaluate, spread

ARMS = ("control", "robt")
CONTINUED = ["train.lr=0.001", "train.schedule=constant", "train.warmup_steps=50"]  # the parents' last lr


def run_name(arm: str, seed: int) -> str:
    return f"{arm}-s{seed}"


def train(bench: Bench, arm: str, seed: int) -> dict[str, Any]:
    """The seed's parent continued for --updates updates, with back-translation in the `robt` arm (once);
    its updates per second."""
    args, name = bench.args, run_name(arm, seed)

    def work() -> dict[str, Any]:
        run = bench.work / "runs" / name
        where = ["--data", str(args.data), "--out", str(run), "--overwrite", "--device", "cpu"]
        parent = ["--init-from", args.parents.format(seed=seed)]
        limits = ["--max-steps", str(args.updates), "--max-time", "0"]
        sets = [MULTILINGUAL, "data.multilingual.tags=decoder", "tokenizer.vocab_size=8000", *CONTINUED]
        sets += [f"train.seed={seed}", f"train.eval_every={args.updates}", "train.eval_max_sentences=100"]
        sets += ["train.final_report=false", "train.log_every=50"]
        if arm == "robt":
            sets += [f"data.multilingual.back_translation.share={args.share}"]
        bench.nmt("train", str(CONFIG), *where, *parent, *limits, *[a for s in sets for a in ("--set", s)])
        records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
        trained = [r for r in records if r["kind"] == "train"]
        last = trained[-1]
        made = sum(r.get("back_translated", 0.0) for r in trained)
        return {"updates": last["step"], "updates_per_s": last["step"] / last["elapsed"], "pairs": made}

    return bench.step("trained", name, work)


def score(bench: Bench, arm: str, seed: int) -> None:
    """Zero-shot de↔fr with each search (and through English, for the control), the trained directions."""
    name = run_name(arm, seed)
    bench.step("trained scores", name, lambda: evaluate(bench, name))
    for direction in ZERO_SHOT:
        for search, flags in ZERO_SHOT_SEARCHES.items():
            zero_shot = [*direction_flags(direction), "--zero-shot", *flags]
            bench.evaluate(f"{name}/{direction}/{search}", name, *zero_shot)
        if arm == "control":
            bench.evaluate(f"{name}/{direction}/pivot", name, *direction_flags(direction), "--pivot", "en")


def zero_shot_table(bench: Bench) -> str:
    """Per arm and search: de→fr and fr→de BLEU, chrF and off-target rate."""
    found, seeds = bench.results.get("scores", {}), bench.args.seeds
    head = "| continued | search | de→fr BLEU | chrF | off-target % | fr→de BLEU | chrF | off-target % |"
    lines = [head, "|---|---|" + "---:|" * 6]
    rows = [(arm, search) for arm in ARMS for search in ZERO_SHOT_SEARCHES] + [("control", "pivot")]
    for arm, search in rows:
        cells = []
        for direction in ZERO_SHOT:
            scored = [found[k] for s in seeds if (k := f"{run_name(arm, s)}/{direction}/{search}") in found]
            cells += [spread([r[key] for r in scored]) for key in ("bleu", "chrf", "off_target")]
        label = "through English (`--pivot en`)" if search == "pivot" else search
        lines.append(f"| {arm} | {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def trained_table(bench: Bench) -> str:
    """Per arm: each trained direction's BLEU, the means, and the cost (updates per second)."""
    found, runs = bench.results.get("trained scores", {}), bench.results.get("trained", {})
    seeds = bench.args.seeds
    head = "| continued | " + " | ".join(TRAINED) + " | mean BLEU | mean chrF | off-target % | updates/s |"
    lines = [head, "|---|" + "---:|" * (len(TRAINED) + 4)]
    for arm in ARMS:
        rows = [found[name] for s in seeds if (name := run_name(arm, s)) in found]
        cells = [spread([r[d]["bleu"] for r in rows]) for d in TRAINED]
        cells += [spread([r[key] for r in rows]) for key in ("bleu", "chrf", "off_target")]
        speeds = [runs[name]["updates_per_s"] for s in seeds if (name := run_name(arm, s)) in runs]
        lines.append(f"| {arm} | " + " | ".join(cells) + f" | {spread(speeds)} |")
    return "\n".join(lines)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, required=True, help="Multi30k: train/val/test2016, en de fr cs")
    parser.add_argument("--work", type=Path, required=True, help="runs, hypotheses and results.json")
    parser.add_argument("--parents", required=True, help="each seed's run directory, with {seed}")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--updates", type=int, default=600, help="updates each run continues for")
    parser.add_argument("--share", type=float, default=0.5, help="share of each batch back-translated")
    parser.add_argument("--arms", nargs="+", choices=ARMS, default=list(ARMS))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--eval-device", default="cpu", help="where the runs are scored")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    bench = Bench(args)
    for seed in args.seeds:
        for arm in args.arms:
            train(bench, arm, seed)
            score(bench, arm, seed)
    print(zero_shot_table(bench))
    print()
    print(trained_table(bench))


if __name__ == "__main__":
    main()
