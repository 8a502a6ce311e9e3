"""Attention heatmaps: target subwords (rows) over source subwords (columns), as PNG, SVG or PDF."""

from __future__ import annotations

import io
import re
import textwrap
from pathlib import Path
from typing import Any, Literal

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.colors import LinearSegmentedColormap
from torch import Tensor

from nmt.atomic_files import atomic_write
from nmt.decode.decoded import DecodedLine
from nmt.errors import UserError
from nmt.models.config import ModelConfig

FORMATS = (".png", ".svg", ".pdf")
MAX_INCHES = 30.0  # per side of a figure: 4500 pixels at 150 dpi, however long the sentence
MAX_PLOTTED = 120  # subwords a side of a heatmap: beyond, its labels are too small to read (under 5.3 pt)
WIDE = 2.5  # a figure wider than this many times its height has its colour bar below it, where its label fits
# The colour scale, white (no weight) through blues to dark indigo: the explorer's (STOPS in
# nmt/serve/static/explorer.js, kept equal by a test), so that a weight has one colour in both.
ATTENTION_STOPS = (
    (255, 255, 255),
    (198, 219, 239),
    (107, 174, 214),
    (33, 113, 181),
    (8, 48, 107),
    (20, 10, 60),
)
ATTENTION_COLOURS = LinearSegmentedColormap.from_list(
    "attention", [tuple(channel / 255 for channel in stop) for stop in ATTENTION_STOPS]
)
WORD_START = "▁"  # sentencepiece's mark on a subword that starts a word


def check_output_path(path: Path) -> None:
    if path.suffix.lower() not in FORMATS:
        raise UserError(f"cannot tell the image format of {path}; use a name ending in .png, .svg or .pdf")


def check_plottable(source: int, output: int = 0) -> None:
    """Refuse, in one line, a heatmap of an empty text, or of more than MAX_PLOTTED subwords a side (`source`
    and `output` subwords, without </s>): its labels could not be read."""
    if not source:
        raise UserError("the text to translate is empty")
    longest = max(source, output)
    if longest > MAX_PLOTTED:
        sides = f"the text has {source} subwords" + (f" and its translation {output}" if output else "")
        raise UserError(
            f"{sides}; a heatmap stays readable up to {MAX_PLOTTED} a side: plot one sentence of it at a time"
        )


Scale = Literal["figure", "fixed"]


def _scale(weights: Tensor, scale: Scale) -> tuple[float, str]:
    """The top of the colour scale and the colour bar's label: 0 to the largest weight drawn ('figure', so
    that a diffuse head is not uniformly dark), or 0 to 1 ('fixed', comparable across figures)."""
    if scale == "fixed":
        return 1.0, "attention weight\n(scale 0 to 1, fixed)"
    top = max(float(weights.max()), 1e-6)
    return top, f"attention weight\n(scale 0 to {top:.2f}, this figure's largest)"


def shown_piece(piece: str) -> str:
    """A subword as a label shows it, in these images and in the explorer: a word start as a middle dot."""
    return "·" + piece[1:] if piece.startswith(WORD_START) else piece


def _draw(axes: plt.Axes, weights: Tensor, src: list[str], tgt: list[str], title: str, top: float) -> Any:
    image = axes.imshow(weights.numpy(), cmap=ATTENTION_COLOURS, vmin=0.0, vmax=top, aspect="auto")
    fontsize = min(8.0, max(1.0, 8.0 * 80 / max(len(src), len(tgt), 1)))  # long sentences: smaller labels
    axes.set_xticks(range(len(src)), [shown_piece(p) for p in src], rotation=90, fontsize=fontsize)
    axes.set_yticks(range(len(tgt)), [shown_piece(p) for p in tgt], fontsize=fontsize)
    axes.set_xlabel("source  (· starts a word)")
    axes.set_ylabel("output")
    axes.set_title(title, fontsize=9)
    return image


def heatmap_title(attention: str, translation: str) -> str:
    """Every heatmap's title: what attention is drawn (ModelConfig.attention_name), then the translation."""
    return f"{attention}\n{translation}"


def _wrapped(title: str, inches: float) -> str:
    """`title` with each of its lines wrapped to what a figure `inches` wide holds."""
    width = max(20, int(inches * 11))
    return "\n".join(textwrap.fill(line, width) for line in title.splitlines())


