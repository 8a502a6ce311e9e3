"""Tag placement, the target-language vocabulary and online back-translation over several seeds: the
multilingual model of benchmarks/multilingual_bench.py, mean ± standard deviation over the seeds, scored on
test2016 (beam 5; docs/multilingual.md).

    python -m benchmarks.multilingual_seeds --data DIR --work WORK --seeds 1 2 3 --updates 1800 --device cuda
    python -m benchmarks.multilingual_seeds --data DIR --work WORK \
        --parents 'SEEDS_WORK/runs/multi-decoder-s{seed}' --updates 800 [--arms robt --share 0.2]

The first trains both tag placements; the second continues each seed's decoder-tag model without (control)
and with online back-translation (robt). Runs and results.json stay in WORK (a bench resumes).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.common import parser, settings, spread, table
from benchmarks.multilingual_bench import MULTILINGUAL, TRAINED, ZERO_SHOT, Bench, direction_flags

PLACEMENTS = ("encoder", "decoder")
ARMS = ("control", "robt")  # back-translation's experiment: its parents continued without it, and with it
# the parents' last learning rate, held
CONTINUED = ["train.lr=0.001", "train.schedule=constant", "train.warmup_steps=50", "train.log_every=50"]
ZERO_SHOT_SEARCHES = {"zero-shot vocabulary": [], "no vocabulary": ["--no-zero-shot-vocabulary"]}
TRAINED_SEARCHES = {"plain": [], "target vocabulary": ["--target-vocabulary"]}
SCORES = ("bleu", "chrf", "off_target")


def run_name(tags: str, seed: int) -> str:
    return f"multi-{tags}-s{seed}"


def arm_name(arm: str, seed: int) -> str:
    return f"{arm}-s{seed}"


def train(bench: Bench, name: str, seed: int, sets: list[str], *flags: str) -> list[dict[str, Any]]:
    """`nmt train` of run `name` with the bench's multilingual settings, `sets` and `flags`, for --updates
    updates on --device; its metrics."""
    limits = ["--device", bench.args.device, "--max-steps", str(bench.args.updates), "--max-time", "0"]
    common = [MULTILINGUAL, "tokenizer.vocab_size=8000", f"train.seed={seed}", "train.eval_max_sentences=100"]
    return bench.train_run(name, *flags, *limits, *settings(*common, *sets))[0]


def train_placement(bench: Bench, tags: str, seed: int) -> dict[str, Any]:
    """One placement and seed trained (once); its updates and best validation BLEU."""

    def work() -> dict[str, Any]:
        sets = [f"data.multilingual.tags={tags}", "train.eval_every=600"]
        valid = [r for r in train(bench, run_name(tags, seed), seed, sets) if r["kind"] == "valid"]
        return {"updates": max(r["step"] for r in valid), "valid_bleu": max(r["bleu"] for r in valid)}

    return bench.step("trained", run_name(tags, seed), work)


def train_arm(bench: Bench, arm: str, seed: int) -> dict[str, Any]:
    """The seed's parent continued, with back-translation in the `robt` arm (once); its updates and updates
    per second."""

    def work() -> dict[str, Any]:
        args = bench.args
        sets = ["data.multilingual.tags=decoder", *CONTINUED, f"train.eval_every={args.updates}"]
        if arm == "robt":
            sets.append(f"data.multilingual.back_translation.share={args.share}")
        parent = ["--init-from", args.parents.format(seed=seed)]
        last = [r for r in train(bench, arm_name(arm, seed), seed, sets, *parent) if r["kind"] == "train"][-1]
        return {"updates": last["step"], "updates_per_s": last["step"] / last["elapsed"]}

    return bench.step("trained", arm_name(arm, seed), work)


def score(bench: Bench, name: str, trained: dict[str, list[str]], pivot: bool = False) -> None:
    """The trained directions with each of `trained`'s searches (one `nmt evaluate`, every direction), and
    zero-shot de↔fr with each search (and through English where `pivot`)."""
    for search, flags in trained.items():
        key = f"{name}/{search}" if search else name
        bench.step("trained scores", key, lambda flags=flags: evaluate(bench, name, *flags))
    searches = {search: ["--zero-shot", *flags] for search, flags in ZERO_SHOT_SEARCHES.items()}
    searches |= {"pivot": ["--pivot", "en"]} if pivot else {}
    for direction in ZERO_SHOT:
        for search, flags in searches.items():
            bench.evaluate(f"{name}/{direction}/{search}", name, *direction_flags(direction), *flags)


def evaluate(bench: Bench, run: str, *flags: str) -> dict[str, Any]:
    """Every trained direction's BLEU, chrF and off-target rate, and their means."""
    path = bench.work / "scores" / f"{run}-trained{''.join(flags)}.json"
    found = bench.test_scores(path, run, *flags)
    return {key: found[key] for key in SCORES} | {
        direction: {key: found["directions"][direction][key] for key in SCORES} for direction in TRAINED
    }


