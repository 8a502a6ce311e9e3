"""The HTTP APIs on the session's tiny trained run, in-process: LibreTranslate's /translate, /languages and
/frontend/settings, nmt's /v1/translate, /v1/models and /health; answers equal offline translation."""

import dataclasses
import logging
import threading
from pathlib import Path
from typing import Any

import pytest
import torch
from starlette.testclient import TestClient

from nmt.align.reading import SEARCH_READING
from nmt.config.multilingual import Direction
from nmt.config.sections import SearchLimits
from nmt.decode.exported import load_export
from nmt.decode.search import Hypothesis
from nmt.decode.trained_run import load_run
from nmt.decode.translator import TorchTranslator
from nmt.errors import UserError
from nmt.serve.engines import Catalog, Decoding, Engine, load_catalog
from nmt.serve.requests import Limits
from tests.conftest import run_cli
from tests.serve.conftest import make_client, sentences_of
from tests.ties import assert_equal_but_for_ties

PAIR = {"source": "src", "target": "tgt"}


def without_confidence(body: dict[str, Any]) -> dict[str, Any]:
    """A LibreTranslate answer without nmt's `confidence` field (checked to be there: one per text)."""
    confidence = body.pop("confidence")
    texts = body["translatedText"]
    for found in confidence if isinstance(texts, list) else [confidence]:
        assert set(found) == {"meanLogProb", "suspect"} and found["meanLogProb"] <= 0
    assert isinstance(confidence, list) == isinstance(texts, list)
    return body


def test_libretranslate_translate_equals_offline_translation(
    client: TestClient, offline: dict[str, str]
) -> None:
    for sentence, expected in offline.items():
        response = client.post("/translate", json={"q": sentence, **PAIR})
        assert response.status_code == 200, response.text
        assert without_confidence(response.json()) == {"translatedText": expected}


def test_libretranslate_form_body_and_list_of_texts(client: TestClient, offline: dict[str, str]) -> None:
    sentence = next(iter(offline))
    form = client.post("/translate", data={"q": sentence, **PAIR})  # what libretranslatepy sends
    assert without_confidence(form.json()) == {"translatedText": offline[sentence]}
    many = client.post("/translate", json={"q": list(offline), **PAIR})
    assert without_confidence(many.json()) == {"translatedText": list(offline.values())}


def test_confidence_is_the_mean_log_probability_with_the_suspicions(
    client: TestClient, trained_run: Path
) -> None:
    """/v1/translate gives each hypothesis its mean log-probability per token (the search's score without
    its length penalty) and its suspicions; LibreTranslate's /translate gives each text its least sure
    line's, in an extra field."""
    run = load_run(trained_run, torch.device("cpu"))
    translator = TorchTranslator.of_run(run)
    lines = ["nopaju kaju zufete giholo", "kaju " * 3 + "nopaju"]
    expected = translator.translated(lines)
    body = client.post("/v1/translate", json={"q": "\n".join(lines), **PAIR}).json()
    answered = [line["hypotheses"][0] for line in body["translations"][0]["lines"]]
    assert [h["mean_log_prob"] for h in answered] == pytest.approx(
        [t.best.mean_log_prob for t in expected], abs=1e-3
    )
    alpha = run.cfg.search.length_penalty
    for h in answered:  # the score times the length penalty, over the output tokens and eos
        length = len(h["target_pieces"])
        undone = h["score"] * ((5 + length) / 6) ** alpha / length
        assert h["mean_log_prob"] == pytest.approx(undone, abs=1e-3)
    assert [h["suspect"] for h in answered] == [list(t.best.suspect) for t in expected]
    libre = client.post("/translate", json={"q": ["\n".join(lines), lines[0]], **PAIR}).json()
    assert libre["confidence"] == [
        {
            "meanLogProb": min(h["mean_log_prob"] for h in answered),
            "suspect": sorted({reason for h in answered for reason in h["suspect"]}),
        },
        {"meanLogProb": answered[0]["mean_log_prob"], "suspect": answered[0]["suspect"]},
    ]


