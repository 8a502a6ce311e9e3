"""A tiny three-language run: trained on four directions, validated and reported direction by direction, with
the off-target rate where py3langid knows the languages."""

from __future__ import annotations

import json
import logging
import statistics
import sys
from pathlib import Path

import pytest
import torch

from nmt.config.multilingual import Direction
from nmt.config.sections import TrainConfig
from nmt.config.yaml_file import load_config
from nmt.data import language_id
from nmt.decode.trained_run import load_run
from nmt.decode.translator import TorchTranslator
from nmt.evaluate import off_target
from nmt.evaluate.directions import direction_scores
from nmt.evaluate.hypotheses import search_label
from nmt.run.directory import RunDir
from nmt.train.monitor import Monitor
from tests.conftest import MULTILINGUAL_DIRECTIONS, run_cli

DIRECTIONS = MULTILINGUAL_DIRECTIONS


def records(run: Path, kind: str) -> list[dict]:
    lines = (run / "metrics.jsonl").read_text().splitlines()
    return [record for record in map(json.loads, lines) if record["kind"] == kind]


def test_validation_scores_every_direction_and_their_mean(multilingual_run: Path) -> None:
    validations = records(multilingual_run, "valid")
    assert [record["step"] for record in validations] == [5, 10]
    for record in validations:
        directions = record["directions"]
        assert list(directions) == DIRECTIONS
        assert all(directions[name]["sentences"] == 8 for name in DIRECTIONS)  # eval_max_sentences each
        assert record["bleu"] == pytest.approx(
            statistics.mean(d["bleu"] for d in directions.values()), abs=0.01
        )
        assert record["chrf"] == pytest.approx(
            statistics.mean(d["chrf"] for d in directions.values()), abs=0.01
        )
        assert record["off_target"] is None  # py3langid does not know xa, xb, xc
    log = (multilingual_run / "train.log").read_text()
    assert "step 10: valid xa-xb BLEU " in log and ", xc-xa BLEU " in log and "mean BLEU" in log
    assert log.count("off-target rate skipped: py3langid does not know the language code(s) xa, xb, xc") <= 1
    assert "each epoch draws xa-xb 320 (0.80×), xb-xa 320 (0.80×), xa-xc 640 (1.60×), xc-xa 320" in log


def test_the_report_scores_every_direction_of_valid_and_test(multilingual_run: Path) -> None:
    report = json.loads((multilingual_run / "report.json").read_text())
    chosen = report["checkpoint"]
    label = search_label(load_config(multilingual_run / "config.yaml").search)  # beam2, the output limit
    for split, sentences in (("valid", 12), ("test", 6)):
        scores = report[split][chosen]
        assert list(scores["directions"]) == DIRECTIONS and scores["beam_size"] == 2
        for name, record in scores["directions"].items():
            assert record["sentences"] == sentences
            hypotheses = Path(record["hypotheses"])
            assert hypotheses.name == f"{split}.{name}.{label}.hyp"
            assert len(hypotheses.read_text().splitlines()) == sentences
    assert report["best_valid_bleu_greedy"] == max(r["bleu"] for r in records(multilingual_run, "valid"))
    assert (multilingual_run / "attention" / "valid-2.png").stat().st_size > 1000


def test_a_decoder_tag_run_validates_and_reports_every_direction(decoder_tag_run: Path) -> None:
    """Its training targets start with the tag; search forces it, and outputs no tag."""
    validations = records(decoder_tag_run, "valid")
    assert [list(record["directions"]) for record in validations] == [DIRECTIONS, DIRECTIONS]
    report = json.loads((decoder_tag_run / "report.json").read_text())
    test = report["test"][report["checkpoint"]]
    assert list(test["directions"]) == DIRECTIONS
    run = load_run(decoder_tag_run, torch.device("cpu"))
    translator = TorchTranslator.of_run(run).toward("xb")
    tags = translator.tags
    assert tags is not None and tags.placement == "decoder"
    sources = translator.encode(["a b c", "d e"])
    assert all(tags.id("xb") not in ids for ids in sources)  # no tag on the source side
    for hyps in translator.search(sources, beam_size=2, nbest=2):
        assert hyps and all(not set(h.tokens) & set(tags.banned) for h in hyps)


