"""What only a CUDA GPU can check (skipped without one): the training step and the decoder replayed from CUDA
graphs give the results of eager execution."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from nmt.config.schema import replace
from nmt.config.sections import SearchConfig
from nmt.config.yaml_file import load_config
from nmt.data.batching import collate
from nmt.data.prepare import prepare_data
from nmt.decode.rules import BeamSearch, Greedy
from nmt.decode.search import search
from nmt.decode.translator import search_options
from nmt.run.directory import RunDir
from nmt.train.loop import Trainer
from tests.conftest import ROOT

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

FAMILIES = ["tiny-transformer.yaml", "tiny-rnn-bahdanau.yaml", "tiny-rnn-luong.yaml"]


def cuda_trainer(
    corpus: Path, tmp_path: Path, config: str, model: dict | None = None, **train: object
) -> Trainer:
    """A trainer of the tiny `config` on the GPU, with `model` and `train` overriding its sections."""
    cfg = load_config(ROOT / "configs" / config, [f"data.dir={corpus}"])
    settings = {"device": "cuda", "batch_tokens": 600, "max_shapes": 8, "final_report": False} | train
    cfg = replace(cfg, model=model or {}, train=settings)
    run_dir = tmp_path / f"run-{len(list(tmp_path.iterdir()))}"
    run_dir.mkdir()
    data = prepare_data(cfg, run_dir, reuse_tokenizers=False)
    return Trainer(cfg, RunDir(run_dir), data, torch.device("cuda"))


def losses(trainer: Trainer, updates: int) -> list[float]:
    """The summed loss of each of the next `updates` updates of the epoch."""
    out = []
    for _, (_, batches) in zip(range(updates), trainer.stream.epoch(trainer.progress), strict=False):
        loss, _ = trainer.train_step(batches)
        out.append(loss.item())
    return out


@pytest.mark.parametrize("config", FAMILIES)
def test_training_from_cuda_graphs_gives_the_eager_losses(corpus: Path, tmp_path: Path, config: str) -> None:
    """Without dropout and in float32 the captured step computes what the eager step computes (the RNNs'
    pack-free encoder included)."""
    settings = {"static_shapes": True, "amp": False, "model": {"dropout": 0.0}}
    eager = cuda_trainer(corpus, tmp_path, config, cuda_graphs=False, **settings)
    graphed = cuda_trainer(corpus, tmp_path, config, cuda_graphs=True, **settings)
    expected, got = losses(eager, 12), losses(graphed, 12)
    assert (
        graphed.update.graphs is not None
        and graphed.update.graphs.captured
        and graphed.update.graphs.update_graph is not None
    )
    torch.testing.assert_close(torch.tensor(got), torch.tensor(expected), rtol=1e-3, atol=1e-3)
    for name, weight in eager.model.state_dict().items():
        torch.testing.assert_close(graphed.model.state_dict()[name], weight, rtol=1e-2, atol=1e-4)


def test_training_from_cuda_graphs_learns_with_dropout_and_bf16(corpus: Path, tmp_path: Path) -> None:
    trainer = cuda_trainer(corpus, tmp_path, "tiny-transformer.yaml", cuda_graphs=True, amp=True)
    seen = losses(trainer, 80)
    assert trainer.update.graphs is not None and trainer.update.graphs.captured
    assert all(torch.isfinite(torch.tensor(seen)))
    assert sum(seen[-10:]) < 0.7 * sum(seen[:10])


@pytest.mark.parametrize("config", FAMILIES)
def test_decoding_from_cuda_graphs_gives_the_eager_translations(
    corpus: Path, tmp_path: Path, config: str
) -> None:
    trainer = cuda_trainer(corpus, tmp_path, config, amp=False)
    losses(trainer, 40)  # a model that has learnt something: hypotheses of different lengths
    model = trainer.model.eval()
    sources = trainer.data.tokenizers.src.encode(trainer.data.valid.src[:60])
    batch = collate(sources, [[] for _ in sources], range(len(sources))).to(model.device)
    for rule in (Greedy(), BeamSearch(5)):
        eager, graphs = (search_options(settings(rule.width, graphs)) for graphs in (False, True))
        assert search(model, batch.src, batch.src_mask, rule, graphs) == search(
            model, batch.src, batch.src_mask, rule, eager
        )


def settings(beam: int, cuda_graphs: bool) -> SearchConfig:
    return SearchConfig(
        beam_size=beam, length_penalty=1.0, max_len_a=1.5, max_len_b=5, cuda_graphs=cuda_graphs
    )
