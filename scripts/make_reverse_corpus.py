"""Write a synthetic word-reordering corpus: python scripts/make_reverse_corpus.py OUT_DIR [--seed N]."""

import argparse
from pathlib import Path

from nmt.data.synthetic import write_reordering_corpus

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("out", type=Path)
parser.add_argument("--seed", type=int, default=1)
parser.add_argument("--train", type=int, default=6000)
parser.add_argument("--vocab", type=int, default=300)
parser.add_argument("--src-lang", default="src")
parser.add_argument("--tgt-lang", default="tgt")
args = parser.parse_args()
write_reordering_corpus(
    args.out,
    train=args.train,
    vocab=args.vocab,
    seed=args.seed,
    src_lang=args.src_lang,
    tgt_lang=args.tgt_lang,
)
print(f"wrote {args.out}")
