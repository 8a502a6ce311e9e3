"""Random online back-translation in a tiny three-language run: which pairs are re-sourced and into which
language, that a new source is the model's own translation of the pair's target, that a resumed run re-sources
exactly what an uninterrupted one does, the per-direction counts a run logs, and the config's one-line
errors."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest
import torch

from nmt.config.yaml_file import load_config
from nmt.data.batching import Batch
from nmt.data.special_tokens import EOS, PAD
from nmt.errors import ConfigError
from nmt.run.checkpoint_io import load_checkpoint
from nmt.train.command import train
from nmt.train.loop import Trainer
from tests.conftest import make_trainer, prepared

ROBT = "data.multilingual.back_translation"
SETS = [f"{ROBT}.share=0.5", "model.dropout=0.0", "train.final_report=false"]
RUNS = ("straight", "resumed")
SHARE = f"{ROBT}.share=0.5"


def first_update(trainer: Trainer) -> list[Batch]:
    (_, batches) = next(trainer.stream.epoch(trainer.progress))
    return batches


@pytest.fixture(params=["encoder", "decoder"])
def trainer(request: pytest.FixtureRequest, three_languages: Path, tmp_path: Path) -> Trainer:
    config, data = three_languages / "config.yaml", three_languages / "data"
    sets = [*SETS, f"data.multilingual.tags={request.param}"]
    ready, overrides = prepared(config, data, tmp_path / "run", *sets)
    return make_trainer(config, ready, tmp_path / "run", overrides)


def direction_of(trainer: Trainer, index: int) -> int:
    return int(np.searchsorted(np.cumsum(trainer.data.directions.train_pairs), index, side="right"))


def test_a_share_of_the_pairs_gets_the_models_translation_of_its_target(trainer: Trainer) -> None:
    robt = trainer.back_translation
    assert robt is not None
    batches = first_update(trainer)
    resourced = robt(batches, step=0)
    directions, tags = trainer.data.directions, trainer.data.directions.tags
    forced = directions.run.forced_tokens
    changed = 0
    for old, new in zip(batches, resourced, strict=True):
        assert new.shapes() == old.shapes()  # what a planned static shape and a captured step need
        for key in ("tgt_in", "tgt_out", "index"):
            assert torch.equal(getattr(new, key), getattr(old, key))
        assert torch.equal(new.src_mask, (new.src != PAD).unsqueeze(1))
        for row in range(old.size):
            if torch.equal(new.src[row], old.src[row]):
                continue
            changed += 1
            ids = new.src[row][new.src[row] != PAD].tolist()
            assert ids[-1] == EOS
            target = directions.directions[direction_of(trainer, int(old.index[row]))].tgt
            source = ids[:-1][1:] if tags.placement == "encoder" else ids[:-1]
            if tags.placement == "encoder":
                assert ids[0] == tags.id(target)  # tagged for the pair's own target language
            # the translation of the target into one of the other languages, as the translator finds it
            sentence = trainer.data.train.tgt[int(old.index[row])][forced:].tolist()
            width = old.src.size(1) - 1 - (tags.placement == "encoder")
            outputs = []
            for lang in sorted({"xa", "xb", "xc"} - {target}):
                into = robt.translator_into(lang, 0, old.src.size(1))
                outputs.append(into.search([into.tags.source(sentence, lang)])[0][0].tokens[:width])
            assert source in outputs
    pairs = sum(batch.size for batch in batches)
    assert 0.2 * pairs < changed <= 0.8 * pairs  # each pair drawn with probability 0.5
    made = robt.take_counts()
    assert sum(made.values()) >= changed and all(a != b for a, b in (name.split("-") for name in made))
    assert robt.take_counts() == {}
    assert trainer.model.training  # searched in evaluation mode, handed back in training mode


def test_nothing_is_re_sourced_before_the_start(three_languages: Path, tmp_path: Path) -> None:
    config, data = three_languages / "config.yaml", three_languages / "data"
    ready, overrides = prepared(config, data, tmp_path / "run", *SETS, f"{ROBT}.start=3")
    trainer = make_trainer(config, ready, tmp_path / "run", overrides)
    assert trainer.back_translation is not None
    batches = first_update(trainer)
    assert trainer.back_translation(batches, step=2) is batches
    assert trainer.back_translation(batches, step=3) is not batches


def test_the_draws_depend_on_the_update_and_the_process_only(trainer: Trainer) -> None:
    robt = trainer.back_translation
    assert robt is not None
    batch = first_update(trainer)[0]
    same = [robt._choose(batch, np.random.default_rng([1, 5, 0])) for _ in range(2)]
    assert same[0] == same[1] and same[0].rows
    assert robt._choose(batch, np.random.default_rng([1, 6, 0])) != same[0]


def robt_config(three_languages: Path, max_steps: int, search: str = "greedy") -> object:
    sets = [f"data.dir={three_languages / 'data'}", *SETS, f"{ROBT}.search={search}", f"{ROBT}.start=2"]
    sets += [f"train.max_steps={max_steps}", "train.eval_every=4", "train.log_every=2", "model.dropout=0.1"]
    return load_config(three_languages / "config.yaml", sets)


@pytest.mark.parametrize("search", ["greedy", pytest.param("sampling", marks=pytest.mark.slow)])  # 3 s each
def test_a_resumed_run_back_translates_as_an_uninterrupted_one(
    search: str, three_languages: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="nmt")
    train(robt_config(three_languages, 8, search), tmp_path / "straight")  # type: ignore[arg-type]
    train(robt_config(three_languages, 4, search), tmp_path / "resumed")  # type: ignore[arg-type]
    train(robt_config(three_languages, 8, search), tmp_path / "resumed", resume=True)  # type: ignore[arg-type]
    straight, resumed = (load_checkpoint(tmp_path / name / "last.pt") for name in RUNS)
    for name, tensor in straight["model"].items():
        assert torch.equal(tensor, resumed["model"][name]), name
    records = [map(json.loads, (tmp_path / name / "metrics.jsonl").read_text().splitlines()) for name in RUNS]
    trained = [[r for r in run if r["kind"] == "train"] for run in records]
    assert [r["loss"] for r in trained[0]] == [r["loss"] for r in trained[1]]
    counted = [{k: v for k, v in r.items() if k.startswith("back_translated")} for r in trained[0]]
    assert counted[0]["back_translated"] == 0 and counted[-1]["back_translated"] > 0  # from update 2 on
    assert any("back_translated.xb-xc" in r or "back_translated.xc-xb" in r for r in counted)  # zero-shot
    assert "step 8: back-translated " in caplog.text and " pairs (xa-xb " in caplog.text


def test_a_run_without_it_changes_nothing(three_languages: Path, tmp_path: Path) -> None:
    config, data = three_languages / "config.yaml", three_languages / "data"
    ready, overrides = prepared(config, data, tmp_path / "run", f"{ROBT}.share=0")
    assert make_trainer(config, ready, tmp_path / "run", overrides).back_translation is None


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        ([f"{ROBT}.share=1.5"], f"{ROBT}.share=1.5"),
        ([f"{ROBT}.search=beam"], f"{ROBT}.search"),
        (
            ["data.multilingual.directions=[xa-xb, xc-xb]", "data.multilingual.weights=null", SHARE],
            "translates into xb only, so a target has no other language to be back-translated into",
        ),
        (
            [f"{ROBT}.share=0.5", "train.alignment.links=train.links"],
            "a back-translated pair has a new source that train.alignment.links does not align",
        ),
    ],
)
def test_bad_settings_are_one_line_errors(sets: list[str], message: str, three_languages: Path) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        load_config(three_languages / "config.yaml", sets)
    assert "\n" not in str(caught.value)
