"""The device a run uses: choosing it and its numeric settings (choice.py), and capturing a step once to
replay it (capture.py: CUDA graphs on a GPU, an eager recorder that stands in for them on a CPU)."""
