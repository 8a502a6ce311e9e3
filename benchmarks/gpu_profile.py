"""Where a training update's and a decoding step's GPU time goes: the top CUDA kernels, launches and syncs.

    python -m benchmarks.gpu_profile configs/multi30k-transformer.yaml --data DIR --train-seconds 60

Trains the config for `--train-seconds`, then profiles `--updates` training updates, and greedy and beam-5
search of 1,000 test sentences in one batch, eager and with CUDA graphs.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

from benchmarks.common import parser
from nmt.bench.benchmark import measure_time_to_bleu, synchronize, timed
from nmt.bench.profiling import CUDA_GRAPH_LAUNCHES, CUDA_LAUNCHES, CUDA_SYNCS, counting_steps
from nmt.config.yaml_file import load_config
from nmt.data.prepare import prepare_data
from nmt.data.splits import read_directions
from nmt.decode.translator import TorchTranslator
from nmt.limits import MAX_SIZE
from nmt.run.directory import RunDir

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
SENTENCES, TOP = 1000, 12  # test sentences searched; kernels shown


def profiled(work: Callable[[], object]) -> dict[str, object]:
    """Wall seconds of `work` (warmed up) and its profile: launches, syncs, kernel time, top kernels."""
    work()
    _, wall = timed(DEVICE, work)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        work()
        synchronize(DEVICE)
    events = prof.events()
    kernels: Counter[str] = Counter()
    calls: Counter[str] = Counter()
    for event in events:
        if event.device_type == DeviceType.CUDA:
            name = event.name[:90]
            kernels[name] += event.time_range.elapsed_us()
            calls[name] += 1
    return {
        "wall_s": wall,
        "launches": sum(e.name in CUDA_LAUNCHES or e.name in CUDA_GRAPH_LAUNCHES for e in events),
        "syncs": sum(e.name in CUDA_SYNCS for e in events),
        "kernel_s": sum(kernels.values()) / 1e6,
        "top": [(name, us / 1e3, calls[name]) for name, us in kernels.most_common(TOP)],
    }


def decoding_steps(translator: TorchTranslator, sources: list[list[int]]) -> int:
    """The decoding steps a search of `sources` takes, counted with its steps eager: a step replayed from a
    CUDA graph runs no Python, so counting with graphs on would count the captures."""
    eager = translator.with_search(cuda_graphs=False)
    return counting_steps(translator.model, lambda: eager.search(sources))()


def report(title: str, result: dict[str, object], units: int, unit: str) -> None:
    print(f"\n## {title}")
    wall, kernel = result["wall_s"], result["kernel_s"]
    print(
        f"wall {wall * 1e3:.1f} ms for {units} {unit} ({wall * 1e3 / units:.3f} ms each); GPU kernels "
        f"{kernel * 1e3:.1f} ms ({kernel / wall:.0%} busy); {result['launches'] / units:.1f} launches and "
        f"{result['syncs'] / units:.2f} host syncs per {unit.rstrip('s')}"
    )
    for name, ms, count in result["top"]:
        print(f"  {ms:8.2f} ms  {count:6d}×  {name}")


def main() -> None:
    parse = parser(__doc__)
    parse.add_argument("config", type=Path)
    parse.add_argument("--data", type=Path, required=True)
    parse.add_argument("--train-seconds", type=float, default=60.0)
    parse.add_argument("--updates", type=int, default=20, help="training updates profiled")
    args = parse.parse_args()
    logging.basicConfig(level=logging.WARNING)
    cfg = load_config(args.config, [f"data.dir={args.data}", "train.final_report=false"])
    with tempfile.TemporaryDirectory(prefix="nmt-profile-") as tmp:
        run_dir = RunDir(Path(tmp) / "run")
        run_dir.path.mkdir()
        data = prepare_data(cfg, run_dir.path, reuse_tokenizers=False, cache=Path(tmp) / "cache")
        trainer, _ = measure_time_to_bleu(cfg, run_dir, data, DEVICE, 0.0, args.train_seconds)  # no target
        device = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
        print(f"# {args.config.name}: {device}, torch {torch.__version__}")
        progress = trainer.progress
        print(f"trained {progress.step} updates, best validation BLEU {progress.best_bleu:.2f}")
        trainer.model.train()
        with contextlib.closing(trainer.stream.updates(trainer.progress)) as stream:
            updates = list(itertools.islice(stream, args.updates))

        def train() -> None:
            for batches in updates:
                trainer.train_step(batches)

        report("training updates", profiled(train), len(updates), "updates")
        translator = TorchTranslator.of(trainer.model.eval(), cfg, data.tokenizers)
        (test,) = read_directions(cfg.data, "test").values()
        sources = translator.encode(test.src[:SENTENCES])
        for beam in (1, 5):
            one_batch = translator.with_search(beam_size=beam, nbest=1, batch_tokens=MAX_SIZE)
            steps = decoding_steps(one_batch, sources)
            for graphs in (False, True):
                searching = one_batch.with_search(cuda_graphs=graphs)
                result = profiled(lambda t=searching: t.search(sources))
                title = f"beam {beam}, {'CUDA graphs' if graphs else 'eager'}"
                report(f"{title}: {len(sources) / result['wall_s']:,.0f} sent/s", result, steps, "steps")


if __name__ == "__main__":
    main()