def test_libretranslate_alternatives_are_other_hypotheses(
    client: TestClient, offline: dict[str, str]
) -> None:
    sentence = next(iter(offline))
    body = client.post("/translate", json={"q": sentence, "alternatives": 3, **PAIR}).json()
    assert body["translatedText"] == offline[sentence]
    assert 1 <= len(body["alternatives"]) <= 3
    assert len(set(body["alternatives"])) == len(body["alternatives"])
    assert offline[sentence] not in body["alternatives"]


def test_libretranslate_source_auto_is_the_one_source_served(
    client: TestClient, offline: dict[str, str]
) -> None:
    sentence = next(iter(offline))
    body = client.post("/translate", json={"q": sentence, "source": "auto", "target": "tgt"}).json()
    assert without_confidence(body) == {
        "translatedText": offline[sentence],
        "detectedLanguage": {"confidence": 100.0, "language": "src"},
    }


def test_languages_lists_every_language_with_its_targets_and_frontend_settings(client: TestClient) -> None:
    assert client.get("/languages").json() == [
        {"code": "src", "name": "src", "targets": ["tgt"]},
        {"code": "tgt", "name": "tgt", "targets": []},  # clients build their target menu from it too
    ]
    settings = client.get("/frontend/settings").json()
    assert settings["charLimit"] == 20_000 and settings["keyRequired"] is False
    assert settings["language"]["source"]["code"] == "src" and settings["language"]["target"]["code"] == "tgt"


def test_lines_are_translated_one_by_one_and_blank_lines_stay(
    client: TestClient, offline: dict[str, str]
) -> None:
    first, second = list(offline)[:2]
    body = client.post("/translate", json={"q": f"{first}\n\n{second}\n", **PAIR}).json()
    assert body["translatedText"] == f"{offline[first]}\n\n{offline[second]}\n"


def test_v1_translate_gives_nbest_with_scores_and_pieces(client: TestClient, trained_run: Path) -> None:
    run = load_run(trained_run, torch.device("cpu"), overrides=["search.nbest=3"])
    sentence = "nopaju kaju zufete giholo"
    translator = TorchTranslator.of_run(run)
    expected = translator.search(translator.encode([sentence]))[0]
    body = client.post("/v1/translate", json={"q": sentence, "nbest": 3, **PAIR}).json()
    assert body["model"] == trained_run.name and body["beam_size"] == run.cfg.search.beam_size
    (text,) = body["translations"]
    hyps = text["lines"][0]["hypotheses"]
    assert [h["text"] for h in hyps] == run.tokenizers.tgt.decode([h.tokens for h in expected])
    assert [h["score"] for h in hyps] == pytest.approx([h.score for h in expected], abs=1e-3)
    assert [h["score"] for h in hyps] == sorted((h["score"] for h in hyps), reverse=True)
    assert text["translatedText"] == hyps[0]["text"]
    assert text["lines"][0]["source_pieces"] == [
        *run.tokenizers.src.pieces(run.tokenizers.src.encode([sentence])[0]),
        "</s>",
    ]
    assert all("attention" not in h for h in hyps)


def test_v1_attention_is_every_layer_and_head_of_each_hypothesis(
    client: TestClient, trained_run: Path
) -> None:
    run = load_run(trained_run, torch.device("cpu"))
    sentence = "nopaju kaju zufete giholo"
    body = client.post("/v1/translate", json={"q": [sentence], "nbest": 2, "attention": True, **PAIR}).json()
    line = body["translations"][0]["lines"][0]
    (translated,) = TorchTranslator.of_run(run).translated([sentence], attention=True)
    assert translated.best.attention is not None
    for hyp in line["hypotheses"]:
        weights = torch.tensor(hyp["attention"])  # (layers, heads, tgt, src)
        layers, heads = run.cfg.model.decoder_layers, run.cfg.model.transformer.heads
        assert weights.shape == (layers, heads, len(hyp["target_pieces"]), len(line["source_pieces"]))
        torch.testing.assert_close(weights.sum(dim=-1), torch.ones(weights.shape[:-1]), atol=1e-3, rtol=0)
    best = torch.tensor(line["hypotheses"][0]["attention"], dtype=torch.float64)
    assert line["hypotheses"][0]["target_pieces"] == translated.best.pieces
    torch.testing.assert_close(best, translated.best.attention.double(), atol=1e-4, rtol=0)