def table_rows(bench: Bench, trained: bool) -> list[tuple[str, list[str], str]]:
    """The tables' rows: their first cells, their runs (one per seed) and a search."""
    seeds, searches = bench.args.seeds, TRAINED_SEARCHES if trained else ZERO_SHOT_SEARCHES
    if not bench.args.parents:
        return [
            (f"{t} | {s}", [run_name(t, seed) for seed in seeds], s) for t in PLACEMENTS for s in searches
        ]
    arms = [(arm, [arm_name(arm, seed) for seed in seeds]) for arm in ARMS]
    if trained:
        return [(arm, runs, "") for arm, runs in arms]
    pivot = ("control | through English (`--pivot en`)", arms[0][1], "pivot")
    return [(f"{arm} | {search}", runs, search) for arm, runs in arms for search in searches] + [pivot]


def trained_table(bench: Bench) -> str:
    """Per row: each trained direction's BLEU and the means (BLEU, chrF, off-target), and a continued run's
    updates per second."""
    found, runs = bench.results.get("trained scores", {}), bench.results.get("trained", {})
    parents = bench.args.parents
    first, continued = (["continued"], ["updates/s"]) if parents else (["tags", "search"], [])
    rows = []
    for label, names, search in table_rows(bench, trained=True):
        keys = [f"{name}/{search}" if search else name for name in names]
        scored = [found[key] for key in keys if key in found]
        cells = [spread([r[d]["bleu"] for r in scored]) for d in TRAINED]
        cells += [spread([r[key] for r in scored]) for key in SCORES]
        cells += [spread([runs[name]["updates_per_s"] for name in names if name in runs])] * bool(parents)
        rows.append([label, *cells])
    return table([*first, *TRAINED, "mean BLEU", "mean chrF", "off-target %", *continued], rows, len(first))


def zero_shot_table(bench: Bench) -> str:
    """Per row: de→fr and fr→de BLEU, chrF and off-target rate."""
    found = bench.results.get("scores", {})
    first = "continued" if bench.args.parents else "tags"
    head = f"{first} | search | de→fr BLEU | chrF | off-target % | fr→de BLEU | chrF | off-target %"
    rows = []
    for label, names, search in table_rows(bench, trained=False):
        scored = {d: [found[k] for n in names if (k := f"{n}/{d}/{search}") in found] for d in ZERO_SHOT}
        rows.append([label, *(spread([r[key] for r in scored[d]]) for d in ZERO_SHOT for key in SCORES)])
    return table(head.split(" | "), rows, left=2)


def main() -> None:
    parse = parser(__doc__)
    parse.add_argument("--data", type=Path, required=True, help="Multi30k: train/val/test2016, en de fr cs")
    parse.add_argument("--work", type=Path, required=True, help="runs, hypotheses and results.json")
    parse.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parse.add_argument("--updates", type=int, required=True, help="updates of each run")
    parse.add_argument("--device", default="cpu", help="where the runs train")
    parse.add_argument("--parents", help="back-translation: each seed's run to continue, with {seed}")
    parse.add_argument("--share", type=float, default=0.5, help="share of each batch back-translated")
    parse.add_argument("--arms", nargs="+", choices=ARMS, default=list(ARMS), help="back-translation's arms")
    args = parse.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    bench = Bench(args)
    for seed in args.seeds:
        if args.parents:
            for arm in args.arms:
                train_arm(bench, arm, seed)
                score(bench, arm_name(arm, seed), {"": []}, pivot=arm == "control")
        else:
            for tags in PLACEMENTS:
                train_placement(bench, tags, seed)
                score(bench, run_name(tags, seed), TRAINED_SEARCHES)
    tables = [trained_table(bench), zero_shot_table(bench)]
    print("\n\n".join(reversed(tables) if args.parents else tables))


if __name__ == "__main__":
    main()
