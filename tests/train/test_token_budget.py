"""`train.batch_tokens: auto`: the budget chosen from memory probes, the probe batch, and how a run keeps the
budget it chose (the GPU probing itself needs a GPU; here the probes are simulated)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from nmt.config.yaml_file import load_config
from nmt.data.batching import EncodedCorpus
from nmt.errors import ConfigError, UserError
from nmt.run.checkpoint_io import load_checkpoint
from nmt.train.command import train
from nmt.train.loss import sequence_loss
from nmt.train.token_budget import CPU_BATCH_TOKENS, MARGIN, ROUND_TO, choose_batch_tokens, worst_batch
from tests.conftest import ROOT, make_trainer, prepared
from tests.train.test_train import losses, tiny_config

GIB = 2**30


def linear_memory(fixed: int, per_token: int, out_of_memory_above: float = float("inf")) -> tuple:
    """A fake probe: peak bytes `fixed + per_token · tokens`, out of memory above a budget; and its calls."""
    calls: list[int] = []

    def probe(tokens: int) -> int | None:
        calls.append(tokens)
        return None if tokens > out_of_memory_above else fixed + per_token * tokens

    return probe, calls


def test_the_chosen_budget_fills_the_margin_in_a_few_probes() -> None:
    probe, calls = linear_memory(fixed=GIB, per_token=100_000)
    chosen = choose_batch_tokens(probe, capacity=10 * GIB, ceiling=10**6)
    best = (MARGIN * 10 * GIB - GIB) / 100_000  # the budget whose peak is exactly the margin
    assert chosen % ROUND_TO == 0 and best - ROUND_TO < chosen <= best
    assert len(calls) == 3  # two probes to fit the line, one to check its prediction


def test_it_backs_off_where_memory_grows_faster_than_predicted() -> None:
    probe, calls = linear_memory(fixed=GIB, per_token=100_000, out_of_memory_above=30_000)
    chosen = choose_batch_tokens(probe, capacity=10 * GIB, ceiling=10**6)
    assert 0.8 * 30_000 - ROUND_TO <= chosen <= 30_000
    assert probe(chosen) is not None and len(calls) <= 10


def test_a_small_gpu_gets_a_budget_below_the_first_probe() -> None:
    probe, _ = linear_memory(fixed=GIB, per_token=1_000_000)  # 2048 tokens need 3 GiB
    chosen = choose_batch_tokens(probe, capacity=2 * GIB, ceiling=10**6)
    assert ROUND_TO <= chosen < 2048 and probe(chosen) <= MARGIN * 2 * GIB


def test_the_budget_never_exceeds_the_ceiling() -> None:
    probe, _ = linear_memory(fixed=GIB, per_token=1_000)
    assert choose_batch_tokens(probe, capacity=80 * GIB, ceiling=51_200) == 51_200
    assert choose_batch_tokens(probe, capacity=80 * GIB, ceiling=1_024) == 1_024


def test_the_probe_batch_holds_the_longest_pairs_within_the_budget() -> None:
    corpus = EncodedCorpus.from_ids([[5] * n for n in range(1, 30)], [[6] * n for n in range(1, 30)])
    batch = worst_batch(corpus, 500, multiple=8)
    assert batch.src.size(1) == batch.tgt_in.size(1) == 32  # 29 words + eos, padded to a multiple of 8
    assert batch.src.numel() + batch.tgt_in.numel() <= 500 and batch.size == 500 // 64
    assert batch.index.tolist()[0] == 28


def saved_bytes(work: Callable[[], object]) -> int:
    """Bytes of the tensors `work`'s forward passes keep for their backward: a CPU proxy of activation
    memory, what the budget's probes measure on a GPU."""
    total = 0

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        nonlocal total
        total += tensor.numel() * tensor.element_size()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        work()
    return total


def test_the_probe_runs_the_training_step_guided_alignment_included(labelled: Path, tmp_path: Path) -> None:
    """A guided run with full context keeps more for its backward than a plain forward pass (+24% here): the
    probe runs the training step itself on a batch with its links, and drops its gradients."""
    config = ROOT / "configs" / "tiny-transformer.yaml"
    links = [f"train.alignment.links={labelled / 'train.links'}", "train.alignment.full_context=true"]
    ready, overrides = prepared(config, labelled, tmp_path / "run", "train.device=cpu", *links)
    trainer = make_trainer(config, ready, tmp_path / "run", overrides)
    batch, model = worst_batch(ready.train, 600, multiple=1), trainer.model
    assert batch.links is not None and batch.links.any()
    probed = saved_bytes(lambda: trainer.update.probe(batch))
    assert all(p.grad is None for p in model.parameters())
    trained = saved_bytes(lambda: trainer.update._micro_step(batch, batch.target_tokens()))
    logits = lambda: model(batch.src, batch.src_mask, batch.tgt_in).logits  # noqa: E731
    plain = saved_bytes(lambda: sequence_loss(logits(), batch.tgt_out, 0.0).backward())
    assert probed == trained > plain


def test_config_accepts_auto_or_a_positive_int() -> None:
    assert load_config(None, ["train.batch_tokens=auto"]).train.batch_tokens == "auto"
    with pytest.raises(ConfigError, match=r"train.batch_tokens='big'; expected int or 'auto'"):
        load_config(None, ["train.batch_tokens=big"])
    with pytest.raises(ConfigError, match="must be at least 1"):
        load_config(None, ["train.batch_tokens=0"])


def test_auto_without_a_gpu_trains_with_the_cpu_budget_and_keeps_it_on_resume(
    corpus: Path, tmp_path: Path
) -> None:
    train(tiny_config(corpus, max_steps=3, batch_tokens="auto"), tmp_path / "auto")
    last = load_checkpoint(tmp_path / "auto" / "last.pt")
    assert last["progress"]["batch_tokens"] == CPU_BATCH_TOKENS  # the chosen budget lives in the progress
    assert last["config"]["train"]["batch_tokens"] == "auto"  # the config is never changed
    assert "batch_tokens: auto" in (tmp_path / "auto" / "config.yaml").read_text()  # as the user wrote it

    train(tiny_config(corpus, max_steps=6), tmp_path / "straight")  # a budget of 600
    train(tiny_config(corpus, max_steps=3), tmp_path / "resumed")
    train(tiny_config(corpus, max_steps=6, batch_tokens="auto"), tmp_path / "resumed", resume=True)
    assert losses(tmp_path / "resumed") == losses(tmp_path / "straight")  # resumed with the run's 600


def test_resuming_with_another_budget_is_refused(corpus: Path, tmp_path: Path) -> None:
    """The saved data position belongs to the budget the run trained with."""
    train(tiny_config(corpus, max_steps=3), tmp_path / "run")
    with pytest.raises(UserError, match=r"train.batch_tokens=800 differs from the 600 the run trained with"):
        train(tiny_config(corpus, max_steps=6, batch_tokens=800), tmp_path / "run", resume=True)
