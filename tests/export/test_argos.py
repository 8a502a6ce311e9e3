"""`nmt export --to argos`: the package's layout and metadata and the refusals."""

import json
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import assert_one_line_error, run_cli, train_args

NO_REPORT = ("--set", "train.final_report=false")


@pytest.fixture(scope="module")
def tiny_run(tiny: Path, small_corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Transformer trained for a few steps: enough to export."""
    run_dir = tmp_path_factory.mktemp("argos") / "tf"
    assert run_cli(*train_args(tiny, small_corpus, run_dir, "--max-steps", "5", *NO_REPORT))[0] == 0
    return run_dir


def test_package_layout_and_metadata(tiny_run: Path, tmp_path: Path) -> None:
    pytest.importorskip("ctranslate2")
    pytest.importorskip("onnx")
    out = tmp_path / "src_tgt.argosmodel"
    code, stdout, err = run_cli("export", str(tiny_run), str(out), "--to", "argos")
    assert code == 0, err
    assert stdout.strip() == str(out) and [p.name for p in tmp_path.iterdir()] == [out.name]  # no leftovers
    folder = "translate-src_tgt-nmt"
    with zipfile.ZipFile(out) as package:
        names = package.namelist()
        assert {name.split("/")[0] for name in names} == {folder}
        files = {name.removeprefix(f"{folder}/") for name in names}
        assert {"metadata.json", "README.md", "sentencepiece.model", "minisbd/src.onnx"} <= files
        assert [f for f in files if f.startswith("minisbd/")] == ["minisbd/src.onnx"]
        assert {"model/model.bin", "model/config.json", "model/shared_vocabulary.json"} <= files
        metadata = json.loads(package.read(f"{folder}/metadata.json"))
        config = json.loads(package.read(f"{folder}/model/config.json"))
        spm = package.read(f"{folder}/sentencepiece.model")
        readme = package.read(f"{folder}/README.md").decode()
    assert {key: metadata[key] for key in ("from_code", "from_name", "to_code", "to_name", "type")} == {
        "from_code": "src", "from_name": "src", "to_code": "tgt", "to_name": "tgt", "type": "translate",
    }  # fmt: skip
    assert metadata["package_version"] and metadata["argos_version"]
    assert "not a trained model" in metadata["sentence_splitter"]
    assert config["add_source_eos"] is True  # argostranslate passes bare pieces: CTranslate2 adds the eos
    assert spm == (tiny_run / "spm.model").read_bytes()
    assert "not a trained model" in readme and "--beam-size 4 --length-penalty 0.2" in readme


def test_rnn_run_is_refused(tiny: Path, small_corpus: Path, tmp_path: Path) -> None:
    pytest.importorskip("onnx")
    run_dir, out = tmp_path / "rnn", tmp_path / "rnn.argosmodel"
    rnn = ["--set", "model.type=rnn-luong", "--set", "model.transformer="]  # tiny's section dropped
    assert run_cli(*train_args(tiny, small_corpus, run_dir, "--max-steps", "1", *rnn, *NO_REPORT))[0] == 0
    assert_one_line_error(run_cli("export", str(run_dir), str(out), "--to", "argos"), "only Transformers")
    assert [p.name for p in tmp_path.iterdir()] == ["rnn"]


def test_separate_vocabularies_are_refused(tiny: Path, small_corpus: Path, tmp_path: Path) -> None:
    pytest.importorskip("ctranslate2")
    pytest.importorskip("onnx")
    run_dir, out = tmp_path / "run", tmp_path / "out.argosmodel"
    separate = ("--set", "tokenizer.joint=false")
    args = train_args(tiny, small_corpus, run_dir, "--max-steps", "1", *separate, *NO_REPORT)
    assert run_cli(*args)[0] == 0
    result = run_cli("export", str(run_dir), str(out), "--to", "argos")
    assert_one_line_error(result, "an Argos package holds one", "tokenizer.joint=true")
    assert [p.name for p in tmp_path.iterdir()] == ["run"]


def test_existing_file_and_missing_onnx_are_refused(
    tiny_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "mine.argosmodel"
    out.write_text("mine")
    assert_one_line_error(run_cli("export", str(tiny_run), str(out), "--to", "argos"), "already exists")
    assert out.read_text() == "mine"
    monkeypatch.setitem(sys.modules, "onnx", None)  # import onnx raises ImportError
    result = run_cli("export", str(tiny_run), str(tmp_path / "new.argosmodel"), "--to", "argos")
    assert_one_line_error(result, "onnx is not installed", "nmt[argos]")
