"""The markers of a run trained with terminology annotation are source-only pieces: search never outputs them,
however much the model prefers them, on either engine."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from nmt.decode.loading import load_trained
from nmt.decode.translator import TorchTranslator
from nmt.models.base import Step
from tests.conftest import run_cli

MARKERS = ["｟term｠", "｟trans｠", "｟/term｠"]


def test_a_model_that_prefers_the_markers_never_outputs_them(terminology_run: Path, labelled: Path) -> None:
    run = load_trained([terminology_run], torch.device("cpu"))
    markers = run.tokenizers.tgt.ids(MARKERS)
    decode_step = run.model.decode_step

    def preferring_markers(*args: Any) -> Step:
        step = decode_step(*args)
        step.log_probs[:, markers] = 0.0  # each marker as sure as a certainty: above every other piece
        return step

    run.model.decode_step = preferring_markers  # type: ignore[method-assign]
    translator = TorchTranslator.of_run(run)
    sources = labelled.joinpath("valid.src").read_text().splitlines()[:4]
    for beam_size in (1, 3):
        for line in translator.translated(sources, beam_size=beam_size, nbest=beam_size):
            for found in line.hypotheses:
                assert not set(found.tokens) & set(markers), found.pieces
                assert not any(marker in found.text for marker in MARKERS)


@pytest.mark.parametrize("engine", ["torch", "ctranslate2"])
def test_both_engines_ban_the_markers(terminology_run: Path, tmp_path: Path, engine: str) -> None:
    model = terminology_run
    if engine == "ctranslate2":
        model = tmp_path / "export"
        code, _, err = run_cli("export", str(terminology_run), str(model))
        assert code == 0, err
    from nmt.decode.loading import load_translator

    translator = load_translator([model], engine, torch.device("cpu"), None, {})
    tokenizer = translator.tokenizers.tgt
    assert set(tokenizer.ids(MARKERS)) <= set(tokenizer.banned)