def test_tensorboard_gets_every_direction(tmp_path: Path) -> None:
    class Events:
        def __init__(self) -> None:
            self.tags: dict[str, float] = {}

        def add_scalar(self, tag: str, value: float, step: int) -> None:
            self.tags[tag] = value

        def flush(self) -> None: ...

    monitor = Monitor(TrainConfig(), RunDir(tmp_path), is_main=True, step=0)
    events = monitor.events = Events()
    direction = {"bleu": 20.0, "chrf": 50.0, "off_target": 1.5}
    record = {"loss": 2.0, "bleu": 20.0, "chrf": 50.0, "off_target": 1.5, "directions": {"en-de": direction}}
    monitor.valid(5, 0, record)
    monitor.bar.close()
    assert events.tags == {
        "valid/loss": 2.0,
        "valid/bleu": 20.0,
        "valid/chrf": 50.0,
        "valid/off_target": 1.5,
        "valid/en-de/bleu": 20.0,
        "valid/en-de/chrf": 50.0,
        "valid/en-de/off_target": 1.5,
    }


SENTENCES = {
    "en": ["A man is riding a bicycle down the street.", "Two dogs play in the snow."],
    "de": ["Ein Mann fährt mit dem Fahrrad die Straße hinunter.", "Zwei Hunde spielen im Schnee."],
    "fr": ["Un homme descend la rue à vélo.", "Deux chiens jouent dans la neige."],
}


def test_the_off_target_rate_is_the_share_of_outputs_in_another_language() -> None:
    pytest.importorskip("py3langid")
    en_de, en_fr = Direction("en", "de"), Direction("en", "fr")
    outputs = {en_de: SENTENCES["de"], en_fr: [SENTENCES["fr"][0], SENTENCES["en"][1], "", " "]}
    references = {en_de: SENTENCES["de"], en_fr: SENTENCES["fr"] * 2}
    scores = direction_scores(outputs, references, ("de", "en", "fr"))
    assert scores["directions"]["en-de"]["off_target"] == 0.0
    assert scores["directions"]["en-fr"]["off_target"] == 50.0  # of the non-empty outputs
    assert scores["off_target"] == 25.0 and scores["directions"]["en-de"]["bleu"] == 100.0


def test_without_py3langid_the_rate_is_skipped_in_one_line(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    for module in ("py3langid", "py3langid.langid"):  # importing them raises ImportError
        monkeypatch.setitem(sys.modules, module, None)
    off_target._identifier.cache_clear()
    language_id.classifier.cache_clear()
    language_id.identifier.cache_clear()
    try:
        with caplog.at_level(logging.INFO, logger="nmt"):
            rates = [off_target.off_target_rate(SENTENCES["de"], "de", ("de", "en")) for _ in range(3)]
    finally:
        off_target._identifier.cache_clear()
        language_id.classifier.cache_clear()
        language_id.identifier.cache_clear()
    assert rates == [None, None, None]
    assert [r.getMessage() for r in caplog.records] == [
        "off-target rate skipped: it needs py3langid (pip install 'nmt[langid]')"
    ]


LEARNING = """\
data: {max_len: 64, multilingual: {directions: [xa-xb, xb-xa, xa-xc, xc-xa]}}
tokenizer: {vocab_size: 300}
model: {encoder_layers: 2, decoder_layers: 2, dropout: 0.0, transformer: {d_model: 64, heads: 4, ff_dim: 128}}
train: {device: cpu, batch_tokens: 2000, pad_to_multiple: 1, lr: 3.0e-3, warmup_steps: 100, eval_every: 200,
        eval_max_sentences: 50, log_every: 100, max_time: 0.0}
search: {beam_size: 1, batch_tokens: 2000}
"""


@pytest.mark.slow
def test_the_tag_decides_the_output_language(tmp_path: Path) -> None:
    """xa-xb and xa-xc read the same sources and differ by their tag alone: a model that learns both writes
    xb's upper-case words for one and xc's lower-case words for the other (in 400 updates every direction
    reached test BLEU 40-87 on 2 CPU cores)."""
    from tests.synthetic import write_multilingual_corpus

    data = write_multilingual_corpus(tmp_path / "data", train=3000, valid=100, test=100, vocab=60)
    (tmp_path / "config.yaml").write_text(LEARNING)
    run = tmp_path / "run"
    code, _, err = run_cli(
        "train", str(tmp_path / "config.yaml"), "--data", str(data), "--out", str(run), "--max-steps", "400"
    )
    assert code == 0, err
    test = json.loads((run / "report.json").read_text())["test"]["best"]
    assert all(record["bleu"] > 20 for record in test["directions"].values()), test
    to_xb = Path(test["directions"]["xa-xb"]["hypotheses"]).read_text().splitlines()
    to_xc = Path(test["directions"]["xa-xc"]["hypotheses"]).read_text().splitlines()
    assert sum(line.isupper() for line in to_xb) >= 95 and sum(line.islower() for line in to_xc) >= 95
