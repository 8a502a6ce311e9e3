"""Host overhead of nmt's training update and decoding step, counted by torch.profiler, as a Markdown table.

    python -m benchmarks.host_overhead configs/tiny-transformer.yaml configs/multi30k-transformer.yaml

For each config: a few training updates on a small synthetic corpus (operators and host syncs per update, as
`nmt benchmark` counts them), then greedy and beam-5 search of a batch of sentences with the briefly trained
model (operators and host syncs per decoding step). Counts, not timings: on CPU they say how much work the
host dispatches, whatever the machine's speed. Options after the configs are `--set` overrides for all.
"""

from __future__ import annotations

import argparse
import functools
import logging
import tempfile
from collections.abc import Callable
from pathlib import Path

import torch

from nmt.bench.profiling import profile_updates
from nmt.config.yaml_file import load_config
from nmt.data.prepare import prepare_data
from nmt.data.synthetic import write_reordering_corpus
from nmt.decode.search import SearchOptions, search
from nmt.rules.beam import BeamSearch, Greedy
from nmt.train.loop import Trainer


def measure(
    config: Path, overrides: list[str], updates: int, sentences: int, device: str
) -> dict[str, float]:
    """Per-update and per-decoding-step operators and host syncs of one config."""
    tmp = Path(tempfile.mkdtemp(prefix="nmt-overhead-"))
    corpus = write_reordering_corpus(tmp / "corpus", 3000, 100, 100, vocab=60, min_len=3, max_len=7)
    data = [f"data.dir={corpus}", "data.src_lang=src", "data.tgt_lang=tgt", "tokenizer.vocab_size=200"]
    cfg = load_config(config, [*data, f"train.device={device}", "train.batch_tokens=600", *overrides])
    (tmp / "run").mkdir()
    trainer = Trainer(cfg, tmp / "run", prepare_data(cfg, tmp / "run", False), torch.device(device))
    pending = trainer.stream.epoch(trainer.progress)
    for _ in range(3):  # warm-up: lazy initialisation, and captures when train.cuda_graphs is on
        trainer.train_step(next(pending)[1])
    batches = [next(pending)[1] for _ in range(updates)]

    def train() -> int:
        for update in batches:
            trainer.train_step(update)
        return len(batches)

    training = profile_updates(train, trainer.device)
    result = {
        "operators per update": training.operators,
        "… of them in the optimizer step": training.optimizer_operators,
        "host syncs per update": training.host_syncs,
    }
    model, batch = trainer.model.eval(), batches[0][0]
    src, mask = batch.src[:sentences], batch.src_mask[:sentences]
    options = SearchOptions(max_len_a=3.0, max_len_b=40)
    for name, rule in (("greedy", Greedy()), ("beam 5", BeamSearch(beam_size=5))):
        searching = functools.partial(search, model, src, mask, rule, options)
        costs = profile_updates(counting_steps(model, searching), trainer.device)  # "updates": decoding steps
        result[f"{name}: operators per step"] = costs.operators
        result[f"{name}: host syncs per step"] = costs.host_syncs
    return result


def counting_steps(model: torch.nn.Module, search: Callable[[], object]) -> Callable[[], int]:
    """`search` as a function that returns how many decoding steps it took."""

    def run() -> int:
        steps, step = [], model.decode_step
        model.decode_step = lambda *args: steps.append(1) or step(*args)
        try:
            search()
        finally:
            del model.decode_step  # the instance attribute shadowed the method
        return len(steps)

    return run


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("configs", nargs="+", type=Path)
    parser.add_argument("--set", dest="overrides", action="append", default=[], help="KEY=VALUE for all")
    parser.add_argument("--updates", type=int, default=4, help="training updates profiled")
    parser.add_argument("--sentences", type=int, default=16, help="sentences decoded in one batch")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    results = {
        c.stem: measure(c, args.overrides, args.updates, args.sentences, args.device) for c in args.configs
    }
    print("| figure | " + " | ".join(results) + " |")
    print("|---|" + "---:|" * len(results))
    for key in next(iter(results.values())):
        print(
            f"| {key} | "
            + " | ".join(f"{r[key]:,.2f}".rstrip("0").rstrip(".") for r in results.values())
            + " |"
        )
    print(f"\ndevice: {args.device}, torch {torch.__version__}")


if __name__ == "__main__":
    main()
