"""An imported MarianMT model computes what transformers computes from the same directory: teacher-forced
log-probabilities to 1e-4, and `nmt translate` equals `generate` on at least 99% of lines greedy and 97% at
beam 4. The models are built with transformers' own MarianConfig, MarianMTModel and MarianTokenizer (one per
activation, shared and separate vocabularies, tied and untied output, each with a non-zero final logits
bias); transformers scores a finished beam by its summed log-probability over (tokens + eos) **
length_penalty, and so does the imported run (search.length_normalization=power)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from nmt.data.batching import collate
from nmt.data.special_tokens import BOS
from nmt.decode.exported import output_limit
from nmt.decode.loading import load_trained
from nmt.decode.trained_run import TrainedRun
from tests.conftest import run_cli
from tests.importing.marian_models import (
    SOURCE_WORDS,
    TARGET_WORDS,
    Variant,
    sentences,
    transformers,
    write_marian,
)

# The slow layer: each variant is a model trained for the test (8 s), its translations generated twice; the
# fast layer imports one Marian model, fine-tunes it and exports it back to transformers' equal logits
# (tests/importing/test_imported_run.py).
pytestmark = pytest.mark.slow
VARIANTS = [
    Variant("swish"),
    Variant("gelu", separate=True, seed=1),
    Variant("relu", tied=False, scale=False, seed=2),
]
LINES = sentences(100, SOURCE_WORDS, 11)


@pytest.fixture(scope="module", params=VARIANTS, ids=["swish", "gelu", "relu"])
def imported(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A Marian model directory and the run `nmt import` made of it."""
    root = tmp_path_factory.mktemp(request.param.name)
    model = write_marian(root / "marian", request.param)
    code, _, err = run_cli("-q", "import", str(model), "--out", str(root / "run"))
    assert code == 0, err
    return model, root / "run"


def hf_ids(model: Path, run: Path, name: str) -> list[int]:
    """transformers' id of each of the run's ids (vocabulary file `name`)."""
    theirs = json.loads((model / name).read_text(encoding="utf-8"))
    ours = json.loads((run / name).read_text(encoding="utf-8"))
    by_id = {i: piece for piece, i in ours.items()}
    return [theirs[by_id[i]] for i in range(len(ours))]


def test_teacher_forced_log_probs_equal_transformers(imported: tuple[Path, Path]) -> None:
    model_dir, run_dir = imported
    hf = transformers.MarianMTModel.from_pretrained(model_dir).eval()
    run = load_trained([run_dir], torch.device("cpu"), None)
    assert isinstance(run, TrainedRun)
    separate = (model_dir / "target_vocab.json").exists()
    src_map = torch.tensor(hf_ids(model_dir, run_dir, "vocab.json"))
    tgt_map = torch.tensor(hf_ids(model_dir, run_dir, "target_vocab.json" if separate else "vocab.json"))
    sources = run.tokenizers.src.encode(LINES[:20])
    targets = run.tokenizers.tgt.encode(sentences(20, TARGET_WORDS, 12))
    batch = collate(sources, targets, list(range(len(sources))))
    with torch.no_grad():
        ours = run.model(batch.src, batch.src_mask, batch.tgt_in).logits.log_softmax(-1)
        hf_in = tgt_map[batch.tgt_in]
        hf_in[:, 0] = hf.config.decoder_start_token_id
        theirs = hf(
            input_ids=src_map[batch.src], attention_mask=batch.src != 0, decoder_input_ids=hf_in
        ).logits.log_softmax(-1)[..., tgt_map]  # transformers' logits in our id order
    assert (batch.tgt_in[:, 0] == BOS).all()  # our batches start with bos; the model reads pad there
    kept = batch.tgt_out != run.tokenizers.pad
    torch.testing.assert_close(ours[kept], theirs[kept], atol=1e-4, rtol=0)


@pytest.mark.parametrize("beams", [1, 4])
def test_translate_equals_generate(imported: tuple[Path, Path], beams: int, tmp_path: Path) -> None:
    model_dir, run_dir = imported
    hf = transformers.MarianMTModel.from_pretrained(model_dir).eval()
    tokenizer = transformers.MarianTokenizer.from_pretrained(model_dir)
    source = tmp_path / "source.txt"
    source.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    code, out, err = run_cli("-q", "translate", str(run_dir), "-i", str(source), "--beam-size", str(beams))
    assert code == 0, err
    ours = out.splitlines()
    run = load_trained([run_dir], torch.device("cpu"), None)
    theirs = []
    for line, ids in zip(LINES, run.tokenizers.src.encode(LINES), strict=True):
        limit = output_limit(len(ids), run.cfg.search)
        with torch.no_grad():
            found = hf.generate(
                **tokenizer([line], return_tensors="pt"), num_beams=beams, max_new_tokens=limit + 1
            )
        theirs.append(tokenizer.decode(found[0], skip_special_tokens=True))
    equal = sum(a == b for a, b in zip(ours, theirs, strict=True)) / len(LINES)
    assert equal >= (0.99 if beams == 1 else 0.97), [
        (a, b) for a, b in zip(ours, theirs, strict=True) if a != b
    ][:3]
    assert sum(len(line.split()) for line in ours) > len(LINES)  # translations, not empty lines


@pytest.mark.parametrize("beams", [1, 4])
def test_the_ctranslate2_export_translates_as_torch_does(
    imported: tuple[Path, Path], beams: int, tmp_path: Path
) -> None:
    """nmt's CTranslate2 export of the imported run (activation, unscaled embeddings, output bias, pad as the
    decoder start, CTranslate2's own length ** alpha scoring) writes what the torch engine writes."""
    pytest.importorskip("ctranslate2")
    _, run_dir = imported
    code, _, err = run_cli("-q", "export", str(run_dir), str(tmp_path / "ct2"))
    assert code == 0, err
    source = tmp_path / "source.txt"
    source.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    outputs = []
    for model in (run_dir, tmp_path / "ct2"):
        code, out, err = run_cli("-q", "translate", str(model), "-i", str(source), "--beam-size", str(beams))
        assert code == 0, err
        outputs.append(out.splitlines())
    equal = sum(a == b for a, b in zip(*outputs, strict=True)) / len(LINES)
    assert equal >= (0.99 if beams == 1 else 0.97), [(a, b) for a, b in zip(*outputs, strict=True) if a != b][
        :3
    ]
