"""benchmarks/gpu_profile.py's count of decoding steps, which it divides each search's time by."""

from pathlib import Path

import torch

from benchmarks import gpu_profile as profile
from nmt.bench.profiling import counting_steps
from nmt.decode.trained_run import load_run
from nmt.decode.translator import TorchTranslator
from nmt.device.capture import Recorder, emulating


def test_decoding_steps_are_counted_eagerly_where_steps_are_captured(trained_run: Path, corpus: Path) -> None:
    """With CUDA graphs on, a replayed step runs no Python: the steps are counted with graphs off, as many
    as the search with graphs takes (on the recorder, whose capture runs a step, a count with graphs on would
    count the captures too)."""
    run = load_run(trained_run, torch.device("cpu"))
    translator = TorchTranslator.of_run(run).with_search(cuda_graphs=True, beam_size=1, batch_tokens=100_000)
    sources = translator.encode((corpus / "test.src").read_text().splitlines()[:40])
    recorder = Recorder()
    with emulating(recorder):
        steps = profile.decoding_steps(translator, sources)
        eager = translator.with_search(cuda_graphs=False)
        expected = counting_steps(run.model, lambda: eager.search(sources))()
    assert steps == expected > 0 and recorder.captures == 0