def save_attention(
    translated: DecodedLine,
    path: Path,
    model: ModelConfig,
    layer: int = -1,
    head: str = "mean",
    all_heads: bool = False,
    scale: Scale = "figure",
) -> None:
    """Heatmap(s) of one layer of the best translation's attention (layers, heads, tgt_len, src_len) of a
    `model`: the mean of its heads, one head, or every head in a grid. Layers and heads count from 0,
    negative layers from the last. A side of more than MAX_PLOTTED subwords is refused (`check_plottable`)."""
    best = translated.best
    if best.attention is None:
        raise ValueError("save_attention needs a translation with its attention")
    weights, src, tgt = best.attention, translated.source_pieces, best.pieces
    check_plottable(len(src) - 1, len(tgt) - 1)  # the pieces end with </s>
    layers, heads = weights.shape[:2]
    if not -layers <= layer < layers:
        raise UserError(
            f"--layer {layer} is out of range: the model has {layers} decoder layer(s), 0 to {layers - 1}"
        )
    layer %= layers
    if all_heads:
        title = heatmap_title(model.attention_name(layer, "all"), best.text)
        save_head_grid(weights[layer], src, tgt, path, title, scale)
    elif head == "mean":
        title = heatmap_title(model.attention_name(layer, "mean"), best.text)
        save_heatmap(weights[layer].mean(dim=0), src, tgt, path, title, scale)
    elif re.fullmatch(r"-?[0-9]+", head) and -heads <= int(head) < heads:
        title = heatmap_title(model.attention_name(layer, int(head) % heads), best.text)
        save_heatmap(weights[layer, int(head)], src, tgt, path, title, scale)
    else:
        raise UserError(f"--head {head} is not 'mean' or a head from 0 to {heads - 1}")


def save_heatmap(
    weights: Tensor, src: list[str], tgt: list[str], path: Path, title: str, scale: Scale = "figure"
) -> None:
    """One heatmap of `weights` (tgt_len, src_len)."""
    check_output_path(path)
    top, label = _scale(weights, scale)
    size = _bounded(max(5.0, 0.35 * len(src) + 3), max(3.5, 0.3 * len(tgt) + 2))
    figure, axes = plt.subplots(figsize=size, layout="constrained")
    image = _draw(axes, weights, src, tgt, _wrapped(title, size[0] - 1.5), top)
    _colour_bar(figure, image, axes, label, size)
    _save(figure, path)


def save_head_grid(
    weights: Tensor, src: list[str], tgt: list[str], path: Path, title: str, scale: Scale = "figure"
) -> None:
    """A grid with one heatmap per head, one colour scale and colour bar for all: `weights` (heads,
    tgt_len, src_len)."""
    check_output_path(path)
    top, label = _scale(weights, scale)
    heads = weights.size(0)
    cell = (max(3.0, 0.3 * len(src) + 1.5), max(2.5, 0.25 * len(tgt) + 1.2))
    columns = max(1, min(4, heads, int(MAX_INCHES // cell[0])))  # long sources: fewer heads a row
    rows = -(-heads // columns)
    size = _bounded(cell[0] * columns + 1.5, cell[1] * rows + 0.8)
    figure, grid = plt.subplots(rows, columns, figsize=size, layout="constrained", squeeze=False)
    for head, axes in enumerate(grid.flat):
        if head < heads:
            image = _draw(axes, weights[head], src, tgt, f"head {head}", top)
        else:
            axes.axis("off")
    _colour_bar(figure, image, grid.ravel().tolist(), label, size)
    figure.suptitle(_wrapped(title, size[0]), fontsize=10)
    _save(figure, path)


def _colour_bar(figure: plt.Figure, image: Any, axes: Any, label: str, size: tuple[float, float]) -> None:
    """The colour bar beside the heatmap(s), or below them in a WIDE figure, where its label has room (one
    line there)."""
    if size[0] > WIDE * size[1]:
        figure.colorbar(image, ax=axes, orientation="horizontal", shrink=0.4, label=label.replace("\n", " "))
    else:
        figure.colorbar(image, ax=axes, shrink=0.8, label=label)


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
        loss_axes.plot(
            [r[axis] for r in train if axis in r],
            [r["loss"] for r in train if axis in r],
            label="train (label-smoothed)",
            linewidth=1,
        )
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
