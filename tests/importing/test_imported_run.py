"""An imported run goes through the commands of any run: fine-tuning with --init-from keeps its tokenizer,
vocabulary and architecture; the Hugging Face export gives transformers back an equal model; evaluate,
plot-attention and align read it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml

from nmt.config.yaml_file import load_saved_config
from tests.conftest import run_cli
from tests.importing.marian_models import Variant, transformers, word_pairs, write_marian


@pytest.fixture(scope="module")
def marian(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_marian(tmp_path_factory.mktemp("marian") / "model", Variant("gelu"), steps=100)


@pytest.fixture(scope="module")
def imported(marian: Path) -> Path:
    run = marian.parent / "run"
    code, _, err = run_cli("-q", "import", str(marian), "--out", str(run))
    assert code == 0, err
    return run


@pytest.fixture(scope="module")
def corpus(marian: Path) -> Path:
    """A de-en corpus of word pairs in nmt's layout (train, valid, test)."""
    data = marian.parent / "data"
    data.mkdir()
    for split, count, seed in (("train", 200, 21), ("valid", 20, 22), ("test", 20, 23)):
        sources, targets = word_pairs(count, seed)
        (data / f"{split}.de").write_text("\n".join(sources) + "\n", encoding="utf-8")
        (data / f"{split}.en").write_text("\n".join(targets) + "\n", encoding="utf-8")
    return data


def test_fine_tuning_keeps_the_tokenizer_vocabulary_and_architecture(
    imported: Path, corpus: Path, tmp_path: Path
) -> None:
    """The config is the imported run's own with a train section for fine-tuning; no sentencepiece model is
    trained, and the child's vocabulary files and model section are the parent's."""
    config = yaml.safe_load((imported / "config.yaml").read_text())
    config["train"] |= {"device": "cpu", "lr": 1e-4, "warmup_steps": 2, "batch_tokens": 400, "eval_every": 5}
    config["train"] |= {"eval_max_sentences": 10, "schedule": "constant", "pad_to_multiple": 1}
    (tmp_path / "finetune.yaml").write_text(yaml.safe_dump(config))
    child = tmp_path / "child"
    args = ["--data", str(corpus), "--out", str(child), "--init-from", str(imported), "--max-steps", "10"]
    code, _, err = run_cli(
        "-q", "train", str(tmp_path / "finetune.yaml"), *args, "--set", "train.final_report=false"
    )
    assert code == 0, err
    for name in ("source.spm", "target.spm", "vocab.json"):
        assert (child / name).read_bytes() == (imported / name).read_bytes(), name
    assert not list(child.glob("spm*.model"))
    assert load_saved_config(child / "config.yaml").model == load_saved_config(imported / "config.yaml").model
    before = torch.load(imported / "best.pt", weights_only=True)["model"]
    after = torch.load(child / "best.pt", weights_only=True)["model"]
    assert before.keys() == after.keys() and any(not torch.equal(before[k], after[k]) for k in before)
    code, out, err = run_cli("-q", "translate", str(child), "--beam-size", "1", input="haus katze\n")
    assert code == 0 and out.strip(), err


def test_export_to_huggingface_gives_transformers_an_equal_model(
    marian: Path, imported: Path, tmp_path: Path
) -> None:
    """Import then export: the same logits from the same text as the model imported, ids aside."""
    code, _, err = run_cli("-q", "export", str(imported), str(tmp_path / "hf"), "--to", "huggingface")
    assert code == 0, err
    lines, targets = word_pairs(8, 31)
    results = []
    for directory in (marian, tmp_path / "hf"):
        tokenizer = transformers.MarianTokenizer.from_pretrained(directory)
        model = transformers.MarianMTModel.from_pretrained(directory).eval()
        batch = tokenizer(lines, text_target=targets, return_tensors="pt", padding=True)
        start = torch.full_like(batch["labels"][:, :1], model.config.decoder_start_token_id)
        decoder_input = torch.cat([start, batch["labels"][:, :-1]], dim=1)
        decoder_input[decoder_input == -100] = tokenizer.pad_token_id
        with torch.no_grad():
            log_probs = model(
                input_ids=batch["input_ids"],
                attention_mask=batch["attention_mask"],
                decoder_input_ids=decoder_input,
            ).logits.log_softmax(-1)
        pieces = tokenizer.convert_ids_to_tokens(list(range(log_probs.size(-1))))
        order = sorted(range(len(pieces)), key=pieces.__getitem__)  # columns by piece: ids differ
        results.append((log_probs[..., order], batch["labels"] != tokenizer.pad_token_id))
    (theirs, kept), (ours, _) = results
    torch.testing.assert_close(ours[kept], theirs[kept], atol=1e-4, rtol=0)
    card = (tmp_path / "hf" / "generation_config.json").read_text()
    assert json.loads(card)["num_beams"] == 4


