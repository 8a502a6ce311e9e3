"""How distinct are n-best lists? Beam search's beside diverse beam search's at several strengths, a row
per search (docs/guide.md); choose the strength on a validation split, report on a test split.

    OMP_NUM_THREADS=1 python -m benchmarks.diverse_beam --run RUN_DIR --src val.de --ref val.en \
        --strengths 0.5 1 2 3 5 10
"""

from __future__ import annotations

import statistics
from pathlib import Path

import sacrebleu
import torch

from benchmarks.common import machine, parser, table
from nmt.decode.loading import load_translator
from nmt.decode.translator import Translator


def lists(translator: Translator, sources: list[str], nbest: int) -> list[list[str]]:
    """Each source's n-best list of texts (an empty text where fewer were found)."""
    found = translator.translated(sources)
    return [[h.text for h in line.hypotheses] + [""] * (nbest - len(line.hypotheses)) for line in found]


def self_bleu(found: list[list[str]]) -> float:
    """Hypothesis i of each list against the other hypotheses of its list, averaged over i."""
    n = len(found[0])
    scores = []
    for i in range(n):
        others = [[hyps[j] for hyps in found] for j in range(n) if j != i]
        scores.append(sacrebleu.corpus_bleu([hyps[i] for hyps in found], others).score)
    return statistics.mean(scores)


def row(name: str, found: list[list[str]], refs: list[str]) -> list[str]:
    """The table's row of one search's lists."""
    n = len(found[0])
    distinct = statistics.mean(len(set(hyps)) for hyps in found)
    every = 100 * sum(len(set(hyps)) == n for hyps in found) / len(found)
    places = [sacrebleu.corpus_bleu([hyps[i] for hyps in found], [refs]).score for i in range(n)]
    oracle = [
        max(hyps, key=lambda hyp, ref=ref: sacrebleu.sentence_bleu(hyp, [ref]).score)  # type: ignore[misc]
        for hyps, ref in zip(found, refs, strict=True)
    ]
    best_of = sacrebleu.corpus_bleu(oracle, [refs]).score
    bleu = [f"{places[0]:.2f}", f"{statistics.mean(places):.2f}", f"{best_of:.2f}"]
    return [name, f"{distinct:.2f}", f"{every:.1f}%", f"{self_bleu(found):.1f}", *bleu]


def main() -> None:
    parse = parser(__doc__)
    parse.add_argument("--run", type=Path, required=True, help="a trained run directory")
    parse.add_argument("--src", type=Path, required=True, help="source sentences, one a line")
    parse.add_argument("--ref", type=Path, required=True, help="their reference translations")
    parse.add_argument("--beam", type=int, default=3, help="hypotheses per sentence")
    parse.add_argument("--groups", type=int, default=3, help="diverse beam search's groups")
    parse.add_argument("--nbest", type=int, default=3, help="hypotheses in each list")
    parse.add_argument("--strengths", type=float, nargs="+", default=[0.5, 1.0, 2.0, 3.0, 5.0, 10.0])
    args = parse.parse_args()
    sources = args.src.read_text(encoding="utf-8").splitlines()
    refs = args.ref.read_text(encoding="utf-8").splitlines()
    search = {"beam_size": args.beam, "nbest": args.nbest}
    translator = load_translator([args.run], "torch", torch.device("cpu"), None, search)
    print(f"{len(sources)} sentences of {args.src.name}, {args.nbest}-best lists; {machine('torch')}\n")
    rows = [row(f"beam {args.beam}", lists(translator, sources, args.nbest), refs)]
    for strength in args.strengths:
        diverse = translator.with_search(diverse_groups=args.groups, diversity_strength=strength)
        name = f"diverse {args.groups}×{args.beam // args.groups}, strength {strength:g}"
        rows.append(row(name, lists(diverse, sources, args.nbest), refs))
    head = "search | distinct | all distinct | self-BLEU | BLEU of the first | mean BLEU | oracle BLEU"
    print(table(head.split(" | "), rows))


if __name__ == "__main__":
    main()
