"""`nmt train`, `nmt average` (a run's last checkpoints) and `nmt benchmark`: training, and measuring it."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from nmt.cli.options import (
    ConfigFile,
    DataDir,
    Overrides,
    RunDirArgument,
    SrcLang,
    TgtLang,
    TrainDevice,
    flag_overrides,
)
from nmt.errors import process_rank
from nmt.limits import MAX_SIZE


def _experiment(config: Path, overrides: list[str]) -> Any:
    """The config of a model to train: loaded, and the model's size checked before any data work (a model
    too large to allocate is a one-line error at once, not after the tokenizer trained)."""
    from nmt.config.yaml_file import load_config
    from nmt.models.build import check_model_size

    cfg = load_config(config, overrides)
    check_model_size(cfg.model, cfg.tokenizer.vocab_size, cfg.tokenizer.joint)
    return cfg


def train(
    config: ConfigFile,
    data: DataDir = None,
    src_lang: SrcLang = None,
    tgt_lang: TgtLang = None,
    out: Annotated[Path | None, typer.Option(help="Run directory (default runs/<config name>).")] = None,
    device: TrainDevice = None,
    max_time: Annotated[
        float | None,
        typer.Option(
            min=0,
            help="Stop after this many seconds of training and validation (0: no limit); the final report "
            "follows (announced, with its progress; train.final_report=false skips it).",
        ),
    ] = None,
    max_steps: Annotated[
        int | None, typer.Option(min=0, max=MAX_SIZE, help="Stop after this many updates (0: no limit).")
    ] = None,
    max_epochs: Annotated[
        int | None, typer.Option(min=0, max=MAX_SIZE, help="Stop after this many epochs (0: no limit).")
    ] = None,
    resume: Annotated[bool, typer.Option(help="Continue the run in --out from its last checkpoint.")] = False,
    overwrite: Annotated[bool, typer.Option(help="Replace a finished run in --out.")] = False,
    init_from: Annotated[
        Path | None,
        typer.Option(
            help="Start from this run's weights and sentencepiece model (fine-tuning); optimizer and "
            "schedule start afresh."
        ),
    ] = None,
    tensorboard: Annotated[
        Path | None, typer.Option(help="Also write TensorBoard event files into this directory.")
    ] = None,
    overrides: Overrides = None,
    nproc: Annotated[
        int, typer.Option(min=1, help="Data-parallel processes on this machine (one per GPU), via torchrun.")
    ] = 1,
) -> None:
    """Train the model described by CONFIG; prints the best checkpoint's path.

    Under `torchrun --nproc_per_node N -m nmt train …` (or with --nproc N) N processes train together.
    """
    from nmt.train.command import train as run_training

    flags = {
        "data.dir": data,
        "data.src_lang": src_lang,
        "data.tgt_lang": tgt_lang,
        "train.device": device,
        "train.max_time": max_time,
        "train.max_steps": max_steps,
        "train.max_epochs": max_epochs,
        "train.tensorboard": True if tensorboard else None,
        "train.tensorboard_dir": tensorboard,
    }
    cfg = _experiment(config, flag_overrides(flags) + (overrides or []))
    if nproc > 1:
        from nmt.train.distributed import launch

        code, line = launch(nproc, sys.argv[1:])  # this command line, in nproc processes
        if line:
            typer.echo(line, err=True)
        raise typer.Exit(code=code)
    run_dir = out or Path("runs") / config.stem
    best = run_training(cfg, run_dir, resume=resume, overwrite=overwrite, init_from=init_from)
    if process_rank() == 0:
        typer.echo(best)


def average(
    run_dir: RunDirArgument,
    last: Annotated[int, typer.Option(min=1, help="How many of the newest kept checkpoints to average.")] = 5,
) -> None:
    """Average the weights of a run's last kept checkpoints (train.keep_checkpoints) into averaged.pt."""
    from nmt.run.average import average_run
    from nmt.run.directory import RunDir

    typer.echo(average_run(RunDir(run_dir), last))


def benchmark(
    config: ConfigFile,
    data: DataDir = None,
    src_lang: SrcLang = None,
    tgt_lang: TgtLang = None,
    device: TrainDevice = None,
    json_path: Annotated[
        Path | None, typer.Option("--json", help="Also write the results as JSON here.")
    ] = None,
    warmup_steps: Annotated[
        int,
        typer.Option(
            min=0,
            max=MAX_SIZE,
            help="Untimed warm-up updates; the warm-up then runs to the end of its epoch.",
        ),
    ] = 30,
    steps: Annotated[
        int, typer.Option(min=1, max=MAX_SIZE, help="Most updates timed (at most one epoch), at least 1.")
    ] = 400,
    bleu_target: Annotated[
        float, typer.Option(min=0, max=100, help="Validation BLEU for the time-to-BLEU figure.")
    ] = 40.0,
    bleu_budget: Annotated[
        float,
        typer.Option(
            min=0, help="Seconds of training allowed to reach --bleu-target (0: training speed only)."
        ),
    ] = 120.0,
    decode_sentences: Annotated[
        int, typer.Option(min=0, max=MAX_SIZE, help="Test sentences decoded in one batch (0: no decoding).")
    ] = 1000,
    overrides: Overrides = None,
) -> None:
    """Measure training and decoding speed, peak memory and time to a validation BLEU of the model CONFIG
    describes; print a table. Without --data, on a synthetic corpus of Multi30k's size."""
    from nmt.atomic_files import atomic_write_text
    from nmt.bench.benchmark import benchmark as run_benchmark
    from nmt.bench.benchmark import format_table

    flags = {"data.src_lang": src_lang, "data.tgt_lang": tgt_lang, "train.device": device}
    cfg = _experiment(config, flag_overrides(flags) + (overrides or []))
    result = run_benchmark(cfg, data, warmup_steps, steps, bleu_target, bleu_budget, decode_sentences)
    typer.echo(format_table(result))
    if json_path is not None:
        atomic_write_text(json_path, json.dumps(result, indent=2) + "\n")
