"""The run an export reads and the directory it writes, for every export format: the output directory must be
new or empty, only Transformer runs are exported (no runtime we export to has an RNN decoder), and the files
are written into a temporary sibling directory that is renamed into place at the end, so that a failed export
leaves nothing behind."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch

from nmt.decode.loading import load_trained
from nmt.decode.trained_run import TrainedRun
from nmt.errors import UserError
from nmt.models.transformer import TransformerSeq2Seq


def check_out_dir(out_dir: Path) -> None:
    """Refuse an output path that exists and is not an empty directory."""
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise UserError(f"{out_dir} already exists and is not an empty directory; choose a new one")


def load_transformer_run(
    run_dir: Path, which: str | None, runtime: str
) -> tuple[TrainedRun, TransformerSeq2Seq]:
    """The run's checkpoint `which` (best, last or averaged; default: the run's choice) on the CPU, and its
    model; a run of another model type, or a Transformer with a residual-free encoder layer, is refused,
    naming the `runtime` it cannot go to."""
    run = load_trained([run_dir], torch.device("cpu"), which)
    if not isinstance(run.model, TransformerSeq2Seq):
        raise UserError(
            f"{run_dir} holds a model.type={run.cfg.model.type} model; only Transformers can be exported "
            f"to {runtime}"
        )
    layer = run.cfg.model.transformer_settings.residual_free_layer
    if layer is not None:
        raise UserError(
            f"{run_dir}'s encoder layer {layer} has no residual connection around its self-attention "
            f"(model.transformer.residual_free_layer); {runtime}'s Transformer has one in every layer, so "
            f"the run cannot be exported to it"
        )
    return run, run.model


@contextmanager
def staged_directory(out_dir: Path) -> Iterator[Path]:
    """A fresh temporary sibling of `out_dir` to write into, renamed to `out_dir` when the block ends
    (`out_dir` must not exist or be empty); removed if the block raises."""
    tmp = out_dir.with_name(f".{out_dir.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if out_dir.exists():
        out_dir.rmdir()
    tmp.rename(out_dir)
