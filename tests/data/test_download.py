"""Corpus download: local `datasets` directories → plain text files, hub names, and failing fast offline."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from nmt.data.download import HubCorpus, _check_hub_reachable, download, resolve
from nmt.errors import UserError

ROWS = {  # HF split name → (de, en) pairs
    "train": [("ein Haus", "a house"), ("zwei  Hunde\tbellen", "two dogs bark"), ("Katze", "cat")],
    "validation": [("rot", "red"), ("blau", "blue")],
    "test": [("grün", "green")],
}


@pytest.fixture(autouse=True)
def lookups(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[str]:
    """Every host name fails to resolve (those tried are listed), and `datasets` caches inside the test's
    directory: the tests behave alike with or without a network."""
    import datasets

    tried: list[str] = []

    def unreachable(host: str, *args: Any, **kwargs: Any) -> Any:
        tried.append(host)
        raise OSError("no network in tests")

    monkeypatch.setattr(socket, "getaddrinfo", unreachable)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-cache")
    return tried


def write_jsonl(directory: Path, record: Any) -> Path:
    """One `<split>.jsonl` per split of ROWS, each line `record(de, en)`."""
    directory.mkdir()
    for split, pairs in ROWS.items():
        lines = [json.dumps(record(de, en), ensure_ascii=False) for de, en in pairs]
        (directory / f"{split}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return directory


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


@pytest.mark.parametrize(
    "record",
    [
        lambda de, en: {"en": en, "de": de},  # like bentrevett/multi30k
        lambda de, en: {"translation": {"de": de, "en": en}},  # like wmt14 and iwslt2017
    ],
    ids=["flat", "translation"],
)
def test_local_dataset_becomes_plain_text_files(tmp_path: Path, record: Any) -> None:
    source = write_jsonl(tmp_path / "corpus", record)
    out = tmp_path / "out"
    counts = download(str(source), out, "de", "en")
    assert counts == {"train": 3, "valid": 2, "test": 1}
    assert sorted(p.name for p in out.iterdir()) == sorted(
        f"{s}.{lang}" for s in counts for lang in ("de", "en")
    )
    assert lines(out / "train.de") == ["ein Haus", "zwei Hunde bellen", "Katze"]  # whitespace collapsed
    assert lines(out / "train.en") == ["a house", "two dogs bark", "cat"]
    assert lines(out / "valid.en") == ["red", "blue"]
    assert lines(out / "test.de") == ["grün"]


def test_missing_language_field_names_the_fields(tmp_path: Path) -> None:
    records = (lambda de, en: {"de": de, "en": en}, lambda de, en: {"translation": {"de": de, "en": en}})
    for number, record in enumerate(records):
        source = write_jsonl(tmp_path / f"corpus{number}", record)
        with pytest.raises(UserError) as info:
            download(str(source), tmp_path / "out", "fr", "en")
        message = str(info.value)
        assert "no 'fr' field" in message and "'de'" in message and "'en'" in message
        assert "--src-lang/--tgt-lang" in message


def test_a_missing_sentence_becomes_an_empty_line(tmp_path: Path) -> None:
    source = tmp_path / "corpus"
    source.mkdir()
    records = [{"de": "ja", "en": "yes"}, {"de": None, "en": "no"}]
    (source / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    download(str(source), tmp_path / "out", "de", "en")
    assert lines(tmp_path / "out" / "train.de") == ["ja", ""]  # not 'None': the reader drops this pair


def test_a_dataset_without_train_split_is_an_error(tmp_path: Path) -> None:
    source = tmp_path / "corpus"
    source.mkdir()
    (source / "test.jsonl").write_text('{"de": "a", "en": "b"}\n', encoding="utf-8")
    with pytest.raises(UserError, match="no train split"):
        download(str(source), tmp_path / "out", "de", "en")


def test_resolve_known_names() -> None:
    corpus, config = resolve("iwslt2017", "de", "en", None)
    assert corpus == HubCorpus("IWSLT/iwslt2017", "iwslt2017-{src}-{tgt}", "refs/convert/parquet")
    assert config == "iwslt2017-de-en"
    assert resolve("IWSLT2017", "en", "fr", None)[1] == "iwslt2017-en-fr"
    assert resolve("wmt14", "en", "de", None) == (HubCorpus("wmt/wmt14", "{pair}"), "de-en")
    assert resolve("wmt14", "de", "en", None)[1] == "de-en"
    assert resolve("multi30k", "de", "en", None) == (HubCorpus("bentrevett/multi30k"), None)


def test_resolve_passes_other_names_and_explicit_configs_through() -> None:
    assert resolve("someone/corpus", "de", "en", None) == (HubCorpus("someone/corpus"), None)
    assert resolve("wmt14", "en", "de", "fr-en")[1] == "fr-en"


def test_unreachable_hub_fails_fast_and_points_to_local_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import datasets

    loads: list[Any] = []
    monkeypatch.setattr(datasets, "load_dataset", lambda *args, **kwargs: loads.append(args))
    start = time.monotonic()
    with pytest.raises(UserError) as info:
        download("multi30k", tmp_path / "out", "de", "en")
    assert time.monotonic() - start < 5
    assert loads == []  # no minutes of retries inside `datasets`
    message = str(info.value)
    assert "cannot reach the Hugging Face hub (huggingface.co)" in message and "--data DIR" in message
    for name in ("train.de", "valid.de", "val.de", "dev.de", "test.de", "test2016.de", ".en"):
        assert name in message, name  # every file name --data accepts
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("value", ["1", "true", "YES", "on"])
def test_offline_mode_skips_the_reachability_check(
    monkeypatch: pytest.MonkeyPatch, lookups: list[str], value: str
) -> None:
    """No host lookup (which would fail here) and no error: the cache may hold it, `datasets` decides."""
    monkeypatch.setenv("HF_HUB_OFFLINE", value)
    _check_hub_reachable("bentrevett/multi30k", "de", "en")
    assert lookups == []
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    with pytest.raises(UserError, match="cannot reach"):
        _check_hub_reachable("bentrevett/multi30k", "de", "en")
    assert lookups == ["huggingface.co"]


def test_hub_check_names_a_custom_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_ENDPOINT", "https://hub.example.org")
    with pytest.raises(UserError, match=r"\(hub\.example\.org\)"):
        _check_hub_reachable("bentrevett/multi30k", "de", "en")


def test_missing_local_path_is_reported_as_such(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=f"local dataset directory {tmp_path / 'nope'} does not exist"):
        download(str(tmp_path / "nope"), tmp_path / "out", "de", "en")
    with pytest.raises(UserError, match="does not exist"):
        download("./no/such/dir", tmp_path / "out", "de", "en")


def test_cli_download_of_a_bogus_path_is_one_line_and_exit_code_2(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from nmt.cli import app

    result = CliRunner().invoke(app, ["download", str(tmp_path / "nope"), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    (line,) = [line for line in result.output.splitlines() if line.strip()]
    assert line.startswith("nmt: error: ") and str(tmp_path / "nope") in line
