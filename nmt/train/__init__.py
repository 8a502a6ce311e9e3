"""`nmt train` (command.py): the loop (loop.py), one update (step.py, with its CUDA graphs in step_graphs.py
and its loss in loss.py), the data as a stream of updates, validation, what a run shows, the token budget,
torchrun, fine-tuning."""
