"""`nmt translate` against its CTranslate2 export (float32 and int8) on CPU, as one Markdown table.

    python scripts/export_bench.py --work /tmp/nmt-export-bench --threads 2

Without --run it writes a Multi30k-sized synthetic reordering corpus (29,000 / 1,014 / 1,000 pairs, 300-word
lexicon, 3-10 words a sentence) and trains configs/tiny-transformer.yaml on it for --steps updates on the CPU.
It then exports the run (float32 and int8) and translates the first --sentences test sentences in one batch
with each engine, greedy and with the config's beam, after an untimed warm-up on 20 sentences, each engine on
--threads threads. BLEU is sacreBLEU's against the test references; "same as nmt" counts the sentences whose
translation equals nmt's with the same beam size.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import torch

from nmt.config.schema import replace as config_replace
from nmt.config.yaml_file import load_saved_config
from nmt.data.synthetic import write_reordering_corpus
from nmt.decode.trained_run import load_run
from nmt.decode.translate import translate
from nmt.evaluate.scores import score
from nmt.export.ctranslate2 import export_run
from nmt.export.runtime import load_export
from nmt.run.directory import RunDir

ROOT = Path(__file__).resolve().parents[1]

Translate = Callable[[list[str], int], list[str]]


def train_run(work: Path, steps: int) -> Path:
    """The tiny Transformer trained on a fresh Multi30k-sized synthetic corpus in `work`."""
    data = write_reordering_corpus(work / "data", train=29_000, valid=1_014, test=1_000, vocab=300)
    run_dir = work / "run"
    command = [sys.executable, "-m", "nmt", "-q", "train", str(ROOT / "configs" / "tiny-transformer.yaml")]
    command += ["--data", str(data), "--out", str(run_dir), "--device", "cpu", "--max-steps", str(steps)]
    subprocess.run([*command, "--max-time", "0", "--overwrite"], check=True)
    return run_dir


def engines(run_dir: Path, work: Path, threads: int) -> dict[str, Translate]:
    """`nmt translate` and the float32 and int8 exports of the run's chosen checkpoint, by name."""
    torch.set_num_threads(threads)
    run = load_run(run_dir, torch.device("cpu"))

    def ours(sentences: list[str], beam: int) -> list[str]:
        search = {"beam_size": beam, "nbest": 1, "batch_size": len(sentences)}
        return translate(replace(run, cfg=config_replace(run.cfg, search=search)), sentences)

    found: dict[str, Translate] = {"nmt translate (PyTorch)": ours}
    for quantization in ("float32", "int8"):
        out = work / f"ct2-{quantization}"
        if not out.exists():
            export_run(run_dir, out, quantization=quantization, which=run.checkpoint_name)
        exported = load_export(out, "cpu", threads)
        found[f"CTranslate2 {quantization}"] = lambda s, k, e=exported: e.translate(s, k, len(s))
    return found


def measure(engine: Translate, sources: list[str], beam: int) -> tuple[list[str], float]:
    """Translations of `sources` in one batch and sentences per second (after a warm-up on 20 of them)."""
    engine(sources[:20], beam)
    start = time.perf_counter()
    translations = engine(sources, beam)
    return translations, len(sources) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--work", type=Path, required=True, help="Directory for the corpus, run and exports.")
    parser.add_argument("--run", type=Path, help="A trained Transformer run (default: train one in --work).")
    parser.add_argument("--data", type=Path, help="Corpus with test.src/test.tgt (default: --work/data).")
    parser.add_argument("--steps", type=int, default=1000, help="Training updates when training.")
    parser.add_argument("--sentences", type=int, default=1000, help="Test sentences translated.")
    parser.add_argument("--threads", type=int, default=2, help="CPU threads of each engine.")
    args = parser.parse_args()
    run_dir = args.run or train_run(args.work, args.steps)
    data = args.data or args.work / "data"
    sources = (data / "test.src").read_text(encoding="utf-8").splitlines()[: args.sentences]
    references = (data / "test.tgt").read_text(encoding="utf-8").splitlines()[: args.sentences]
    beam = load_saved_config(RunDir(run_dir).config).search.beam_size
    found = engines(run_dir, args.work, args.threads)
    print("| engine | beam | BLEU | sent/s | same as nmt |\n|---|---:|---:|---:|---:|")
    for k in (1, beam):
        ours = None
        for name, engine in found.items():
            translations, speed = measure(engine, sources, k)
            ours = ours or translations
            same = sum(a == b for a, b in zip(ours, translations, strict=True))
            bleu = score(translations, references).bleu
            print(f"| {name} | {k} | {bleu:.2f} | {speed:,.0f} | {same}/{len(sources)} |", flush=True)


if __name__ == "__main__":
    main()
