"""Word alignments: Pharaoh files, the alignment error rate, symmetrization, attention → word links, subword ↔
word maps, the training labels of guided alignment, and eflomal run as an outside program."""
