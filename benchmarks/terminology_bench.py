"""Glossary terms: how often each mechanism writes a glossary's target terms, at what BLEU, chrF and speed
(docs/terminology.md gives the method): plain beam search, constrained search and, with --annotated-run,
annotation on torch and on the run's CTranslate2 export, with entries chosen on the validation split.

    OMP_NUM_THREADS=1 python -m benchmarks.terminology_bench --run RUN --data DIR [--annotated-run RUN]
"""

from __future__ import annotations

import re
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import sacrebleu
import torch

from benchmarks.common import machine, nmt, parser, table
from nmt.data.glossary import Term, TermFinder
from nmt.decode.languages import Translates
from nmt.decode.loading import load_translator
from nmt.decode.terminology import glossary_translator

Pair = tuple[str, str]
Split = tuple[list[str], list[str]]  # sources, references


def words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def counts(src: list[str], tgt: list[str]) -> tuple[Counter[Pair], Counter[str], Counter[str]]:
    """The sentence pairs holding each (source word, target word) pair, each source word, each target word."""
    pairs, src_count, tgt_count = Counter[Pair](), Counter[str](), Counter[str]()
    for s, t in zip(src, tgt, strict=True):
        sw, tw = set(words(s)), set(words(t))
        src_count.update(sw)
        tgt_count.update(tw)
        pairs.update((a, b) for a in sw for b in tw)
    return pairs, src_count, tgt_count


def entries(val: Split, plain: list[str], dice: dict[Pair, float], args: Any) -> list[Term]:
    """The glossary: reference words the plain output misses in --misses sentences, each with its source word
    of highest Dice coefficient (at least --dice), kept where --agree of that word's references hold it."""
    missed, (together, alone, _) = Counter[Pair](), counts(*val)
    for s, ref, out in zip(*val, plain, strict=True):
        written, sources = set(words(out)), set(words(s))
        for target in set(words(ref)) - written:
            best, source = max([(dice.get((a, target), 0.0), a) for a in sources], default=(0.0, ""))
            if best >= args.dice and len(target) > 2:
                missed[source, target] += 1
    often = [p for p, n in missed.most_common() if n >= args.misses]
    kept = [p for p in often if together[p] >= args.agree * alone[p[0]]]
    return [Term(source, target) for source, target in dict(reversed(kept)).items()]  # most missed wins


def row(name: str, translator: Translates, found: list[list[Term]], glossed: Split, test: Split) -> list:
    """A mechanism's row: term use, BLEU and chrF on the glossary sentences and the test split, speed."""
    translator.translate(glossed[0][:20])  # warm-up
    start = time.perf_counter()
    out = translator.translate(glossed[0])
    speed = len(out) / (time.perf_counter() - start)
    wanted = [(term.target, set(words(o))) for terms, o in zip(found, out, strict=True) for term in terms]
    use = 100 * sum(target in written for target, written in wanted) / max(1, len(wanted))
    pairs = ((out, glossed[1]), (translator.translate(test[0]), test[1]))
    scores = [f(o, [r]).score for o, r in pairs for f in (sacrebleu.corpus_bleu, sacrebleu.corpus_chrf)]
    return [name, f"{use:.1f}%", *(f"{s:.2f}" for s in scores), speed]


def annotated(run: Path, glossary: Path, beam: int) -> list[tuple[str, Translates]]:
    """Annotation with `glossary` on the torch engine and on the run's CTranslate2 export (beside it)."""
    cpu, export = torch.device("cpu"), glossary.with_name("export")
    nmt("export", run, export)
    found = []
    for name, path, engine in (("torch", run, "torch"), ("CTranslate2", export, "ctranslate2")):
        translator = load_translator([path], engine, cpu, None, {"beam_size": beam})
        found.append((f"annotated ({name})", glossary_translator(translator, path, glossary, "annotated")))
    return found


def main() -> None:
    parse = parser(__doc__)
    parse.add_argument("--run", type=Path, required=True, help="a run trained without annotation")
    parse.add_argument("--data", type=Path, required=True, help="Multi30k: train, val, test2016 .de/.en")
    parse.add_argument("--annotated-run", type=Path, help="a run trained with data.terminology")
    parse.add_argument("--dice", type=float, default=0.3, help="least Dice coefficient of an entry's pair")
    parse.add_argument("--misses", type=int, default=2, help="validation sentences an entry is missed in")
    parse.add_argument("--agree", type=float, default=0.5, help="least share of its source's references")
    parse.add_argument("--beam", type=int, default=5, help="hypotheses per sentence")
    args = parse.parse_args()

    def read(split: str) -> Split:
        return tuple((args.data / f"{split}.{lang}").read_text("utf-8").splitlines() for lang in ("de", "en"))

    plain = load_translator([args.run], "torch", torch.device("cpu"), None, {"beam_size": args.beam})
    val = read("val")
    pairs, src_count, tgt_count = counts(*read("train"))
    dice = {(a, b): 2 * n / (src_count[a] + tgt_count[b]) for (a, b), n in pairs.items() if n > 1}
    glossary = entries(val, plain.translate(val[0]), dice, args)
    finder, test = TermFinder(glossary, plain.tokenizers.src.normalize), read("test2016")
    chosen = [i for i, s in enumerate(test[0]) if 1 <= len(finder.find(s)) <= 3]
    glossed = [test[0][i] for i in chosen], [test[1][i] for i in chosen]
    found = [[match.term for match in finder.find(s)] for s in glossed[0]]
    print(f"{len(glossary)} entries from {len(val[0])} validation sentences; {len(chosen)} of {len(test[0])}")
    print(f"test2016 sentences hold 1 to 3 source terms. {machine('sacrebleu', 'torch')}\n")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "glossary.tsv"
        path.write_text("".join(f"{t.source}\t{t.target}\n" for t in glossary), encoding="utf-8")
        mechanisms = [
            (f"plain beam {args.beam}", plain),
            ("constrained (torch)", glossary_translator(plain, args.run, path, "constrained")),
            *(annotated(args.annotated_run, path, args.beam) if args.annotated_run else []),
        ]
        rows = [row(name, translator, found, glossed, test) for name, translator in mechanisms]
    for each in reversed(rows):  # the plain row last: its speed is the others' unit
        each[-1] = f"{each[-1]:.1f} ({each[-1] / rows[0][-1]:.2f}×)"
    head = ["mechanism", "term use", "BLEU (glossary)", "chrF (glossary)", "BLEU (test2016)"]
    print(table([*head, "chrF (test2016)", f"sentences/s (× plain beam {args.beam})"], rows))


if __name__ == "__main__":
    main()