@pytest.mark.parametrize(
    "command",
    [
        ["evaluate", "{run}", "--src", "{data}/test.de", "--ref", "{data}/test.en"],
        ["plot-attention", "{run}", "--text", "haus katze hund", "--out", "{tmp}/attention.png"],
        [
            "align",
            "{run}",
            "--src",
            "{data}/valid.de",
            "--tgt",
            "{data}/valid.en",
            "--out",
            "{tmp}/links.txt",
        ],
    ],
    ids=lambda command: command[0],
)
def test_commands_read_an_imported_run(
    imported: Path, corpus: Path, tmp_path: Path, command: list[str]
) -> None:
    args = [part.format(run=imported, data=corpus, tmp=tmp_path) for part in command]
    code, _, err = run_cli("-q", *args)
    assert code == 0, err


def test_serve_answers_with_the_imported_model(imported: Path) -> None:
    """LibreTranslate's /translate, text and html, answers what `nmt translate` writes."""
    from starlette.testclient import TestClient

    from nmt.serve.app import create_app
    from nmt.serve.engines import load_catalog
    from nmt.serve.requests import Limits

    lines = ["haus katze hund", "brot milch"]
    code, out, err = run_cli("-q", "translate", str(imported), input="\n".join(lines) + "\n")
    assert code == 0, err
    catalog = load_catalog([imported], "torch", torch.device("cpu"), None, None)
    with TestClient(create_app(catalog, Limits(), None, 4096, 0.005)) as client:
        pair = {"source": "de", "target": "en"}
        answer = client.post("/translate", json={"q": lines, **pair})
        assert answer.status_code == 200, answer.text
        assert answer.json()["translatedText"] == out.splitlines()
        page = client.post("/translate", json={"q": f"<p>{lines[0]}</p>", "format": "html", **pair})
        assert page.status_code == 200 and page.json()["translatedText"].startswith("<p>"), page.text


def test_guided_alignment_fine_tunes_an_imported_run(imported: Path, corpus: Path, tmp_path: Path) -> None:
    """`nmt train --init-from` with train.alignment: the imported model's attention learns given word links
    (each source word links its partner, in reverse order) for a few steps, the alignment loss logged."""
    lines = (corpus / "train.de").read_text(encoding="utf-8").splitlines()
    links = [" ".join(f"{i}-{len(line.split()) - 1 - i}" for i in range(len(line.split()))) for line in lines]
    (tmp_path / "train.links").write_text("\n".join(links) + "\n", encoding="utf-8")
    config = yaml.safe_load((imported / "config.yaml").read_text())
    config["train"] |= {"device": "cpu", "lr": 1e-4, "warmup_steps": 2, "batch_tokens": 400, "eval_every": 5}
    config["train"] |= {
        "eval_max_sentences": 10,
        "schedule": "constant",
        "pad_to_multiple": 1,
        "log_every": 1,
    }
    config["train"]["alignment"] = {"links": str(tmp_path / "train.links"), "weight": 0.5}
    (tmp_path / "guided.yaml").write_text(yaml.safe_dump(config))
    child = tmp_path / "guided"
    args = ["--data", str(corpus), "--out", str(child), "--init-from", str(imported), "--max-steps", "6"]
    code, _, err = run_cli(
        "-q", "train", str(tmp_path / "guided.yaml"), *args, "--set", "train.final_report=false"
    )
    assert code == 0, err
    records = [json.loads(line) for line in (child / "metrics.jsonl").read_text().splitlines()]
    assert [r["align_loss"] for r in records if "align_loss" in r]
    code, out, err = run_cli(
        "-q", "align", str(child), "--src", str(corpus / "valid.de"), "--tgt", str(corpus / "valid.en")
    )
    assert code == 0 and len(out.splitlines()) == 20, err


def test_the_explorer_shows_an_imported_models_attention(imported: Path) -> None:
    """The explorer's page is served, and the API it draws from answers every layer and head of the imported
    model's attention, rows and columns ending with </s>."""
    from starlette.testclient import TestClient

    from nmt.serve.app import create_app
    from nmt.serve.engines import load_catalog
    from nmt.serve.requests import Limits

    cfg = load_saved_config(imported / "config.yaml")
    catalog = load_catalog([imported], "torch", torch.device("cpu"), None, None)
    with TestClient(create_app(catalog, Limits(), None, 4096, 0.005)) as client:
        assert client.get("/").status_code == 200
        body = {"q": "haus katze hund", "source": "de", "target": "en", "attention": True}
        answer = client.post("/v1/translate", json=body)
    assert answer.status_code == 200, answer.text
    line = answer.json()["translations"][0]["lines"][0]
    best = line["hypotheses"][0]
    weights = torch.tensor(best["attention"])  # (layers, heads, tgt, src)
    heads = cfg.model.transformer_settings.heads
    assert weights.shape == (
        cfg.model.decoder_layers,
        heads,
        len(best["target_pieces"]),
        len(line["source_pieces"]),
    )
    assert line["source_pieces"][-1] == best["target_pieces"][-1] == "</s>"
    torch.testing.assert_close(weights.sum(dim=-1), torch.ones(weights.shape[:-1]), atol=1e-3, rtol=0)
