"""A three-language run with decoder tags, end to end (slow layer): it trains and validates per direction, and
translates every direction alike through `nmt translate`, `nmt serve` and its CTranslate2 export; its Hugging
Face export generates the same tokens (its Argos packages: tests/export/test_argos.py)."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest
import torch

from nmt.decode.exported import output_limit
from nmt.decode.trained_run import load_run
from nmt.decode.translator import TorchTranslator
from tests.conftest import MULTILINGUAL_DIRECTIONS, run_cli

pytestmark = pytest.mark.slow


def lines_of(run: Path, lang: str) -> list[str]:
    return (run.parent / "data" / f"test.{lang}").read_text().splitlines()


def translated(path: Path, src: str, tgt: str, lines: list[str]) -> list[str]:
    flags = ["--src-lang", src, "--tgt-lang", tgt, "--beam-size", "1", "--device", "cpu"]
    code, out, err = run_cli("translate", str(path), *flags, input="\n".join(lines) + "\n")
    assert code == 0, err
    return out.splitlines()


def test_it_learns_and_validates_every_direction(learned_multilingual: Path) -> None:
    records = [json.loads(line) for line in (learned_multilingual / "metrics.jsonl").read_text().splitlines()]
    valid = [record for record in records if record["kind"] == "valid"]
    assert [list(record["directions"]) for record in valid] == [MULTILINGUAL_DIRECTIONS] * 2
    report = json.loads((learned_multilingual / "report.json").read_text())
    test = report["test"][report["checkpoint"]]["directions"]
    assert all(record["bleu"] > 20 for record in test.values()), test


def test_every_direction_alike_through_the_cli_the_server_and_ctranslate2(
    learned_multilingual: Path, tmp_path: Path
) -> None:
    pytest.importorskip("ctranslate2")
    from tests.serve.conftest import start

    export = tmp_path / "ct2"
    assert run_cli("export", str(learned_multilingual), str(export))[0] == 0
    served = start(learned_multilingual)
    try:
        for name in MULTILINGUAL_DIRECTIONS:
            src, tgt = name.split("-")
            lines = lines_of(learned_multilingual, src)
            ours = translated(learned_multilingual, src, tgt, lines)
            assert sum(bool(line) for line in ours) >= 90
            assert translated(export, src, tgt, lines) == ours
            body = json.dumps({"q": lines, "source": src, "target": tgt}).encode()
            request = urllib.request.Request(
                f"{served.url}/translate", body, {"Content-Type": "application/json"}
            )
            with urllib.request.urlopen(request, timeout=60) as answer:
                assert json.load(answer)["translatedText"] == ours
    finally:
        assert served.stop() == 0


def test_the_hugging_face_export_generates_the_same_tokens(
    learned_multilingual: Path, tmp_path: Path
) -> None:
    """`generate(…, forced_bos_token_id=<the target's tag>)`: the tag first, then nmt's greedy tokens."""
    transformers = pytest.importorskip("transformers")
    export = tmp_path / "hf"
    assert run_cli("export", str(learned_multilingual), str(export), "--to", "huggingface")[0] == 0
    tokenizer = transformers.AutoTokenizer.from_pretrained(export)
    model = transformers.AutoModelForSeq2SeqLM.from_pretrained(export).eval()
    card = (export / "README.md").read_text()
    assert "language: [xa, xb, xc]" in card and "forced_bos_token_id=tokenizer.convert_tokens_to_ids" in card
    translator = TorchTranslator.of_run(load_run(learned_multilingual, torch.device("cpu")))
    search = translator.settings
    for name in MULTILINGUAL_DIRECTIONS:
        src, tgt = name.split("-")
        lines = lines_of(learned_multilingual, src)[:40]
        into = translator.with_search(beam_size=1).toward(tgt)
        ours = [hyps[0].tokens for hyps in into.search(into.encode(lines))]
        tag = tokenizer.convert_tokens_to_ids(f">>{tgt}<<")
        batch = tokenizer(lines, return_tensors="pt", padding=True)
        outputs = model.generate(**batch, forced_bos_token_id=tag).tolist()
        assert all(output[:2] == [2, tag] for output in outputs)  # the decoder start, the tag
        found = []
        for length, output in zip(batch["attention_mask"].sum(dim=1).tolist(), outputs, strict=True):
            tokens = output[2:]  # cut at eos, and at nmt's limit for the source (without its eos)
            tokens = tokens[: tokens.index(3)] if 3 in tokens else tokens
            found.append(tokens[: output_limit(length - 1, search)])
        assert found == ours
        assert tokenizer.batch_decode(found, skip_special_tokens=True) == into.tokenizers.tgt.decode(ours)