def test_v1_alignments_are_the_word_links_of_each_hypothesis(client: TestClient, trained_run: Path) -> None:
    translator = TorchTranslator.of_run(load_run(trained_run, torch.device("cpu"))).with_search(nbest=2)
    sentence = "nopaju kaju zufete giholo"
    asked = {"q": f"{sentence}\n", "nbest": 2, "alignments": True, **PAIR}
    lines = client.post("/v1/translate", json=asked).json()["translations"][0]["lines"]
    sources = translator.encode([sentence])
    found = translator.search(sources, alignments=True)
    (expected,) = translator.decode(sources, found)
    assert [h["alignment"] for h in lines[0]["hypotheses"]] == [
        [list(link) for link in h.alignment or []] for h in expected.hypotheses
    ]
    assert lines[0]["hypotheses"][0]["alignment"] and "attention" not in lines[0]["hypotheses"][0]
    assert lines[1]["hypotheses"][0]["alignment"] == []  # the blank line


def test_v1_translate_without_a_pair_uses_the_one_served(client: TestClient, trained_run: Path) -> None:
    body = client.post("/v1/translate", json={"q": "nopaju kaju"}).json()
    assert (body["model"], body["source"], body["target"]) == (trained_run.name, "src", "tgt")


def test_v1_translate_without_a_pair_among_several_says_which_to_send(catalog: Catalog) -> None:
    ((name, engines),) = catalog.engines.items()
    (engine,) = engines.values()
    xx = Direction("xx", "tgt")
    other = dataclasses.replace(engine, name="other", direction=xx)
    defaults = {engine.direction: name, xx: "other"}
    two = Catalog({name: engines, "other": {xx: other}}, defaults)
    with make_client(two) as client:
        refused = client.post("/v1/translate", json={"q": "nopaju kaju"})
        named = client.post("/v1/translate", json={"q": "nopaju kaju", "source": "xx"})
    message = refused.json()["error"]
    assert refused.status_code == 400 and "src→tgt" in message and "xx→tgt" in message
    assert "send source and target" in message
    assert named.status_code == 200 and named.json()["model"] == "other"


def hypotheses(response: Any) -> list[dict]:
    assert response.status_code == 200, response.text
    return response.json()["translations"][0]["lines"][0]["hypotheses"]


@pytest.mark.parametrize(
    ("fields", "form"),
    [
        ({"attention": True, "nbest": 2}, False),
        ({"attention": True, "nbest": 2.0}, False),  # JSON has one type of number: 2.0 is a whole one
        ({"attention": "true", "nbest": "2"}, True),
        ({"attention": "True", "nbest": "+2"}, True),  # as Python's str(True) writes it
        ({"attention": "1", "nbest": "2"}, True),
        ({"attention": "on", "nbest": "2"}, True),  # an HTML checkbox that is ticked
        ({"attention": "ON", "nbest": "2"}, True),
    ],
)
def test_booleans_and_numbers_as_json_has_them_or_as_a_form_spells_them(
    client: TestClient, fields: dict, form: bool
) -> None:
    """JSON values have JSON's types; a form's values are text: true/false, 1/0, on/off (any case), and
    whole numbers in digits."""
    body = {"q": "nopaju kaju", **PAIR, **fields}
    hyps = hypotheses(client.post("/v1/translate", **{"data" if form else "json": body}))
    assert len(hyps) == 2 and all("attention" in h for h in hyps)


