"""Attention heatmaps: a colour scale per figure (or 0 to 1) named on the colour bar, one colour bar for a
grid of heads, and titles that name the attention mechanism, the same for `plot-attention` and the report;
the explorer's colours and subword labels."""

import json
import re
from pathlib import Path

import matplotlib.pyplot as plt
import pytest
import torch

import nmt.evaluate.plots
from nmt.config.yaml_file import load_config
from nmt.decode.decoded import DecodedHypothesis, DecodedLine
from nmt.decode.trained_run import load_run
from nmt.evaluate.directions import draw_heatmaps
from nmt.evaluate.plots import ATTENTION_COLOURS, ATTENTION_STOPS, save_attention
from nmt.models.config import ModelConfig
from nmt.run.directory import RunDir
from tests.conftest import ROOT, assert_one_line_error, run_cli


@pytest.fixture
def figures(monkeypatch: pytest.MonkeyPatch) -> list[plt.Figure]:
    """The figures the plotting functions would save, kept open instead of written."""
    kept: list[plt.Figure] = []
    monkeypatch.setattr(nmt.evaluate.plots, "_save", lambda figure, path: kept.append(figure))
    return kept


def drawn(source_pieces: list[str], pieces: list[str], weights: torch.Tensor) -> DecodedLine:
    """A translation of `source_pieces` into `pieces` that paid `weights` (layers, heads, tgt, src)."""
    return DecodedLine(source_pieces, [DecodedHypothesis("a b c", 0.0, [], pieces, weights)])


def diffuse(layers: int = 2, heads: int = 4) -> DecodedLine:
    """Weak, diffuse attention (every weight at most 0.3) over 5 source and 4 output pieces."""
    scores = torch.randn(layers, heads, 4, 5, generator=torch.Generator().manual_seed(0))
    weights = torch.softmax(scores / 8, dim=-1)
    assert weights.max() < 0.3
    return drawn(["x", "y", "z", "w", "</s>"], ["a", "b", "c", "</s>"], weights)


def colour_bars(figure: plt.Figure) -> list[str]:
    """The labels of a figure's colour bars."""
    return [axes.get_ylabel() for axes in figure.axes if axes.get_label() == "<colorbar>"]


def test_the_colour_scale_ends_at_the_figures_largest_weight(figures: list, tmp_path: Path) -> None:
    alignment, model = diffuse(), ModelConfig()
    save_attention(alignment, tmp_path / "a.png", model, layer=1, head="2")
    save_attention(alignment, tmp_path / "b.png", model, layer=1, head="2", scale="fixed")
    top = float(alignment.best.attention[1, 2].max())
    (by_figure,), (fixed,) = (figure.axes[0].images for figure in figures)
    assert by_figure.get_clim() == pytest.approx((0.0, top)) and fixed.get_clim() == (0.0, 1.0)
    assert colour_bars(figures[0]) == [f"attention weight\n(scale 0 to {top:.2f}, this figure's largest)"]
    assert colour_bars(figures[1]) == ["attention weight\n(scale 0 to 1, fixed)"]


def test_a_grid_of_heads_has_one_colour_bar_and_one_scale(figures: list, tmp_path: Path) -> None:
    alignment = diffuse()
    model = load_config(None, ["model.transformer.heads=4"]).model
    save_attention(alignment, tmp_path / "grid.png", model, layer=0, all_heads=True)
    (figure,) = figures
    images = [image for axes in figure.axes for image in axes.images]
    assert len(images) == 4 and len(colour_bars(figure)) == 1
    top = float(alignment.best.attention[0].max())  # of all heads
    assert all(image.get_clim() == pytest.approx((0.0, top)) for image in images)
    assert figure.get_suptitle().startswith("Transformer, decoder layer 0, 4 heads\na b c")


@pytest.mark.parametrize(
    ("overrides", "layer", "head", "name"),
    [
        (["model.type=rnn-bahdanau"], 0, "mean", "Bahdanau attention (additive)"),
        (["model.type=rnn-luong", "model.rnn.luong_score=dot"], 0, "mean", "Luong attention (dot score)"),
        ([], 2, "mean", "Transformer, decoder layer 2 (last), mean of 8 heads"),
        ([], 0, 3, "Transformer, decoder layer 0, head 3"),
    ],
)
def test_titles_name_the_mechanism(overrides: list[str], layer: int, head: int | str, name: str) -> None:
    assert load_config(None, overrides).model.attention_name(layer, head) == name  # type: ignore[arg-type]


