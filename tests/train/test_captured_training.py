"""The training step replayed from captured graphs, on a CPU: the recorder (nmt/device/capture.py) stands in
for CUDA graphs, so the host's side of `train.cuda_graphs` — shape keys, captures, replays into static
tensors, the capturable optimizer — runs for every model family, with and without alignment links,
multilingual and not, and must give what eager training gives. What only a GPU shows (kernels, autocast,
memory) is tests/test_gpu.py's."""

import contextlib
from pathlib import Path

import pytest
import torch

from nmt.data.batching import Batch
from nmt.device.capture import Recorder, emulating
from nmt.train.loop import Trainer
from tests.conftest import ROOT, make_trainer, prepared, updates

UPDATES = 4
STATIC = ["train.batch_tokens=600", "train.max_shapes=8", "train.static_shapes=true", "train.amp=false"]
STATIC += ["model.dropout=0.0", "train.final_report=false"]
FAMILIES = ["tiny-transformer.yaml", "tiny-rnn-bahdanau.yaml", "tiny-rnn-luong.yaml"]
GUIDED = [  # (config, full_context, null_slot)
    ("tiny-transformer.yaml", False, False),
    ("tiny-transformer.yaml", True, False),
    ("tiny-transformer.yaml", False, True),
    ("tiny-rnn-luong.yaml", False, False),
]


def guided(labelled: Path, full_context: bool = False, null_slot: bool = False) -> list[str]:
    return [
        f"train.alignment.links={labelled / 'train.links'}",
        f"train.alignment.full_context={full_context}",
        f"train.alignment.null_slot={null_slot}",
    ]


def eager_and_captured(config: Path, data: Path, tmp_path: Path, *sets: str, device: str = "cpu") -> Trainer:
    """A trainer of the run that made `UPDATES` updates from captured graphs, checked against the same
    updates made eagerly: the same losses and weights, every step captured once and replayed. On a CPU the
    recorder stands in for CUDA graphs; on a GPU (tests/test_gpu.py) they are real."""
    ready, overrides = prepared(config, data, tmp_path / "run", *STATIC, f"train.device={device}", *sets)
    eager = make_trainer(config, ready, tmp_path / "run", overrides, "train.cuda_graphs=false")
    expected = updates(eager, UPDATES)
    recorder = Recorder() if device == "cpu" else None
    with emulating(recorder) if recorder else contextlib.nullcontext():
        trainer = make_trainer(config, ready, tmp_path / "run", overrides, "train.cuda_graphs=true")
        got = updates(trainer, UPDATES)
    torch.testing.assert_close(torch.tensor(got), torch.tensor(expected), rtol=1e-3, atol=1e-3)
    for name, weight in eager.model.state_dict().items():
        torch.testing.assert_close(trainer.model.state_dict()[name], weight, rtol=1e-2, atol=1e-3)
    graphs = trainer.update.graphs
    assert graphs is not None and graphs.captured and graphs.update_graph is not None
    assert not graphs.eager_shapes and not graphs.eager_update
    if recorder:  # each shape and the update captured once, each update's steps replayed
        assert recorder.captures == len(graphs.captured) + 1 and recorder.replays >= 2 * UPDATES
    return trainer


@pytest.mark.parametrize("config", FAMILIES)
def test_captured_training_gives_the_eager_losses(config: str, corpus: Path, tmp_path: Path) -> None:
    """Batches without alignment links (the `links` field None) replay as captured."""
    eager_and_captured(ROOT / "configs" / config, corpus, tmp_path)


@pytest.mark.parametrize(("config", "full_context", "null_slot"), GUIDED)
def test_captured_guided_training_gives_the_eager_losses(
    config: str, full_context: bool, null_slot: bool, labelled: Path, tmp_path: Path
) -> None:
    """The links are part of each captured batch (and of its shape key); the alignment loss (with the null
    slot's links made on the device) is replayed."""
    sets = guided(labelled, full_context, null_slot)
    trainer = eager_and_captured(ROOT / "configs" / config, labelled, tmp_path, *sets)
    assert all(dict(key).get("links") for key in trainer.update.graphs.captured)  # type: ignore[union-attr]
    assert trainer.update.alignment_sum.item() > 0


@pytest.mark.parametrize("tags", ["encoder", "decoder"])
@pytest.mark.parametrize("back_translation", [0.0, 0.5])
def test_captured_multilingual_training_gives_the_eager_losses(
    tags: str, back_translation: float, three_languages: Path, tmp_path: Path
) -> None:
    """With online back-translation, its re-sourced batches keep their planned shapes and replay."""
    config, data = three_languages / "config.yaml", three_languages / "data"
    share = f"data.multilingual.back_translation.share={back_translation}"
    trainer = eager_and_captured(config, data, tmp_path, f"data.multilingual.tags={tags}", share)
    if back_translation:
        assert trainer.back_translation is not None and trainer.back_translation.take_counts()


def test_a_batch_without_links_has_a_shape_key(corpus: Path, tmp_path: Path) -> None:
    """The shape key of a captured step is built from the batch's tensors, those that are None left out (a
    key over every field raised AttributeError at the first captured update)."""
    config = ROOT / "configs" / "tiny-transformer.yaml"
    ready, overrides = prepared(config, corpus, tmp_path / "run", *STATIC, "train.device=cpu")
    with emulating(Recorder()):
        trainer = make_trainer(config, ready, tmp_path / "run", overrides, "train.cuda_graphs=true")
        (_, (batch, *_)) = next(trainer.stream.epoch(trainer.progress))
        assert batch.links is None
        graphs = trainer.update.graphs
        assert graphs is not None
        loss = graphs.micro(batch, batch.target_tokens())
    assert [name for name, _ in batch.shapes()] == ["src", "src_mask", "tgt_in", "tgt_out", "index"]
    assert torch.isfinite(loss).all() and batch.shapes() in graphs.captured


def test_a_step_that_reads_the_host_runs_eagerly_with_a_warning(
    corpus: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A training step with a host read inside (as a loss that asked `.item()` would) cannot be captured:
    it runs eagerly, said once."""
    config = ROOT / "configs" / "tiny-transformer.yaml"
    ready, overrides = prepared(config, corpus, tmp_path / "run", *STATIC, "train.device=cpu")
    with emulating(Recorder()):
        trainer = make_trainer(config, ready, tmp_path / "run", overrides, "train.cuda_graphs=true")
        graphs = trainer.update.graphs
        assert graphs is not None
        reading = graphs.micro_step

        def reads_the_host(batch: Batch, total_tokens: torch.Tensor) -> torch.Tensor:
            losses = reading(batch, total_tokens)
            return losses if losses.sum().item() >= 0 else -losses

        graphs.micro_step = reads_the_host
        losses = updates(trainer, 2)
    assert all(loss > 0 for loss in losses)
    assert graphs.eager_shapes and not graphs.captured
    assert "runs without a CUDA graph: capture failed (a captured step read a tensor" in caplog.text
