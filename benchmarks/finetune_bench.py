"""What fine-tuning a published model gains and forgets, measured offline with a stand-in (docs/import.md
gives the method): a Marian-layout en→fr model trained on --general, exported to Hugging Face's format and
imported, then fine-tuned on --domain's `English ||| French` lines beside one trained there from scratch.

    nice python -m benchmarks.finetune_bench --general DIR/multi30k \\
        --domain DIR/alignment/gold/enfr.src-tgt --work /tmp/finetune [-- --set model.transformer.d_model=64]

Arguments after `--` go to every `nmt train`; WORK/results.json keeps each step (a rerun resumes).
"""

from __future__ import annotations

import sys
from pathlib import Path

from benchmarks.common import ROOT, Results, machine, nmt, parser, settings, split_at_dashes, table
from nmt.evaluate.scores import headline

RECIPE = ROOT / "configs" / "multi30k-cpu-transformer.yaml"
STAND_IN = settings(  # the CPU recipe, en→fr, in the layout a MarianMT model has
    "data.src_lang=en",
    "data.tgt_lang=fr",
    "model.transformer.norm=post",
    "model.transformer.activation=swish",
    "model.transformer.decoder_start=pad",
    "train.lr=1.5e-3",
    "train.warmup_steps=400",
    "train.max_time=0.0",
    "train.eval_every=350",
)
FINE_TUNE = settings(  # a low constant learning rate after a short warm-up
    "train.lr=1.0e-4",
    "train.batch_tokens=3000",
    "train.pad_to_multiple=1",
    "train.schedule=constant",
    "train.warmup_steps=30",
    "train.max_time=0.0",
    "train.eval_every=50",
    "train.eval_max_sentences=0",
)
SCRATCH = settings("train.max_time=0.0", "train.eval_every=50", "train.eval_max_sentences=0")
SPLITS = {"train": (0, 247), "valid": (247, 297), "test": (297, 447)}  # line ranges of --domain


def split_domain(pairs: Path, out: Path) -> Path:
    """--domain's `English ||| French` lines as train/valid/test.en and .fr in `out` (SPLITS)."""
    lines = [line.split(" ||| ") for line in pairs.read_text(encoding="utf-8").splitlines()]
    out.mkdir(parents=True, exist_ok=True)
    for split, (start, end) in SPLITS.items():
        for side, lang in enumerate(("en", "fr")):
            text = "".join(pair[side].strip() + "\n" for pair in lines[start:end])
            (out / f"{split}.{lang}").write_text(text, encoding="utf-8")
    return out


def test_file(data: Path, lang: str) -> Path:
    return next(
        data / f"{name}.{lang}" for name in ("test", "test2016") if (data / f"{name}.{lang}").exists()
    )


def scores(run: Path, data: Path, work: Path) -> dict[str, float]:
    """BLEU and chrF of `run`'s translations of `data`'s test split (en→fr)."""
    out = work / f"{run.name}.{data.name}.fr"
    nmt("translate", run, "--input", test_file(data, "en"), "--output", out)
    texts = [path.read_text(encoding="utf-8").splitlines() for path in (out, test_file(data, "fr"))]
    found = headline(*texts)  # sacreBLEU's BLEU and chrF of the translations and the references
    return {"bleu": found.bleu, "chrf": found.chrf}


def main(argv: list[str]) -> None:
    own, passed = split_at_dashes(argv)
    args = parser(__doc__)
    args.add_argument("--general", type=Path, required=True, help="train/val/test2016.en|fr (Multi30k)")
    args.add_argument("--domain", type=Path, required=True, help="`English ||| French` lines (447)")
    args.add_argument("--work", type=Path, required=True, help="runs, translations and results.json")
    args.add_argument("--steps", type=int, default=700, help="the stand-in's updates")
    args.add_argument("--finetune-steps", type=int, default=200, help="updates on the domain")
    opts = args.parse_args(own)
    work = opts.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    results = Results(work / "results.json")
    domain = split_domain(opts.domain, work / "domain")
    general = opts.general.resolve()
    stand_in, hf, imported = work / "stand-in", work / "stand-in-hf", work / "imported"
    tuned, scratch = work / "fine-tuned", work / "scratch"
    steps = settings(f"train.max_steps={opts.finetune_steps}")
    standing = [*STAND_IN, *settings(f"train.max_steps={opts.steps}"), *passed]
    from_scratch = [*STAND_IN, *SCRATCH, *steps, *passed]
    tuning = ["--init-from", imported, "--out", tuned, *FINE_TUNE, *steps, *passed]
    commands = {
        "stand-in": ("train", RECIPE, "--data", general, "--out", stand_in, *standing),
        "export": ("export", stand_in, hf, "--to", "huggingface"),
        "import": ("import", hf, "--out", imported),
        "fine-tuned": ("train", imported / "config.yaml", "--data", domain, *tuning),
        "scratch": ("train", RECIPE, "--data", domain, "--out", scratch, *from_scratch),
    }
    for name, args in commands.items():
        results.step("seconds", name, lambda args=args: nmt(*args).seconds)
    rows = []
    for label, run in (("stand-in, imported", imported), ("fine-tuned", tuned), ("from scratch", scratch)):
        got = [
            results.step("scores", f"{run.name} {data.name}", lambda r=run, d=data: scores(r, d, work))
            for data in (general, domain)
        ]
        rows.append([label, *(f"{g[metric]:.1f}" for g in got for metric in ("bleu", "chrf"))])
    head = ["model", "general BLEU", "general chrF", "domain BLEU", "domain chrF"]
    print(table(head, rows))
    minutes = ", ".join(f"{name} {s / 60:.1f}" for name, s in results.results["seconds"].items())
    print(f"\nminutes: {minutes}\nupdates: stand-in {opts.steps}, domain {opts.finetune_steps} each")
    print(f"machine: {machine('torch', 'sacrebleu', 'transformers')}")


if __name__ == "__main__":
    main(sys.argv[1:])
