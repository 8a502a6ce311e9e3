"""Search rules and processors (contract.py), each in a file of its own, listed in registry.py: the parts of a
search that nmt/decode/search.py's loop runs."""
