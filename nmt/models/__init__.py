"""The models: one contract (base.py) and one attention interface (attention.py) that every family fulfils,
the Transformer and the RNN families with their own settings, ensembles, and building one from a config."""
