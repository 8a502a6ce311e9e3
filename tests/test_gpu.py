"""What only a CUDA GPU can check (skipped without one). The host's side of every GPU-only branch runs on a
CPU too, under the recorder that stands in for CUDA graphs (tests/train/test_captured_training.py,
tests/decode/test_captured_search.py); here the same checks run on real graphs, and with what the recorder
cannot see: kernels, bf16 autocast, GPU memory, torch.compile."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from nmt.align.forced_attention import teacher_forced_attention
from nmt.data.batching import Batch
from nmt.decode.aligner import teacher_forced
from nmt.decode.search import SearchOptions, search
from nmt.decode.step_graphs import StepGraphs
from nmt.decode.trained_run import load_run
from nmt.decode.translator import TorchTranslator
from nmt.device.choice import autocast
from nmt.train.loss import sequence_loss
from nmt.train.token_budget import ROUND_TO, peak_memory, worst_batch
from nmt.train.validation import validation_scores
from tests.conftest import ROOT, make_trainer, prepared, updates
from tests.decode.test_captured_search import CASES, Case, Ending, model_of, same, sources
from tests.decode.test_translation_alignments import by_hand
from tests.train.test_captured_training import FAMILIES, GUIDED, eager_and_captured, guided

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

CUDA = torch.device("cuda")
TINY = ROOT / "configs" / "tiny-transformer.yaml"


# --- training --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("config", FAMILIES)
def test_training_from_cuda_graphs_gives_the_eager_losses(config: str, corpus: Path, tmp_path: Path) -> None:
    """Without dropout and in float32 the captured step computes what the eager step computes (the RNNs'
    pack-free encoder included)."""
    eager_and_captured(ROOT / "configs" / config, corpus, tmp_path, device="cuda")


@pytest.mark.parametrize(("config", "full_context", "null_slot"), GUIDED)
def test_guided_training_from_cuda_graphs_gives_the_eager_losses(
    config: str, full_context: bool, null_slot: bool, labelled: Path, tmp_path: Path
) -> None:
    sets = guided(labelled, full_context, null_slot)
    trainer = eager_and_captured(ROOT / "configs" / config, labelled, tmp_path, *sets, device="cuda")
    assert trainer.update.alignment_sum.item() > 0


@pytest.mark.parametrize("tags", ["encoder", "decoder"])
@pytest.mark.parametrize("back_translation", [0.0, 0.5])
def test_multilingual_training_from_cuda_graphs_gives_the_eager_losses(
    tags: str, back_translation: float, three_languages: Path, tmp_path: Path
) -> None:
    """With online back-translation, the search between captured updates leaves their graphs as they were."""
    config, data = three_languages / "config.yaml", three_languages / "data"
    share = f"data.multilingual.back_translation.share={back_translation}"
    eager_and_captured(config, data, tmp_path, f"data.multilingual.tags={tags}", share, device="cuda")


def test_training_from_cuda_graphs_learns_with_dropout_and_bf16(corpus: Path, tmp_path: Path) -> None:
    sets = ["train.device=cuda", "train.batch_tokens=600", "train.cuda_graphs=true", "train.amp=true"]
    ready, overrides = prepared(TINY, corpus, tmp_path / "run", *sets, "model.dropout=0.1")
    trainer = make_trainer(TINY, ready, tmp_path / "run", overrides)
    seen = updates(trainer, 80)
    assert trainer.update.graphs is not None and trainer.update.graphs.captured
    assert all(torch.isfinite(torch.tensor(seen)))
    assert sum(seen[-10:]) < 0.7 * sum(seen[:10])


def test_a_resampled_run_replays_planned_graphs_only(
    three_languages: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Two epochs of a multilingual run whose epochs draw other pairs: every batch fits a planned shape,
    each captured once, none eager."""
    config = three_languages / "config.yaml"
    sets = [
        "train.device=cuda",
        "train.cuda_graphs=true",
        "train.max_shapes=8",
        "data.multilingual.temperature=2.0",
    ]
    ready, overrides = prepared(config, three_languages / "data", tmp_path / "run", *sets)
    trainer = make_trainer(config, ready, tmp_path / "run", overrides)
    for _ in trainer.stream.updates(trainer.progress, epochs=2):
        pass
    for batches in trainer.stream.updates(trainer.progress, epochs=2):
        trainer.train_step(batches)
    graphs = trainer.update.graphs
    assert graphs is not None and 0 < len(graphs.captured) <= 8 and not graphs.eager_shapes
    assert "fits no planned static shape" not in caplog.text