@pytest.mark.parametrize(("value", "form"), [(False, False), ("false", True), ("0", True), ("OFF", True)])
def test_a_false_boolean_turns_attention_off(client: TestClient, value: object, form: bool) -> None:
    body = {"q": "nopaju kaju", **PAIR, "attention": value}
    (best,) = hypotheses(client.post("/v1/translate", **{"data" if form else "json": body}))
    assert "attention" not in best


def test_the_query_string_is_text_under_a_json_body(client: TestClient) -> None:
    """A field of the query string is text, as a form's are, even when the body is JSON."""
    response = client.post("/v1/translate?attention=on&nbest=2", json={"q": "nopaju kaju", **PAIR})
    hyps = hypotheses(response)
    assert len(hyps) == 2 and all("attention" in h for h in hyps)


@pytest.mark.parametrize(
    ("fields", "form"),
    [
        ({"sampling": True, "temperature": 2, "top_k": 10, "top_p": 0.9, "seed": 7}, False),
        ({"sampling": "on", "temperature": "2", "top_k": "10", "top_p": ".9", "seed": "7"}, True),
        ({"sampling": "TRUE", "temperature": "2e0", "top_k": "10", "top_p": "9E-1", "seed": "+7"}, True),
    ],
)
def test_sampling_fields_as_json_has_them_or_as_a_form_spells_them(
    client: TestClient, fields: dict, form: bool
) -> None:
    """The sampling fields follow the same rule; JSON and the two forms above ask for the same samples."""
    body = {"q": "nopaju kaju zufete giholo", **PAIR, "nbest": 2, **fields}
    hyps = hypotheses(client.post("/v1/translate", **{"data" if form else "json": body}))
    same = {"sampling": True, "temperature": 2.0, "top_k": 10, "top_p": 0.9, "seed": 7}
    expected = hypotheses(client.post("/v1/translate", json={**body, **same}))
    assert len(hyps) == 2 and hyps == expected


@pytest.mark.parametrize("alternatives", [2, "2", 2.0])
def test_libretranslate_alternatives_are_read_as_libretranslate_reads_them(
    client: TestClient, alternatives: object
) -> None:
    """LibreTranslate reads JSON's `alternatives` with int(): a string of digits is taken there too."""
    answer = client.post("/translate", json={"q": "nopaju kaju", **PAIR, "alternatives": alternatives})
    assert answer.status_code == 200, answer.text
    assert "alternatives" in answer.json()


def test_v1_models_and_health(client: TestClient, trained_run: Path) -> None:
    (model,) = client.get("/v1/models").json()["models"]
    report = __import__("json").loads((trained_run / "report.json").read_text())
    cfg = load_run(trained_run, torch.device("cpu")).cfg.model
    assert model["attention"] == f"{cfg.decoder_layers} decoder layers × {cfg.transformer.heads} heads " + (
        "(scaled dot-product)"
    )
    assert model["name"] == trained_run.name and model["default"] is True
    assert (model["source"], model["target"], model["type"], model["engine"]) == (
        "src",
        "tgt",
        "transformer",
        "torch",
    )
    assert model["test_bleu"] == {
        "bleu": report["test"][report["checkpoint"]]["bleu"],
        "checkpoint": report["checkpoint"],
    }
    assert model["parameters"] > 0
    domain = load_run(trained_run, torch.device("cpu")).cfg.data.domain
    assert domain and model["domain"] == domain  # what the model handles, as its config states it
    health = client.get("/health").json()
    assert health["status"] == "ok" and health["models"] == [trained_run.name] and health["waiting"] == 0


