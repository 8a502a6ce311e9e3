"""`nmt benchmark`: training and decoding speed, memory and time to a BLEU score (benchmark.py), and where an
update's time goes (profiling.py)."""
