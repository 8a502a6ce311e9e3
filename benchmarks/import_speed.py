"""`nmt import` of a MarianMT model of OPUS-MT's shape (random weights) against transformers' loading, each
in a fresh process (seconds, resident memory's growth to its peak), and a training update of the imported
model beside nmt's own Transformer of its shape (docs/import.md gives the method):

    python -m benchmarks.import_speed --work /tmp/import-speed
"""

from __future__ import annotations

import dataclasses
import io
import json
import shutil
import statistics
import sys
import time
from pathlib import Path

from benchmarks.common import fresh_process, machine, memory_gib, parser, table

OPUS_MT = json.loads(
    '{"d_model": 512, "encoder_layers": 6, "decoder_layers": 6, "encoder_attention_heads": 8, '
    '"decoder_attention_heads": 8, "encoder_ffn_dim": 2048, "decoder_ffn_dim": 2048, '
    '"activation_function": "swish", "scale_embedding": true, "max_position_embeddings": 512}'
)  # Helsinki-NLP/opus-mt-de-en's config.json, its vocabulary aside


def write_model(directory: Path, vocab: int, shape: dict[str, int]) -> Path:
    """A MarianMT directory of OPUS-MT's shape with `vocab` pieces (all but a few unused), random weights."""
    import sentencepiece as spm
    import transformers

    directory.mkdir(parents=True)
    lines = [f"{word} {n}" for n in range(500) for word in ("Haus", "house", "Katze", "cat")]
    for name in ("source.spm", "target.spm"):
        model = io.BytesIO()
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(lines), model_writer=model, vocab_size=60, minloglevel=2
        )
        (directory / name).write_bytes(model.getvalue())
    pieces = spm.SentencePieceProcessor(model_file=str(directory / "source.spm"))
    known = [pieces.id_to_piece(i) for i in range(3, pieces.get_piece_size())]
    names = ["</s>", "<unk>", *known, *(f"<unused{i}>" for i in range(vocab - 3 - len(known))), "<pad>"]
    (directory / "vocab.json").write_text(json.dumps({piece: i for i, piece in enumerate(names)}))
    ids = {"vocab_size": vocab, "decoder_vocab_size": vocab, "pad_token_id": vocab - 1}
    config = transformers.MarianConfig(**ids, decoder_start_token_id=vocab - 1, **(OPUS_MT | shape))
    transformers.MarianMTModel(config).save_pretrained(directory)
    return directory


def child(task: str, source: str, out: str) -> None:
    """One measured load in this fresh process: its seconds, resident memory before it and this process's
    peak (VmHWM: since exec; the ru_maxrss of a child starts at its parent's resident memory), as JSON."""
    import torch  # noqa: F401  (imported before the clock starts, as every library below)

    if task == "transformers":
        from transformers import MarianMTModel

        before, started = memory_gib(), time.perf_counter()
        MarianMTModel.from_pretrained(source)
    else:
        from nmt.importing.marian import import_model

        before, started = memory_gib(), time.perf_counter()
        import_model(source, Path(out))
    seconds, peak = time.perf_counter() - started, memory_gib("VmHWM")
    print(json.dumps({"seconds": seconds, "before_mib": before * 1024, "peak_mib": peak * 1024}))


def measured(task: str, source: Path, out: Path) -> tuple[float, float]:
    """Seconds and the growth of resident memory (MiB) of one load in a fresh process."""
    command = [sys.executable, "-m", "benchmarks.import_speed", "--child", task, str(source), str(out)]
    found = json.loads(fresh_process(command).stdout)
    return found["seconds"], found["peak_mib"] - found["before_mib"]