def test_compiled_training_learns_on_static_shapes(corpus: Path, tmp_path: Path) -> None:
    """Each planned shape compiles once (two here: a compilation takes tens of seconds)."""
    sets = ["train.device=cuda", "train.batch_tokens=600", "train.compile=true", "train.max_shapes=2"]
    ready, overrides = prepared(TINY, corpus, tmp_path / "run", *sets)
    trainer = make_trainer(TINY, ready, tmp_path / "run", overrides)
    seen = updates(trainer, 16)
    compiled = trainer.update.compile_log
    assert compiled is not None and 0 < len(compiled.seen) <= 2 and trainer.update.static_shapes
    assert all(torch.isfinite(torch.tensor(seen))) and sum(seen[-4:]) < sum(seen[:4])


def test_batch_tokens_auto_measures_the_guided_step(labelled: Path, tmp_path: Path) -> None:
    """With guided alignment and full context the step needs more GPU memory than a plain forward pass:
    the probes measure the step itself, and the chosen budget's worst batch trains."""
    sets = ["train.device=cuda", "train.batch_tokens=auto", "train.cuda_graphs=true", *guided(labelled, True)]
    ready, overrides = prepared(TINY, labelled, tmp_path / "run", *sets)
    trainer = make_trainer(TINY, ready, tmp_path / "run", overrides)
    batch = worst_batch(ready.train, 4096, multiple=1)
    model = trainer.model

    def plain(batch: Batch) -> None:
        with autocast(CUDA):
            sequence_loss(
                model(batch.src, batch.src_mask, batch.tgt_in).logits, batch.tgt_out, 0.0
            ).backward()
        model.zero_grad(set_to_none=True)

    guided_peak, plain_peak = peak_memory(trainer.update.probe, batch, CUDA), peak_memory(plain, batch, CUDA)
    assert guided_peak is not None and plain_peak is not None and guided_peak > plain_peak
    trainer.fit_batch_tokens()
    chosen = trainer.progress.batch_tokens
    assert chosen % ROUND_TO == 0 and chosen >= ROUND_TO
    assert updates(trainer, 3)  # the chosen budget trains from captured graphs


def test_validation_replays_the_graphs_of_the_first(corpus: Path, tmp_path: Path) -> None:
    """A second validation of the same model captures no decoding step again."""
    sets = ["train.device=cuda", "train.batch_tokens=600", "train.eval_max_sentences=100"]
    ready, overrides = prepared(TINY, corpus, tmp_path / "run", *sets, "search.cuda_graphs=true")
    trainer = make_trainer(TINY, ready, tmp_path / "run", overrides)
    updates(trainer, 60)
    first = validation_scores(trainer.model, trainer.data, trainer.cfg, CUDA)
    graphs = getattr(trainer.model, "decoding_graphs", None)
    assert isinstance(graphs, StepGraphs) and graphs.graphs
    captured = set(graphs.graphs)
    assert validation_scores(trainer.model, trainer.data, trainer.cfg, CUDA) == first
    assert set(graphs.graphs) == captured


# --- decoding --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bf16", [False, True], ids=["fp32", "bf16"])
@pytest.mark.parametrize("family", ["transformer", "rnn-bahdanau", "rnn-luong", "ensemble"])
@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_decoding_from_cuda_graphs_gives_the_eager_hypotheses(family: str, case: Case, bf16: bool) -> None:
    """Every rule and option, every model family and an ensemble: steps replayed from CUDA graphs give the
    eager steps' hypotheses bit for bit, and a second search captures nothing."""
    model, (src, mask) = Ending(model_of(family)).to(CUDA), (t.to(CUDA) for t in sources())
    eager_options = SearchOptions(**{**vars(case.options), "cuda_graphs": False})
    with torch.inference_mode(), autocast(CUDA, bf16):
        eager = search(model, src, mask, case.rule(), eager_options)
        replayed = search(model, src, mask, case.rule(), case.options)
        graphs = getattr(model, "decoding_graphs", None)
        captured = set(graphs.graphs) if isinstance(graphs, StepGraphs) else set()
        again = search(model, src, mask, case.rule(), case.options)
    same(replayed, eager)
    same(again, eager)
    assert bool(captured) == case.rule().graph_safe
    if captured:
        assert isinstance(graphs, StepGraphs) and set(graphs.graphs) == captured and not graphs.eager


