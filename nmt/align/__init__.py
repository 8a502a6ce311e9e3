"""Word alignments: Pharaoh files (and the checks that refuse one that looks misread), the alignment error
rate, symmetrization, attention → word links, subword ↔ word maps, the training labels of guided alignment,
and eflomal run as an outside program."""
