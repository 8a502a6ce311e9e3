"""The ids of the special tokens, fixed when sentencepiece is trained (nmt/data/tokenizer.py) and read back
from every tokenizer: padding, unknown, beginning and end of sentence."""

PAD, UNK, BOS, EOS = 0, 1, 2, 3