def test_runs_of_one_pair_are_also_served_as_their_ensemble(
    trained_run: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="nmt"):
        catalog = load_catalog([trained_run, trained_run], "torch", torch.device("cpu"), None, None)
    name = trained_run.name
    assert list(catalog.engines) == [name, f"{name}-2", "ensemble-src-tgt"]
    assert catalog.defaults == {Direction("src", "tgt"): "ensemble-src-tgt"}
    said = [r.getMessage() for r in caplog.records if "by default" in r.getMessage()]
    also = f"(also served: {name}, {name}-2; --default NAME chooses)"
    assert said == [f"src → tgt: ensemble-src-tgt by default {also}"]
    hints = [r.getMessage() for r in caplog.records if "--to ctranslate2" in r.getMessage()]
    assert len(hints) == 1  # runs served on a CPU: their export is named, once
    with make_client(catalog) as client:
        sentence = "nopaju kaju zufete giholo"
        alone = client.post("/v1/translate", json={"q": sentence, "model": name}).json()
        both = client.post("/v1/translate", json={"q": sentence, "attention": True, **PAIR}).json()
    assert both["model"] == "ensemble-src-tgt"
    assert (
        both["translations"][0]["translatedText"] == alone["translations"][0]["translatedText"]
    )  # twice the same model
    hyp = both["translations"][0]["lines"][0]["hypotheses"][0]
    assert torch.tensor(hyp["attention"]).shape[:2] == (1, 1)  # search's attention: one layer, one head


def test_default_chooses_the_model_of_a_pair(trained_run: Path) -> None:
    name, cpu, runs = trained_run.name, torch.device("cpu"), [trained_run, trained_run]
    chosen = load_catalog(runs, "torch", cpu, None, None, [f"{name}-2"])
    assert chosen.defaults == {Direction("src", "tgt"): f"{name}-2"}
    with pytest.raises(UserError, match="--default nope: no such model; served: "):
        load_catalog([trained_run], "torch", cpu, None, None, ["nope"])
    with pytest.raises(UserError, match="choose one"):
        load_catalog(runs, "torch", cpu, None, None, [name, f"{name}-2"])


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("rnn-bahdanau", "one layer, one head: Bahdanau attention (additive)"),
        ("rnn-luong", "one layer, one head: Luong attention (general score)"),
        ("transformer", "3 decoder layers × 8 heads (scaled dot-product)"),
    ],
)
def test_v1_models_says_what_attention_each_model_type_returns(kind: str, expected: str) -> None:
    from nmt.models.config import ModelConfig
    from nmt.serve.engines import attention_layout

    assert attention_layout(ModelConfig(type=kind)) == expected  # type: ignore[arg-type]


def test_a_batch_out_of_memory_is_split_and_every_request_answered(
    catalog: Catalog, offline: dict[str, str]
) -> None:
    """The model fails every batch of more than one sentence (as a GPU out of memory would): concurrent
    clients still all get their own correct translation."""
    ((name, engines),) = catalog.engines.items()
    (engine,) = engines.values()

    class Tight(Engine):
        def search(self, sources: list[list[int]], decoding: Decoding) -> list[list[Hypothesis]]:
            if len(sources) > 1:
                raise torch.cuda.OutOfMemoryError("CUDA out of memory (simulated)")
            return super().search(sources, decoding)

    tight = Tight(engine.name, engine.direction, engine.translator, engine.facts)
    answers: dict[str, str] = {}
    tight_catalog = dataclasses.replace(catalog, engines={name: {engine.direction: tight}})
    with make_client(tight_catalog, max_delay=0.2) as client:

        def ask(sentence: str) -> None:
            answers[sentence] = client.post("/translate", json={"q": sentence, **PAIR}).json()[
                "translatedText"
            ]

        threads = [threading.Thread(target=ask, args=(s,)) for s in offline]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        health = client.get("/health").json()
    assert answers == offline
    assert health["split_batches"] >= 1


