"""Static batch shapes: few buckets that hold every batch of every epoch, and padding that changes nothing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from nmt.config.schema import replace
from nmt.config.yaml_file import load_config
from nmt.data.batching import EncodedCorpus, collate, iterate_batches, token_budget_groups
from nmt.data.buckets import Buckets, batch_shapes, pad_batch, padded_tokens, plan_buckets
from nmt.data.prepare import prepare_data
from nmt.data.special_tokens import BOS, EOS, PAD
from nmt.models.build import build_model
from nmt.models.config import ModelConfig, RNNConfig, TransformerConfig
from nmt.train.loop import Trainer
from nmt.train.loss import sequence_loss
from tests.conftest import ROOT


def random_corpus(size: int, seed: int) -> EncodedCorpus:
    """Pairs whose target length follows the source length loosely (1..60 tokens), as in translation."""
    rng = np.random.default_rng(seed)
    src_len = rng.integers(1, 50, size)
    tgt_len = np.clip(src_len + rng.integers(-5, 11, size), 1, 60)
    return EncodedCorpus.from_ids([[5] * int(n) for n in src_len], [[6] * int(n) for n in tgt_len])


def shapes_of(corpus: EncodedCorpus, batch_tokens: int, seed: int, multiple: int) -> np.ndarray:
    groups = token_budget_groups(corpus, batch_tokens, seed, multiple)
    return batch_shapes(groups, *corpus.lengths(), multiple)


@pytest.mark.parametrize("multiple", [1, 8])
def test_every_batch_of_every_epoch_fits_a_few_buckets(multiple: int) -> None:
    corpus = random_corpus(3000, seed=0)
    planned = shapes_of(corpus, 2000, seed=0, multiple=multiple)
    buckets = Buckets.plan(planned, max_shapes=12)
    assert len(buckets) <= 12 < len(np.unique(planned, axis=0))
    for seed in (0, 1, 2):  # every epoch's grouping has another seed
        groups = token_budget_groups(corpus, 2000, seed, multiple)
        for batch in iterate_batches(corpus, groups, multiple):
            shape = (batch.size, batch.src.size(1), batch.tgt_in.size(1))
            bucket = buckets.fit(shape)
            assert bucket is not None and all(x <= y for x, y in zip(shape, bucket, strict=True)), shape
    padded = sum(padded_tokens(np.array(buckets.fit(tuple(s)))) for s in planned)
    assert padded < 1.5 * padded_tokens(planned).sum()  # what the buckets add is a fraction, not a multiple


def test_few_distinct_shapes_are_kept_exactly() -> None:
    shapes = np.array([[8, 10, 12], [4, 20, 24], [8, 10, 12], [2, 40, 40]])
    plan = plan_buckets(shapes, max_shapes=3)
    assert sorted(map(tuple, plan.tolist())) == sorted({tuple(s) for s in shapes.tolist()})
    merged = plan_buckets(shapes, max_shapes=1)
    assert merged.tolist() == [[8, 40, 40]]


def test_many_distinct_shapes_are_planned_quickly_and_covered() -> None:
    rng = np.random.default_rng(1)
    shapes = np.column_stack(
        [rng.integers(1, 4000, 3000), rng.integers(1, 200, 3000), rng.integers(1, 200, 3000)]
    )
    buckets = Buckets.plan(shapes, max_shapes=24)
    assert len(buckets) <= 24 and all(buckets.fit(tuple(s)) is not None for s in shapes.tolist())


def test_padding_rows_are_empty_pairs() -> None:
    batch = collate([np.array([7, 8]), np.array([9])], [np.array([10]), np.array([11, 12])], [4, 5])
    padded = pad_batch(batch, (4, 5, 6))
    empty = [EOS, PAD, PAD, PAD, PAD]
    assert padded.src.tolist() == [[7, 8, EOS, PAD, PAD], [9, EOS, PAD, PAD, PAD], empty, empty]
    assert padded.tgt_in[:, 0].tolist() == [BOS] * 4 and padded.tgt_in[2:, 1:].eq(PAD).all()
    assert padded.tgt_out[2:].eq(PAD).all() and padded.target_tokens() == batch.target_tokens()
    assert padded.src_mask.tolist() == (padded.src != PAD).unsqueeze(1).tolist()
    assert padded.index.tolist() == [4, 5, -1, -1]
    assert padded.links is None


def test_padding_keeps_the_links_and_adds_none() -> None:
    links = [np.array([0, 0, 1, 0]), np.array([0, 1])]  # (source, target) positions: 0-0 1-0; 0-1
    batch = collate(
        [np.array([7, 8]), np.array([9])], [np.array([10]), np.array([11, 12])], [4, 5], links=links
    )
    padded = pad_batch(batch, (4, 5, 6))
    assert padded.links is not None and padded.links.shape == (4, 6, 5)  # (rows, target, source)
    assert padded.links.nonzero().tolist() == [[0, 0, 0], [0, 0, 1], [1, 1, 0]]  # (row, target, source)


MODELS = [
    {"type": "transformer", "transformer": TransformerConfig(d_model=16, heads=2, ff_dim=32)},
    {"type": "rnn-bahdanau", "rnn": RNNConfig(embedding_size=8, hidden_size=6)},
    {"type": "rnn-luong", "rnn": RNNConfig(embedding_size=8, hidden_size=6, cell="lstm")},
    {"type": "rnn-luong", "rnn": RNNConfig(embedding_size=8, hidden_size=6, input_feeding=False)},
]


@pytest.mark.parametrize(
    "fields", MODELS, ids=lambda f: f"{f['type']}-{getattr(f.get('rnn'), 'cell', 'gru')}"
)
def test_padding_to_a_bucket_changes_neither_loss_nor_gradients(fields: dict) -> None:
    torch.manual_seed(0)
    cfg = ModelConfig(encoder_layers=2, decoder_layers=2, dropout=0.0, **fields)
    model = build_model(cfg, 20, 20, joint_vocab=True, pad=PAD)
    rng = np.random.default_rng(0)
    src = [rng.integers(4, 20, n) for n in (5, 2, 7)]
    tgt = [rng.integers(4, 20, n) for n in (3, 6, 4)]
    batch = collate(src, tgt, [0, 1, 2])

    def loss_and_grads(b: object) -> tuple[torch.Tensor, list[torch.Tensor]]:
        model.zero_grad()
        loss = sequence_loss(model(b.src, b.src_mask, b.tgt_in).logits, b.tgt_out, 0.1)
        loss.backward()
        return loss.detach(), [p.grad.clone() for p in model.parameters()]

    loss, grads = loss_and_grads(batch)
    padded_loss, padded_grads = loss_and_grads(pad_batch(batch, (6, 11, 12)))
    torch.testing.assert_close(padded_loss, loss, rtol=1e-5, atol=1e-5)
    for grad, padded in zip(grads, padded_grads, strict=True):
        torch.testing.assert_close(padded, grad, rtol=1e-4, atol=1e-6)


def make_trainer(corpus: Path, tmp_path: Path, static: bool) -> Trainer:
    cfg = load_config(ROOT / "configs" / "tiny-transformer.yaml", [f"data.dir={corpus}"])
    model = {
        "encoder_layers": 1,
        "decoder_layers": 1,
        "transformer": {"d_model": 32, "heads": 2, "ff_dim": 64},
    }
    train = {
        "device": "cpu",
        "batch_tokens": 600,
        "static_shapes": static,
        "max_shapes": 6,
        "final_report": False,
    }
    cfg = replace(cfg, model=model, tokenizer={"vocab_size": 200}, train=train)
    run_dir = tmp_path / f"run-{static}"
    run_dir.mkdir()
    return Trainer(cfg, run_dir, prepare_data(cfg, run_dir, reuse_tokenizers=False), torch.device("cpu"))


def test_training_on_static_shapes_gives_the_losses_of_unpadded_batches(corpus: Path, tmp_path: Path) -> None:
    """The CPU run of the path CUDA graphs take: batches padded to planned shapes, same losses."""
    static, dynamic = make_trainer(corpus, tmp_path, True), make_trainer(corpus, tmp_path, False)
    static_updates, dynamic_updates = (
        static.stream.epoch(static.progress),
        dynamic.stream.epoch(dynamic.progress),
    )
    shapes, grown = set(), 0
    for _ in range(4):
        (_, padded), (_, plain) = next(static_updates), next(dynamic_updates)
        shapes |= {(b.size, b.src.size(1), b.tgt_in.size(1)) for b in padded}
        grown += sum(
            p.src.numel() + p.tgt_in.numel() > q.src.numel() + q.tgt_in.numel()
            for p, q in zip(padded, plain, strict=True)
        )
        loss, tokens = static.train_step(padded)
        expected_loss, expected_tokens = dynamic.train_step(plain)
        assert tokens == expected_tokens
        torch.testing.assert_close(loss, expected_loss, rtol=1e-4, atol=1e-4)
    assert (
        shapes <= set(static.stream.bucket_plan(static.progress.batch_tokens).shapes)
        and len(static.stream.bucket_plan(static.progress.batch_tokens)) <= 6
        and grown
    )
    for name, weight in dynamic.model.state_dict().items():
        torch.testing.assert_close(static.model.state_dict()[name], weight, rtol=1e-3, atol=1e-5)


def test_a_group_that_fits_no_bucket_is_cut_into_groups_that_do() -> None:
    buckets = Buckets(np.array([[8, 4, 4], [4, 8, 8], [2, 12, 12]]))
    group = np.arange(11)
    assert [len(g) for g in buckets.fitting(group, (11, 6, 5))] == [4, 4, 3]  # the 4×8×8 bucket's rows
    assert [len(g) for g in buckets.fitting(group[:8], (8, 3, 4))] == [8]  # fits as it is
    assert [len(g) for g in buckets.fitting(group, (11, 20, 5))] == [11]  # none is long enough: left whole
    assert np.concatenate(buckets.fitting(group, (11, 6, 5))).tolist() == group.tolist()