def test_the_report_titles_its_heatmaps_as_plot_attention_does(
    figures: list, trained_run: Path, corpus: Path, tmp_path: Path
) -> None:
    sentence = (corpus / "valid.src").read_text().splitlines()[0]
    out = str(tmp_path / "a.png")
    code, _, err = run_cli("plot-attention", str(trained_run), "--text", sentence, "--out", out)
    assert code == 0, err
    draw_heatmaps(load_run(trained_run, torch.device("cpu")), RunDir(tmp_path / "run").attention_dir, 3)
    plotted, reported = (" ".join(figure.axes[0].get_title().split()) for figure in figures[:2])
    assert plotted.startswith("Transformer, decoder layer 1 (last), mean of 4 heads ")
    assert reported.startswith("Transformer, decoder layer 1 (last), mean of 4 heads ")


def test_the_colours_are_the_explorers() -> None:
    script = (ROOT / "nmt" / "serve" / "static" / "explorer.js").read_text()
    stops = json.loads(re.search(r"const STOPS = (\[.*\]);", script).group(1))  # type: ignore[union-attr]
    assert [tuple(stop) for stop in stops] == list(ATTENTION_STOPS)
    assert ATTENTION_COLOURS(0.0) == (1.0, 1.0, 1.0, 1.0)  # no weight: white, as in the explorer
    assert ATTENTION_COLOURS(1.0) == pytest.approx((20 / 255, 10 / 255, 60 / 255, 1.0))


def test_labels_mark_a_word_start_with_a_dot_as_the_explorer_does(figures: list, tmp_path: Path) -> None:
    weights = torch.full((1, 1, 3, 4), 0.25)
    save_attention(
        drawn(["▁ab", "▁c", "d", "</s>"], ["▁ab", "c", "</s>"], weights), tmp_path / "a.png", ModelConfig()
    )
    (figure,) = figures
    axes = figure.axes[0]
    assert [label.get_text() for label in axes.get_xticklabels()] == ["·ab", "·c", "d", "</s>"]
    assert [label.get_text() for label in axes.get_yticklabels()] == ["·ab", "c", "</s>"]
    assert axes.get_xlabel() == "source  (· starts a word)" and axes.get_ylabel() == "output"


@pytest.mark.parametrize(
    ("head", "fragment"), [("²", "--head ²"), ("1e3", "--head 1e3"), ("99", "--head 99")]
)
def test_plot_attention_head_must_be_a_head(
    trained_run: Path, tmp_path: Path, head: str, fragment: str
) -> None:
    result = run_cli(
        "plot-attention", str(trained_run), "--text", "a b", "--out", str(tmp_path / "a.png"), "--head", head
    )
    assert_one_line_error(result, fragment)
    assert not (tmp_path / "a.png").exists()


def test_plot_attention_of_a_text_too_long_to_read_is_refused_before_it_is_translated(
    trained_run: Path, corpus: Path, tmp_path: Path
) -> None:
    """Its labels could not be read (a 4,500 × 270 pixel figure): one line, before translating (no cut is
    reported), and no image."""
    words = " ".join((corpus / "test.src").read_text().split())
    text = " ".join([words] * (2000 // len(words.split()) + 1))
    out = tmp_path / "long.png"
    code, _, err = run_cli("plot-attention", str(trained_run), "--text", text, "--out", str(out))
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "a heatmap stays readable up to 120 a side: plot one sentence of it at a time" in err
    assert "truncated" not in err and not out.exists()


def test_plot_attention_of_an_empty_text_is_refused(trained_run: Path, tmp_path: Path) -> None:
    """A text of no subwords has no attention to draw: one line, and no image."""
    out = tmp_path / "empty.png"
    code, _, err = run_cli("plot-attention", str(trained_run), "--text", " ", "--out", str(out))
    assert code == 2 and err.strip() == "nmt: error: the text to translate is empty", err
    assert not out.exists()


def test_a_wide_heatmap_has_its_colour_bar_below_it_with_its_whole_label(
    figures: list[plt.Figure], tmp_path: Path
) -> None:
    """110 source subwords and 3 output ones: a figure far wider than high, whose colour bar beside it was too
    short for its label (cut at the figure's edge); below it, the label is whole and inside the figure."""
    source = [f"▁w{k}" for k in range(110)] + ["</s>"]
    weights = torch.softmax(torch.randn(1, 1, 3, len(source)), dim=-1)
    save_attention(drawn(source, ["▁a", "▁b", "</s>"], weights), tmp_path / "a.png", ModelConfig())
    (figure,) = figures
    figure.canvas.draw()
    bar = figure.axes[1]
    label = bar.xaxis.label
    top = float(weights.max())
    assert label.get_text() == f"attention weight (scale 0 to {top:.2f}, this figure's largest)"
    inside = figure.bbox
    box = label.get_window_extent()
    assert inside.x0 <= box.x0 and box.x1 <= inside.x1 and inside.y0 <= box.y0 and box.y1 <= inside.y1
