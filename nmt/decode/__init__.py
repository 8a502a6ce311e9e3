"""Using a trained model: loading a run (trained_run.py), greedy and beam search (search.py, with the
decoding step's CUDA graphs in step_graphs.py), and translating text (translate.py). Nothing here loads
training code."""