def seconds_per_update(run: Path, steps: int, batch: int, length: int) -> tuple[dict[str, float], int]:
    """Median seconds of a training update of the imported model and of nmt's Transformer of its shape; the
    imported model's parameters."""
    import torch

    from nmt.config.sections import TrainConfig
    from nmt.config.yaml_file import load_saved_config
    from nmt.data.special_tokens import PAD
    from nmt.models.config import TransformerConfig
    from nmt.models.transformer import TransformerSeq2Seq
    from nmt.run.checkpoint_io import load_checkpoint
    from nmt.train.loss import sequence_loss
    from nmt.train.step import build_optimizer

    cfg = load_saved_config(run / "config.yaml")
    vocab, arch = cfg.tokenizer.vocab_size, cfg.model.transformer_settings
    same = TransformerConfig(d_model=arch.d_model, heads=arch.heads, ff_dim=arch.ff_dim)
    models = {
        "imported (post-norm, swish, logits bias)": TransformerSeq2Seq(cfg.model, vocab, vocab, True, PAD),
        "nmt Transformer (pre-norm, relu)": TransformerSeq2Seq(
            dataclasses.replace(cfg.model, transformer=same), vocab, vocab, True, PAD
        ),
    }
    next(iter(models.values())).load_state_dict(load_checkpoint(run / "best.pt")["model"])
    torch.manual_seed(0)
    src, tgt = (torch.randint(4, vocab - 1, (batch, length)) for _ in range(2))
    mask = torch.ones(batch, 1, length, dtype=torch.bool)
    times: dict[str, list[float]] = {name: [] for name in models}
    optimizers = {name: build_optimizer(model.train(), TrainConfig()) for name, model in models.items()}
    for step in range(steps + 2):  # the two first: warm-up
        for name, model in models.items():
            started = time.perf_counter()
            loss = sequence_loss(model(src, mask, tgt[:, :-1]).logits, tgt[:, 1:], 0.1)
            loss.backward()
            optimizers[name].step()
            optimizers[name].zero_grad()
            if step >= 2:
                times[name].append(time.perf_counter() - started)
    count = sum(p.numel() for p in next(iter(models.values())).parameters())
    return {name: statistics.median(found) for name, found in times.items()}, count


def main(argv: list[str]) -> None:
    if argv[:1] == ["--child"]:
        return child(*argv[1:4])
    args = parser(__doc__)
    args.add_argument("--work", type=Path, required=True, help="the model, the runs (made anew)")
    args.add_argument("--vocab", type=int, default=58101, help="vocabulary pieces (opus-mt-de-en: 58101)")
    args.add_argument("--repeats", type=int, default=2, help="fresh processes per load; the fastest kept")
    args.add_argument("--steps", type=int, default=5, help="timed updates per model")
    args.add_argument("--batch", type=int, nargs=2, default=(16, 32), help="sentences and tokens per side")
    args.add_argument(
        "--shape", type=json.loads, default={}, help='JSON changing OPUS_MT, e.g. {"d_model": 64}'
    )
    opts = args.parse_args(argv)
    shutil.rmtree(opts.work, ignore_errors=True)
    source = write_model(Path(opts.work / "opus-mt-de-en"), opts.vocab, opts.shape)
    weights = (source / "model.safetensors").stat().st_size / 2**20
    rows, loads = [], {}
    for task in ("transformers", "nmt import"):
        runs = [measured(task, source, opts.work / f"run{i}") for i in range(opts.repeats)]
        loads[task] = min(r[0] for r in runs), min(r[1] for r in runs)
        rows.append([task, f"{loads[task][0]:.2f} s", f"{loads[task][1]:.0f} MiB"])
    ratio = [loads["nmt import"][i] / loads["transformers"][i] for i in (0, 1)]
    rows.append(["nmt import ÷ transformers", f"{ratio[0]:.2f}×", f"{ratio[1]:.2f}×"])
    rows.append(["weights (model.safetensors)", "", f"{weights:.0f} MiB"])
    grown = ", ".join(f"{loads[task][1] / weights:.2f}×" for task in ("transformers", "nmt import"))
    rows.append(["memory growth ÷ weights (transformers, nmt import)", "", grown])
    print(table(["loading a model of OPUS-MT's size", "seconds", "memory growth to peak"], rows))
    updates, parameters = seconds_per_update(opts.work / "run0", opts.steps, *opts.batch)
    (imported, ours) = updates.values()
    lines = [[name, f"{seconds:.3f} s"] for name, seconds in updates.items()]
    lines.append(["imported ÷ nmt", f"{imported / ours:.2f}×"])
    print("\n" + table([f"update, batch {opts.batch[0]}×{opts.batch[1]} tokens, cpu", "median"], lines))
    print(f"\n{parameters / 1e6:.1f}M parameters; machine: {machine('torch', 'transformers', 'safetensors')}")


if __name__ == "__main__":
    main(sys.argv[1:])