@pytest.fixture(scope="module")
def gpu_translator(trained_run: Path) -> TorchTranslator:
    return TorchTranslator.of_run(load_run(trained_run, CUDA)).with_search(batch_tokens=2048)


@pytest.mark.parametrize(
    "search_settings",
    [
        {"beam_size": 1},
        {"beam_size": 5, "nbest": 3},
        {"sampling": True, "nbest": 2, "seed": 7, "top_k": 10},
        {"beam_size": 6, "diverse_groups": 3, "nbest": 3},
    ],
    ids=["greedy", "beam", "sampling", "diverse"],
)
def test_the_translator_decodes_in_bf16_from_cuda_graphs_as_eagerly(
    gpu_translator: TorchTranslator, corpus: Path, search_settings: dict
) -> None:
    """Through the Translator (bf16 autocast on the GPU), with alignments and attention."""
    lines = (corpus / "test.src").read_text().splitlines()[:100]
    graphs, eager = (gpu_translator.with_search(cuda_graphs=on, **search_settings) for on in (True, False))
    sources = graphs.encode(lines)
    for attention, alignments in ((False, True), (True, False)):
        found = graphs.search(sources, attention=attention, alignments=alignments)
        expected = eager.search(sources, attention=attention, alignments=alignments)
        same(found, expected)
    assert any(h.tokens for hyps in found for h in hyps)


def test_alignments_on_the_gpu_are_the_cpu_s(trained_run: Path, corpus: Path) -> None:
    """`nmt align` reads attention computed in float32 without TF32 on the GPU: the CPU's, to rounding."""
    texts = (
        (corpus / "test.src").read_text().splitlines()[:50],
        (corpus / "test.tgt").read_text().splitlines()[:50],
    )
    found = {}
    for device in (CUDA, torch.device("cpu")):
        translator = TorchTranslator.of_run(load_run(trained_run, device))
        sources, targets = (
            [w.ids for w in translator.encode_words(t, side)]
            for t, side in zip(texts, ("source", "target"), strict=True)
        )
        found[device.type] = teacher_forced(translator, sources, targets)
    for gpu, cpu in zip(found["cuda"], found["cpu"], strict=True):
        torch.testing.assert_close(gpu, cpu, rtol=1e-4, atol=1e-5)


def test_a_guided_runs_translations_read_its_supervised_heads_on_the_gpu(
    guided_run: Path, labelled: Path
) -> None:
    """Search in bf16 (from CUDA graphs where they apply), then the float32 teacher-forced pass whose layer 0,
    heads 0 and 1, Shift-Att row and null slot give each hypothesis its alignment."""
    translator = TorchTranslator.of_run(load_run(guided_run, CUDA)).with_search(beam_size=3, nbest=2)
    sources = translator.encode((labelled / "valid.src").read_text().splitlines()[:20])
    found = translator.search(sources, alignments=True)
    for src, hyps in zip(sources, found, strict=True):
        forced = teacher_forced_attention(translator.model, [src] * len(hyps), [h.tokens for h in hyps])
        for hypothesis, paid in zip(hyps, forced, strict=True):
            assert hypothesis.alignment == by_hand(paid, len(hypothesis.tokens), len(src))


def test_a_plain_runs_translations_read_its_penultimate_layer_on_the_gpu(
    trained_run: Path, corpus: Path
) -> None:
    """Search in bf16 (from CUDA graphs where they apply), then the float32 teacher-forced pass whose first
    (penultimate) layer's mean of heads, by argmax, gives each hypothesis its alignment."""
    translator = TorchTranslator.of_run(load_run(trained_run, CUDA)).with_search(beam_size=3, nbest=2)
    sources = translator.encode((corpus / "test.src").read_text().splitlines()[:20])
    found = translator.search(sources, alignments=True)
    for src, hyps in zip(sources, found, strict=True):
        forced = teacher_forced_attention(translator.model, [src] * len(hyps), [h.tokens for h in hyps])
        for hypothesis, paid in zip(hyps, forced, strict=True):
            first = paid[0].mean(dim=0)[: len(hypothesis.tokens), : len(src)].argmax(dim=1).tolist()
            assert hypothesis.alignment == first