def test_an_export_refuses_a_search_it_lacks_with_a_400_and_takes_every_setting_in_range(
    trained_run: Path, corpus: Path, tmp_path: Path
) -> None:
    pytest.importorskip("ctranslate2")
    from tests.conftest import run_cli

    export = tmp_path / "ct2"
    assert run_cli("export", str(trained_run), str(export), "--to", "ctranslate2")[0] == 0
    catalog = load_catalog([export], "ctranslate2", torch.device("cpu"), None, None)
    sentence = sentences_of(corpus, 1)[0]
    with make_client(catalog) as client:
        diverse = {"q": sentence, "diverse_groups": 2, "beam_size": 4, **PAIR}
        refused = client.post("/v1/translate", json=diverse)
        assert refused.status_code == 400, refused.text
        assert "has no DiverseBeamSearch search; use the run directory" in refused.json()["error"]
        for extreme in ({"min_length": 1000}, {"sampling": True, "seed": 2**63 - 1, "top_k": 10**6}):
            answer = client.post("/v1/translate", json={"q": sentence, **extreme, **PAIR})
            assert answer.status_code == 200, answer.text
            assert answer.json()["translations"][0]["translatedText"]
    for flags in (["--min-length", "1000"], ["--sampling", "--seed", str(2**63 - 1), "--top-k", "1000000"]):
        code, out, err = run_cli("translate", str(export), *flags, input=sentence + "\n")
        assert code == 0 and out.strip(), err


