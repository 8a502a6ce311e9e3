"""Using a trained model: loading runs and exports (loading.py, over trained_run.py and exported.py), greedy
and beam search (search.py, with the decoding step's CUDA graphs in step_graphs.py), and translating text
(translator.py, for a run or an ensemble; exported.py for a CTranslate2 export). Nothing here loads training
code."""
