"""A run directory: its paths and lock (directory.py), its metrics.jsonl, what its checkpoints hold
(checkpoint.py, written and read there; checkpoint_io.py the files themselves) and checkpoint averaging."""
