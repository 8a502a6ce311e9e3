"""Attention heatmaps: target subwords (rows) over source subwords (columns), as PNG, SVG or PDF."""

from __future__ import annotations

import io
import re
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from torch import Tensor

from nmt.atomic_files import atomic_write
from nmt.errors import UserError

FORMATS = (".png", ".svg", ".pdf")
MAX_INCHES = 30.0  # per side of a figure: 4500 pixels at 150 dpi, however long the sentence


def check_output_path(path: Path) -> None:
    if path.suffix.lower() not in FORMATS:
        raise UserError(f"cannot tell the image format of {path}; use a name ending in .png, .svg or .pdf")


def _draw(axes: plt.Axes, weights: Tensor, src: list[str], tgt: list[str], title: str) -> None:
    image = axes.imshow(weights.numpy(), cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
    fontsize = min(8.0, max(1.0, 8.0 * 80 / max(len(src), len(tgt), 1)))  # long sentences: smaller labels
    axes.set_xticks(range(len(src)), src, rotation=90, fontsize=fontsize)
    axes.set_yticks(range(len(tgt)), tgt, fontsize=fontsize)
    axes.set_xlabel("source")
    axes.set_ylabel("output")
    axes.set_title(textwrap.fill(title, 60), fontsize=9)
    return image


def save_attention(weights: Tensor, src: list[str], tgt: list[str], path: Path, title: str, layer: int = -1,
                   head: str = "mean", all_heads: bool = False) -> None:  # fmt: skip
    """Heatmap(s) of one layer of `weights` (layers, heads, tgt_len, src_len): the mean of its heads, one
    head, or every head in a grid. Layers and heads count from 0, negative layers from the last."""
    layers, heads = weights.shape[:2]
    if not -layers <= layer < layers:
        raise UserError(
            f"--layer {layer} is out of range: the model has {layers} decoder layer(s), 0 to {layers - 1}"
        )
    title = f"layer {layer % layers}: {title}"
    if all_heads:
        save_head_grid(weights[layer], src, tgt, path, title)
    elif head == "mean":
        save_heatmap(
            weights[layer].mean(dim=0), src, tgt, path, title + (" (mean of heads)" if heads > 1 else "")
        )
    elif re.fullmatch(r"-?[0-9]+", head) and -heads <= int(head) < heads:
        save_heatmap(weights[layer, int(head)], src, tgt, path, f"{title} (head {int(head) % heads})")
    else:
        raise UserError(f"--head {head} is not 'mean' or a head from 0 to {heads - 1}")


def save_heatmap(weights: Tensor, src: list[str], tgt: list[str], path: Path, title: str) -> None:
    """One heatmap of `weights` (tgt_len, src_len)."""
    check_output_path(path)
    size = _bounded(max(4.0, 0.35 * len(src) + 2), max(3.0, 0.3 * len(tgt) + 1.5))
    figure, axes = plt.subplots(figsize=size, layout="constrained")
    image = _draw(axes, weights, src, tgt, title)
    figure.colorbar(image, ax=axes, shrink=0.8)
    _save(figure, path)


def save_head_grid(weights: Tensor, src: list[str], tgt: list[str], path: Path, title: str) -> None:
    """A grid with one heatmap per head: `weights` (heads, tgt_len, src_len)."""
    check_output_path(path)
    heads = weights.size(0)
    columns = min(4, heads)
    rows = -(-heads // columns)
    cell = (max(3.0, 0.3 * len(src) + 1.5), max(2.5, 0.25 * len(tgt) + 1.2))
    figure, grid = plt.subplots(
        rows,
        columns,
        figsize=_bounded(cell[0] * columns, cell[1] * rows),
        layout="constrained",
        squeeze=False,
    )
    for head, axes in enumerate(grid.flat):
        if head < heads:
            _draw(axes, weights[head], src, tgt, f"head {head}")
        else:
            axes.axis("off")
    figure.suptitle(textwrap.fill(title, 100), fontsize=10)
    _save(figure, path)


def _bounded(width: float, height: float) -> tuple[float, float]:
    """A figure size (inches) scaled down, keeping its shape, so that no side exceeds MAX_INCHES."""
    scale = min(1.0, MAX_INCHES / max(width, height))
    return width * scale, height * scale


def _save(figure: plt.Figure, path: Path) -> None:
    """Render the image in memory, then write it atomically (an interrupted run leaves no partial file)."""
    image = io.BytesIO()
    try:
        figure.savefig(image, dpi=150, format=path.suffix.lower().lstrip("."))
    finally:
        plt.close(figure)
    atomic_write(path, lambda handle: handle.write(image.getvalue()))


def save_learning_curves(records: list[dict], path: Path) -> None:
    """Training and validation loss, and validation BLEU, against steps and against training time."""
    train = [r for r in records if r["kind"] == "train"]
    valid = [r for r in records if r["kind"] == "valid"]
    figure, grid = plt.subplots(2, 2, figsize=(10, 7), layout="constrained")
    for row, axis in enumerate(("step", "elapsed")):
        loss_axes, bleu_axes = grid[row]
        loss_axes.plot([r[axis] for r in train if axis in r], [r["loss"] for r in train if axis in r],
                       label="train (label-smoothed)", linewidth=1)  # fmt: skip
        loss_axes.plot(
            [r[axis] for r in valid], [r["loss"] for r in valid], label="valid", marker="o", markersize=3
        )
        bleu_axes.plot(
            [r[axis] for r in valid], [r["bleu"] for r in valid], marker="o", markersize=3, color="C2"
        )
        label = "step" if axis == "step" else "training seconds"
        loss_axes.set(xlabel=label, ylabel="loss per target token", title=f"loss vs {label}")
        bleu_axes.set(xlabel=label, ylabel="validation BLEU (greedy)", title=f"BLEU vs {label}")
        loss_axes.legend(fontsize=8)
        for axes in (loss_axes, bleu_axes):
            axes.grid(alpha=0.3)
    _save(figure, path)
