"""One multilingual model against six bilingual ones on Multi30k, and zero-shot de↔fr: the tables of
docs/multilingual.md ("Measured", which gives the method).

    taskset -c 1 python -m benchmarks.multilingual_bench --data DIR --work WORK

DIR holds Multi30k's train/val/test2016 files in en, de, fr and cs. Runs and results.json stay in WORK: an
interrupted benchmark resumes where it stopped.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
from pathlib import Path
from typing import Any

from benchmarks.common import ROOT, Finished, Results, machine, nmt, parser, settings
from nmt.evaluate.off_target import off_target_rate
from nmt.run.directory import RunDir
from nmt.run.metrics import read_metrics

CONFIG = ROOT / "configs" / "multi30k-cpu-transformer.yaml"
TRAINED = ("en-de", "de-en", "en-fr", "fr-en", "en-cs", "cs-en")
ZERO_SHOT = ("de-fr", "fr-de")
LANGUAGES = ("cs", "de", "en", "fr")
MULTILINGUAL = f"data.multilingual.directions=[{', '.join(TRAINED)}]"
JOINT_VOCAB = "tokenizer.vocab_size=8000"  # the multilingual runs' joint vocabulary
VOCAB_SIZES = (4000, 8000)  # each bilingual direction keeps the size of better validation BLEU
SECONDS = {"bilingual": 150.0, "multilingual": 900.0, "continued": 300.0}  # each run's training time
FEW_PAIRS, SYNTHETIC_PAIRS = 1000, 2000  # the zero-shot remedies' real de–fr pairs; synthetic ones each way
SYSTEMS = ("bilingual", "multi-encoder", "multi-decoder")  # the columns of the one-vs-six table
BILINGUAL_EVAL = settings("train.eval_every=200", "train.eval_max_sentences=200")
MULTILINGUAL_EVAL = settings("train.eval_every=600", "train.eval_max_sentences=100")


class Bench(Results):
    """The work directory: its runs, and results.json (each step's result, written after it)."""

    def __init__(self, args: argparse.Namespace) -> None:
        super().__init__(args.work / "results.json")
        self.args, self.work = args, args.work
        self.env = os.environ | {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}

    def nmt(self, *args: str) -> Finished:
        """`nmt ARGS` in a process of its own, on one thread."""
        return nmt(*args, env=self.env)

    def train_run(self, name: str, *flags: str) -> tuple[list[dict[str, Any]], float]:
        """`nmt train` of WORK/runs/NAME with `flags`, no final report: its metrics and the CPU seconds of its
        whole process (data, training, validation)."""
        run = self.work / "runs" / name
        where = ["--data", str(self.args.data), "--out", str(run), "--overwrite"]
        finished = self.nmt("train", str(CONFIG), *where, *flags, *settings("train.final_report=false"))
        return read_metrics(RunDir(run)), finished.cpu_seconds

    def train(self, name: str, seconds: float, *flags: str) -> dict[str, Any]:
        """Train run `name` for `seconds` (once); its updates and best greedy validation BLEU."""

        def work() -> dict[str, Any]:
            records, cpu = self.train_run(name, "--device", "cpu", "--max-time", str(seconds), *flags)
            bleu = max(r["bleu"] for r in records if r["kind"] == "valid")
            steps = max((r["step"] for r in records if "step" in r), default=0)
            return {"updates": steps, "valid_bleu": bleu, "seconds": seconds, "cpu": round(cpu)}

        return self.step("trained", name, work)

    def evaluate(self, key: str, run: str, *flags: str) -> dict[str, Any]:
        """Test2016 scores of `run` (`nmt evaluate --json`, once) with the off-target rate."""

        def work() -> dict[str, Any]:
            found = self.test_scores(self.work / "scores" / f"{key}.json", run, *flags)
            if "off_target" not in found:  # a bilingual run: identified among the same four languages
                hypotheses = Path(found["hypotheses"]).read_text().splitlines()
                found["off_target"] = off_target_rate(hypotheses, key.split("/")[-1].split("-")[1], LANGUAGES)
            return {name: found[name] for name in ("bleu", "chrf", "off_target", "hypotheses")}

        return self.step("scores", key, work)

    def test_scores(self, path: Path, run: str, *flags: str) -> dict[str, Any]:
        """What `nmt evaluate --json` of `run` on the test split, on the CPU, writes into `path`."""
        path.parent.mkdir(parents=True, exist_ok=True)
        run_dir = self.work / "runs" / run
        self.nmt("evaluate", str(run_dir), "--split", "test", "--device", "cpu", "--json", str(path), *flags)
        return json.loads(path.read_text())


def direction_flags(direction: str) -> list[str]:
    src, tgt = direction.split("-")
    return ["--src-lang", src, "--tgt-lang", tgt]


def one_vs_six(bench: Bench) -> None:
    """Bilinguals at each vocabulary size, each direction's best one scored; the two multilingual runs
    (trained in an order that puts the first comparison first: bilinguals at the first size, encoder tags)."""
    first, *others = VOCAB_SIZES
    bilinguals(bench, first, TRAINED)
    multilingual(bench, "encoder")
    for vocab in others:
        bilinguals(bench, vocab, TRAINED)
    multilingual(bench, "decoder")
    for direction in TRAINED:
        bench.evaluate(f"bilingual/{direction}", best_bilingual(bench, direction))
        for tags in ("encoder", "decoder"):
            bench.evaluate(f"multi-{tags}/{direction}", f"multi-{tags}", *direction_flags(direction))


def bilinguals(bench: Bench, vocab: int, directions: tuple[str, ...]) -> None:
    for direction in directions:
        flags = [*direction_flags(direction), *settings(f"tokenizer.vocab_size={vocab}"), *BILINGUAL_EVAL]
        bench.train(f"bi-{direction}-v{vocab}", SECONDS["bilingual"], *flags)


def multilingual(bench: Bench, tags: str) -> None:
    flags = settings(MULTILINGUAL, f"data.multilingual.tags={tags}", JOINT_VOCAB)
    bench.train(f"multi-{tags}", SECONDS["multilingual"], *flags, *MULTILINGUAL_EVAL)


def best_bilingual(bench: Bench, direction: str) -> str:
    """The run of `direction` with the best greedy validation BLEU among the vocabulary sizes tried."""
    trained = bench.results["trained"]
    runs = [f"bi-{direction}-v{vocab}" for vocab in VOCAB_SIZES]
    return max(runs, key=lambda run: trained[run]["valid_bleu"])


def zero_shot(bench: Bench) -> None:
    """de↔fr: zero-shot and pivoted through English by both multilingual runs; bilinguals on de–fr pairs."""
    for vocab in VOCAB_SIZES:
        bilinguals(bench, vocab, ZERO_SHOT)
    for direction in ZERO_SHOT:
        bench.evaluate(f"bilingual/{direction}", best_bilingual(bench, direction))
        for tags in ("encoder", "decoder"):
            flags = direction_flags(direction)
            bench.evaluate(f"multi-{tags}-zero-shot/{direction}", f"multi-{tags}", *flags, "--zero-shot")
            bench.evaluate(f"multi-{tags}-pivot/{direction}", f"multi-{tags}", *flags, "--pivot", "en")


def remedies(bench: Bench) -> None:
    """The encoder-tag run continued: alone (the control), with a few real de–fr pairs, with synthetic
    ones."""
    common = ["--init-from", str(bench.work / "runs" / "multi-encoder"), *MULTILINGUAL_EVAL]
    common += settings("data.multilingual.tags=encoder", JOINT_VOCAB)
    bench.train("continued", SECONDS["continued"], *settings(MULTILINGUAL), *common)
    both = f"data.multilingual.directions=[{', '.join((*TRAINED, *ZERO_SHOT))}]"
    few = settings(both, f"data.train={write_few_pairs(bench)}")
    bench.train("few-pairs", SECONDS["continued"], *few, *common)
    synthetic = settings(both, f"data.train={write_synthetic_pairs(bench)}")
    bench.train("synthetic-pairs", SECONDS["continued"], *synthetic, *common)
    for run in ("continued", "few-pairs", "synthetic-pairs"):
        for direction in ZERO_SHOT:
            flags = [*direction_flags(direction), *(["--zero-shot"] if run == "continued" else [])]
            bench.evaluate(f"{run}/{direction}", run, *flags)
        for direction in TRAINED:
            bench.evaluate(f"{run}/{direction}", run, *direction_flags(direction))


def training_lines(data: Path) -> dict[str, list[str]]:
    return {lang: (data / f"train.{lang}").read_text(encoding="utf-8").splitlines() for lang in LANGUAGES}


def write_jsonl(path: Path, records: list[dict[str, str]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def english_centric(lines: dict[str, list[str]], i: int) -> list[dict[str, str]]:
    """Line i as English-centric records only: no record holds both German and French."""
    return [
        {lang: lines[lang][i] for lang in ("en", "de", "cs")},
        {"en": lines["en"][i], "fr": lines["fr"][i]},
    ]


def write_few_pairs(bench: Bench) -> Path:
    """Training lines English-centric, the first FEW_PAIRS in all four languages (de–fr pairs among them)."""
    lines = training_lines(bench.args.data)
    records = [{lang: lines[lang][i] for lang in LANGUAGES} for i in range(FEW_PAIRS)]
    records += [r for i in range(FEW_PAIRS, len(lines["en"])) for r in english_centric(lines, i)]
    return write_jsonl(bench.work / "data" / "few-pairs.jsonl", records)


def write_synthetic_pairs(bench: Bench) -> Path:
    """Every training line English-centric, and synthetic de–fr pairs: French sentences of lines the few-pairs
    run does not see as pairs, with German sampled through English by the encoder-tag model, and German ones
    (of other lines) with sampled French."""
    lines = training_lines(bench.args.data)
    rows = list(range(FEW_PAIRS, len(lines["en"])))
    random.Random(1).shuffle(rows)
    french, german = sorted(rows[:SYNTHETIC_PAIRS]), sorted(rows[SYNTHETIC_PAIRS : 2 * SYNTHETIC_PAIRS])
    to_german = sampled(bench, "fr", "de", [lines["fr"][i] for i in french])
    to_french = sampled(bench, "de", "fr", [lines["de"][i] for i in german])
    records = [r for i in range(len(lines["en"])) for r in english_centric(lines, i)]
    records += [{"fr": lines["fr"][i], "de": text} for i, text in zip(french, to_german, strict=True)]
    records += [{"de": lines["de"][i], "fr": text} for i, text in zip(german, to_french, strict=True)]
    return write_jsonl(bench.work / "data" / "synthetic-pairs.jsonl", records)


def sampled(bench: Bench, src: str, tgt: str, sentences: list[str]) -> list[str]:
    """Translations of `sentences` from `src` into `tgt` by the encoder-tag model, each of its two steps
    through English sampled (`nmt translate --pivot en --sampling`); made once, kept in WORK/data."""
    out = bench.work / "data" / f"sampled.{src}-{tgt}"

    def work() -> int:
        source = bench.work / "data" / f"source.{src}-{tgt}"
        source.write_text("".join(line + "\n" for line in sentences), encoding="utf-8")
        run = str(bench.work / "runs" / "multi-encoder")
        direction = ["--src-lang", src, "--tgt-lang", tgt, "--pivot", "en", "--sampling", "--seed", "1"]
        bench.nmt("translate", run, *direction, "--input", str(source), "--output", str(out))
        return len(sentences)

    bench.step("synthetic", f"{src}-{tgt}", work)
    return out.read_text(encoding="utf-8").splitlines()


def cell(scores: dict[str, Any] | None) -> str:
    """BLEU | chrF | off-target %, or dashes for what was not measured."""
    if scores is None:
        return "— | — | —"
    rate = "—" if scores["off_target"] is None else f"{scores['off_target']:.1f}"
    return f"{scores['bleu']:.2f} | {scores['chrf']:.2f} | {rate}"


def mean_cell(found: list[dict[str, Any] | None]) -> str:
    """The means of `cell`'s figures, or dashes where one is missing."""
    present = [f for f in found if f is not None]
    if not found or len(present) < len(found):
        return cell(None)
    rates = [f["off_target"] for f in present]
    means = {key: statistics.mean(f[key] for f in present) for key in ("bleu", "chrf")}
    return cell(means | {"off_target": None if None in rates else statistics.mean(rates)})


def one_vs_six_table(bench: Bench) -> str:
    """The trained directions: each bilingual (its vocabulary sizes' validation BLEU) beside both
    multilingual runs."""
    scores, trained = bench.results.get("scores", {}), bench.results.get("trained", {})
    head = (
        "| direction | bilingual: greedy valid BLEU by vocabulary | bilingual BLEU | chrF | off-target % | "
        "multilingual, encoder tags: BLEU | chrF | off-target % | decoder tags: BLEU | chrF | off-target % |"
    )
    lines = [head, "|---|---|" + "---:|" * 9]
    columns = {name: [scores.get(f"{name}/{d}") for d in TRAINED] for name in SYSTEMS}
    for i, direction in enumerate(TRAINED):
        tried = ", ".join(
            f"{size // 1000}k {trained[f'bi-{direction}-v{size}']['valid_bleu']:.2f}"
            for size in VOCAB_SIZES
            if f"bi-{direction}-v{size}" in trained
        )
        row = " | ".join(cell(found[i]) for found in columns.values())
        lines.append(f"| {direction} | {tried} | {row} |")
    lines.append(f"| **mean** | | {' | '.join(mean_cell(values) for values in columns.values())} |")
    done = all(f"bi-{d}-v{size}" in trained for d in TRAINED for size in VOCAB_SIZES)
    for key, label in (("updates", "updates"), ("cpu", "CPU seconds (the `nmt train` processes)")):
        bilingual = sum(trained[best_bilingual(bench, d)][key] for d in TRAINED) if done else 0
        runs = [trained.get(f"multi-{tags}", {}).get(key, 0) for tags in ("encoder", "decoder")]
        lines.append(f"| {label} | | {bilingual:,} | | | {runs[0]:,} | | | {runs[1]:,} | | |")
    return "\n".join(lines)


ZERO_SHOT_ROWS = (
    ("multi-encoder-zero-shot", "zero-shot, encoder tags"),
    ("multi-decoder-zero-shot", "zero-shot, decoder tags (the target tag forced as the first output token)"),
    ("multi-encoder-pivot", "`--pivot en`, encoder tags"),
    ("multi-decoder-pivot", "`--pivot en`, decoder tags"),
    ("bilingual", "bilingual, trained on the de–fr pairs"),
    ("continued", "encoder tags continued, English-centric data only (zero-shot)"),
    ("few-pairs", f"encoder tags continued, with {FEW_PAIRS:,} real de–fr pairs"),
    ("synthetic-pairs", f"encoder tags continued, with 2 × {SYNTHETIC_PAIRS:,} synthetic de–fr pairs"),
)


def zero_shot_table(bench: Bench) -> str:
    """de→fr and fr→de by every system, and the mean over the six trained directions where a run has them."""
    scores = bench.results.get("scores", {})
    head = (
        "| system | de→fr BLEU | chrF | off-target % | fr→de BLEU | chrF | off-target % | six trained: BLEU |"
    )
    lines = [head, "|---|" + "---:|" * 7]
    for key, label in ZERO_SHOT_ROWS:
        run = key.removesuffix("-zero-shot")  # a pivot's and a bilingual's trained directions: not shown
        trained = [scores.get(f"{run}/{d}") for d in TRAINED] if run != "bilingual" else [None]
        mean = f"{statistics.mean(t['bleu'] for t in trained if t):.2f}" if all(trained) else "—"
        found = " | ".join(cell(scores.get(f"{key}/{d}")) for d in ZERO_SHOT)
        lines.append(f"| {label} | {found} | {mean} |")
    return "\n".join(lines)


def main() -> None:
    parse = parser(__doc__)
    parse.add_argument("--data", type=Path, required=True, help="Multi30k: train/val/test2016 in en de fr cs")
    parse.add_argument("--work", type=Path, required=True, help="runs, hypotheses and results.json")
    args = parse.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    bench = Bench(args)
    bench.results["machine"] = machine()
    one_vs_six(bench)
    zero_shot(bench)
    remedies(bench)
    print(f"{one_vs_six_table(bench)}\n\n{zero_shot_table(bench)}")


if __name__ == "__main__":
    main()