def test_a_ctranslate2_export_is_served_with_nbest_and_no_attention(
    trained_run: Path, corpus: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    pytest.importorskip("ctranslate2")
    from tests.conftest import run_cli

    assert run_cli("export", str(trained_run), str(tmp_path / "ct2"), "--to", "ctranslate2")[0] == 0
    with caplog.at_level(logging.INFO, logger="nmt"):
        catalog = load_catalog([tmp_path / "ct2"], "ctranslate2", torch.device("cpu"), None, None)
    assert not [r for r in caplog.records if "--to ctranslate2" in r.getMessage()]  # served already
    greedy = TorchTranslator.of_run(load_run(trained_run, torch.device("cpu"))).with_search(beam_size=1)
    exported = load_export(tmp_path / "ct2", "cpu").with_search(beam_size=1)
    sentences = sentences_of(corpus, 4)
    sources = greedy.encode(sentences)
    found = exported.search(sources, alignments=True)  # the run's, but where its scores tie (tests/ties.py)
    ours = [hyps[0] for hyps in greedy.search(sources, alignments=True)]
    reading = greedy.reading or SEARCH_READING  # the attention the run's links read
    assert_equal_but_for_ties(greedy.model, sources, ours, [hyps[0] for hyps in found], reading=reading)
    expected = exported.decode(sources, found)
    with make_client(catalog) as client:
        body = client.post("/v1/translate", json={"q": sentences, "beam_size": 1, **PAIR}).json()
        assert [t["translatedText"] for t in body["translations"]] == [line.best.text for line in expected]
        two = client.post("/v1/translate", json={"q": sentences[0], "nbest": 2, **PAIR}).json()
        scores = [h["score"] for h in two["translations"][0]["lines"][0]["hypotheses"]]
        assert len(scores) == 2 and scores == sorted(scores, reverse=True)
        refused = client.post("/v1/translate", json={"q": sentences[0], "attention": True, **PAIR})
        assert refused.status_code == 400 and "no attention" in refused.json()["error"]
        asked = {"q": sentences, "beam_size": 1, "alignments": True, **PAIR}
        aligned = client.post("/v1/translate", json=asked).json()["translations"]
        assert [t["lines"][0]["hypotheses"][0]["alignment"] for t in aligned] == [
            [list(link) for link in line.best.alignment or []] for line in expected
        ]
        (model,) = client.get("/v1/models").json()["models"]
        assert (model["engine"], model["name"]) == ("ctranslate2", "ct2")
    run = load_run(trained_run, torch.device("cpu"))
    assert (model["runs"], model["checkpoint"], model["domain"]) == (
        [trained_run.name],
        run.checkpoint_name,  # as the export's metadata names it
        run.cfg.data.domain,
    )
    (beam_2,) = (
        load_catalog([tmp_path / "ct2"], "ctranslate2", torch.device("cpu"), None, 2).engines["ct2"].values()
    )
    assert beam_2.beam_size == 2 and beam_2.translator.settings.beam_size == 2


def test_v1_sampling_with_a_seed_answers_alike(client: TestClient) -> None:
    asked = {"q": "nopaju kaju zufete giholo", "sampling": True, "nbest": 3, "temperature": 3.0, **PAIR}
    first = client.post("/v1/translate", json=asked | {"seed": 7}).json()
    assert len(first["translations"][0]["lines"][0]["hypotheses"]) == 3
    assert client.post("/v1/translate", json=asked | {"seed": 7}).json() == first
    others = [client.post("/v1/translate", json=asked | {"seed": seed}).json() for seed in (8, 9)]
    assert any(other != first for other in others)
    refused = client.post("/v1/translate", json=asked | {"top_p": 0})
    assert refused.status_code == 400 and "top_p=0 must be above 0" in refused.json()["error"]


def test_a_line_samples_what_the_command_line_samples(
    client: TestClient, trained_run: Path, corpus: Path
) -> None:
    """The same line, seed and settings: the same sample through the server (alone or among other texts) as
    from `nmt translate`; without a seed both draw with seed 0."""
    lines = sentences_of(corpus, 12)
    asked = {"sampling": True, "temperature": 2.0, **PAIR}
    alone = client.post("/v1/translate", json=asked | {"q": lines[3]}).json()["translations"][0]
    among = client.post("/v1/translate", json=asked | {"q": lines, "seed": 0}).json()["translations"]
    assert among[3]["translatedText"] == alone["translatedText"]
    sampled = ["--sampling", "--temperature", "2.0"]
    code, out, _ = run_cli("translate", str(trained_run), *sampled, input=lines[3] + "\n")
    assert code == 0 and out.strip() == alone["translatedText"]


def test_nbest_and_beam_size_are_served_as_the_search_declares_them(client: TestClient) -> None:
    """A request's nbest and beam_size are the search's own settings, derived as every other search field:
    their meaning and range declared once (`SearchLimits`), capped at the server's beam limit; absent, the
    model's own."""
    body = client.get("/openapi.json").json()["paths"]["/v1/translate"]["post"]["requestBody"]
    fields = body["content"]["application/json"]["schema"]["properties"]
    declared = {f.name: f.metadata for f in dataclasses.fields(SearchLimits)}
    for name in ("nbest", "beam_size"):
        assert declared[name]["meaning"][1:] in fields[name]["description"]
        assert "absent: the model's own" in fields[name]["description"]
        assert f"'maximum': {Limits().max_beam}" in str(fields[name])
    assert client.post("/v1/translate", json={"q": "ka lo", "beam_size": 0, **PAIR}).status_code == 400


def test_search_fields_are_the_search_settings_and_a_field_the_search_does_not_read_is_refused(
    client: TestClient,
) -> None:
    body = client.get("/openapi.json").json()["paths"]["/v1/translate"]["post"]["requestBody"]
    fields = body["content"]["application/json"]["schema"]["properties"]
    assert {"sampling", "top_p", "seed", "no_repeat_ngram_size", "min_length", "diverse_groups"} <= set(
        fields
    )
    assert "exclusiveMinimum" in str(fields["top_p"]) and "nucleus" in fields["top_p"]["description"]
    refused = client.post("/v1/translate", json={"q": "ka lo", "top_k": 5, **PAIR})
    assert refused.status_code == 400
    assert refused.json()["error"] == "top_k=5 applies to sampling (sampling), not to beam search; drop it"
    both = client.post("/v1/translate", json={"q": "ka lo", "sampling": True, "diverse_groups": 5, **PAIR})
    assert both.status_code == 400
    assert both.json()["error"].startswith("diverse_groups=5 asks for diverse beam search and sampling=True")
    blocked = client.post("/v1/translate", json={"q": "ka lo", "no_repeat_ngram_size": 1, "nbest": 2, **PAIR})
    for hyp in blocked.json()["translations"][0]["lines"][0]["hypotheses"]:
        assert len(set(hyp["text"].split())) == len(hyp["text"].split())
