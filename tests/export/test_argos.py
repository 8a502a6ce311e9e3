"""`nmt export --to argos`: the package's layout and metadata and the refusals; in the slow layer
argostranslate, then LibreTranslate (from a virtual environment of their own, with the network unreachable),
install packages and translate as `nmt translate` does."""

import json
import os
import random
import sys
import zipfile
from pathlib import Path

import pytest

from nmt.data.synthetic import reordering_pairs
from tests.argos_offline import harness  # argostranslate in a venv of its own, offline
from tests.conftest import MULTILINGUAL_DIRECTIONS, ROOT, assert_one_line_error, run_cli, train_args

NO_REPORT = ("--set", "train.final_report=false")
DRIVER = Path(__file__).with_name("argos_driver.py")  # run by the environment's Python


@pytest.fixture(scope="module")
def tiny_run(tiny: Path, small_corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Transformer trained for a few steps (its data.domain stated): enough to export."""
    run_dir = tmp_path_factory.mktemp("argos") / "tf"
    domain = ("--set", "data.domain=made-up words in reverse order")
    assert run_cli(*train_args(tiny, small_corpus, run_dir, "--max-steps", "5", *NO_REPORT, *domain))[0] == 0
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
        "from_code": "src",
        "from_name": "src",
        "to_code": "tgt",
        "to_name": "tgt",
        "type": "translate",
    }
    assert metadata["package_version"] and metadata["argos_version"]
    assert "not a trained model" in metadata["sentence_splitter"]
    assert config["add_source_eos"] is True  # argostranslate passes bare pieces: CTranslate2 adds the eos
    assert spm == (tiny_run / "spm.model").read_bytes()
    assert "not a trained model" in readme and "--beam-size 4 --length-penalty 0.2" in readme
    assert metadata["nmt"]["domain"] == "made-up words in reverse order"
    assert "Its training text: made-up words in reverse order." in readme
    assert metadata["nmt"]["terminology"] is None and "terms written into its source" not in readme


def test_a_package_of_an_annotation_run_names_its_markers(terminology_run: Path, tmp_path: Path) -> None:
    pytest.importorskip("ctranslate2")
    pytest.importorskip("onnx")
    out = tmp_path / "src_tgt.argosmodel"
    code, _, err = run_cli("export", str(terminology_run), str(out), "--to", "argos")
    assert code == 0, err
    with zipfile.ZipFile(out) as package:
        metadata = json.loads(package.read("translate-src_tgt-nmt/metadata.json"))
        readme = package.read("translate-src_tgt-nmt/README.md").decode()
        exported = json.loads(package.read("translate-src_tgt-nmt/model/nmt-export.json"))
    assert metadata["nmt"]["terminology"] == exported["terminology"] == ["｟term｠", "｟trans｠", "｟/term｠"]
    assert "｟term｠ Fahrrad ｟trans｠ bicycle ｟/term｠" in readme and "--glossary" in readme


def test_a_package_names_no_path_of_the_exporting_machine(tiny_run: Path, tmp_path: Path) -> None:
    """A package is shared: neither it nor its CTranslate2 model's nmt-export.json holds the run's path (only
    its name)."""
    pytest.importorskip("ctranslate2")
    pytest.importorskip("onnx")
    out = tmp_path / "src_tgt.argosmodel"
    assert run_cli("export", str(tiny_run), str(out), "--to", "argos")[0] == 0
    paths = {str(tiny_run.resolve()), str(tiny_run.resolve().parent), str(tiny_run)}
    with zipfile.ZipFile(out) as package:
        for name in package.namelist():
            content = package.read(name)
            assert not any(path.encode() in content for path in paths), name
        meta = json.loads(package.read("translate-src_tgt-nmt/model/nmt-export.json"))
    assert meta["run"] == tiny_run.name and "run_dir" not in meta


def test_a_decoder_tag_run_gives_a_package_per_direction(decoder_tag_run: Path, tmp_path: Path) -> None:
    """Each package forces its direction's target tag as Argos's target_prefix."""
    pytest.importorskip("ctranslate2")
    pytest.importorskip("onnx")
    out = tmp_path / "packages"
    code, stdout, err = run_cli("export", str(decoder_tag_run), str(out), "--to", "argos")
    assert code == 0, err
    assert stdout.strip() == str(out) and [p.name for p in tmp_path.iterdir()] == ["packages"]
    expected = [name.replace("-", "_") + ".argosmodel" for name in MULTILINGUAL_DIRECTIONS]
    assert sorted(p.name for p in out.iterdir()) == sorted(expected)
    for name in MULTILINGUAL_DIRECTIONS:
        src, tgt = name.split("-")
        folder = f"translate-{src}_{tgt}-nmt"
        with zipfile.ZipFile(out / f"{src}_{tgt}.argosmodel") as package:
            metadata = json.loads(package.read(f"{folder}/metadata.json"))
            meta = json.loads(package.read(f"{folder}/model/nmt-export.json"))
            readme = package.read(f"{folder}/README.md").decode()
            assert f"{folder}/minisbd/{src}.onnx" in package.namelist()
        assert (metadata["from_code"], metadata["to_code"], metadata["target_prefix"]) == (
            src,
            tgt,
            f">>{tgt}<<",
        )
        assert meta["tags"] == "decoder" and meta["directions"] == MULTILINGUAL_DIRECTIONS
        assert f"nmt translate model/ --src-lang {src} --tgt-lang {tgt} --beam-size 4" in readme


def test_an_encoder_tag_run_is_refused(multilingual_run: Path, tmp_path: Path) -> None:
    pytest.importorskip("ctranslate2")
    pytest.importorskip("onnx")
    result = run_cli("export", str(multilingual_run), str(tmp_path / "packages"), "--to", "argos")
    assert_one_line_error(
        result, "Argos Translate 1.x passes no source prefix", "data.multilingual.tags=decoder"
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow  # trains a run for the refusal: 2.5 s (separate vocabularies' stays fast)
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


# The slow layer: argostranslate and LibreTranslate in a virtual environment of their own, offline.


@pytest.fixture(scope="session")
def argos_python() -> Path:
    """The Python of a virtual environment with LibreTranslate, made once and kept under
    $XDG_CACHE_HOME/nmt-tests; without PyPI the tests skip."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "nmt-tests"
    try:
        return harness.argos_python(cache, harness.LIBRETRANSLATE)
    except RuntimeError as err:
        pytest.skip(str(err))


def write_punctuated_corpus(out: Path, src: str, tgt: str) -> Path:
    """The reordering task written as sentences: capitalised sources, each pair ending in the same . ? or !"""
    out.mkdir(parents=True)
    for offset, (split, count) in enumerate((("train", 3000), ("valid", 100), ("test", 100))):
        sources, targets = reordering_pairs(count, 60, 3, 7, seed=offset)
        marks = random.Random(offset).choices(".?!", k=count)
        pairs = list(zip(sources, targets, marks, strict=True))
        (out / f"{split}.{src}").write_text("".join(f"{s.capitalize()}{m}\n" for s, _, m in pairs))
        (out / f"{split}.{tgt}").write_text("".join(f"{t}{m}\n" for _, t, m in pairs))
    return out


@pytest.fixture(scope="module")
def packages(tiny: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A de→en package of a model trained on the punctuated task, and an en→de one trained for a few steps
    (LibreTranslate wants two packages)."""
    pytest.importorskip("ctranslate2")
    pytest.importorskip("onnx")
    root = tmp_path_factory.mktemp("argos-packages")
    corpus = write_punctuated_corpus(root / "corpus", "de", "en")
    config = str(ROOT / "configs" / "tiny-transformer.yaml")
    args = [
        "--data",
        str(corpus),
        "--device",
        "cpu",
        "--max-time",
        "0",
        "--set",
        "train.eval_every=150",
        *NO_REPORT,
    ]
    runs = {
        "de_en": ["train", config, "--src-lang", "de", "--tgt-lang", "en", "--max-steps", "300", *args],
        "en_de": ["train", str(tiny), "--src-lang", "en", "--tgt-lang", "de", "--max-steps", "5", *args],
    }
    for name, train in runs.items():
        assert run_cli(*train, "--out", str(root / name))[0] == 0
        assert run_cli("export", str(root / name), str(root / f"{name}.argosmodel"), "--to", "argos")[0] == 0
    return {name: root / f"{name}.argosmodel" for name in runs}


@pytest.mark.slow
def test_argostranslate_translates_offline_as_nmt_does(
    packages: dict[str, Path], argos_python: Path, tmp_path: Path
) -> None:
    """argostranslate installs the package, splits a paragraph into its sentences with the package's splitter,
    and translates each sentence (and the paragraph) as `nmt translate` does on the installed model/ with
    Argos's search: beam 4, length penalty 0.2."""
    corpus = packages["de_en"].parent / "corpus"
    sentences = (corpus / "test.de").read_text().splitlines()[:12]
    paragraph = " ".join(sentences)
    request = {
        "mode": "translate",
        "packages": [str(packages["de_en"])],
        "from": "de",
        "to": "en",
        "paragraph": paragraph,
        "sentences": sentences,
    }
    answer = drive(argos_python, request, tmp_path / "home")
    assert answer["installed"] == ["translate-de_en-nmt"] and answer["sentencizer"] == "MiniSBDSentencizer"
    assert answer["split"] == sentences
    model = tmp_path / "home" / "packages" / "translate-de_en-nmt" / "model"
    expected = nmt_translations(model, sentences)
    assert answer["sentences"] == expected
    assert answer["paragraph"] == " ".join(expected)


def drive(python: Path, request: dict, home: Path) -> dict:
    """The answer of the tests' driver to `request`, run offline by `python` with argostranslate's folders
    under `home`."""
    return json.loads(harness.run_offline(python, [str(DRIVER)], home, json.dumps(request)))


def nmt_translations(model: Path, sentences: list[str], *flags: str) -> list[str]:
    """`nmt translate MODEL FLAGS` with Argos Translate's search settings."""
    search = ["--beam-size", "4", "--length-penalty", "0.2", *flags]
    code, out, err = run_cli("translate", str(model), *search, input="\n".join(sentences) + "\n")
    assert code == 0, err
    return out.splitlines()


@pytest.mark.slow
def test_libretranslate_serves_the_packages_offline(
    packages: dict[str, Path], argos_python: Path, tmp_path: Path
) -> None:
    """`libretranslate --host 127.0.0.1 --load-only de,en` with the two packages installed answers /translate
    with nmt's translation of each sentence, joined (its formatting pass leaves such a paragraph as it is)."""
    corpus = packages["de_en"].parent / "corpus"
    sentences = (corpus / "test.de").read_text().splitlines()[12:18]
    request = {
        "mode": "libretranslate",
        "packages": [str(p) for p in packages.values()],
        "from": "de",
        "to": "en",
        "paragraph": " ".join(sentences),
        "load_only": "de,en",
    }
    answer = drive(argos_python, request, tmp_path / "home")
    assert answer["installed"] == ["translate-de_en-nmt", "translate-en_de-nmt"]
    assert {language["code"] for language in answer["languages"]} == {"de", "en"}
    expected = nmt_translations(tmp_path / "home" / "packages" / "translate-de_en-nmt" / "model", sentences)
    assert expected[-1][-1] == sentences[-1][-1], "LibreTranslate would change the final punctuation"
    assert answer["answer"]["translatedText"] == " ".join(expected)


@pytest.mark.slow
def test_argostranslate_translates_every_direction_of_a_multilingual_run(
    learned_multilingual: Path, argos_python: Path, tmp_path: Path
) -> None:
    """Each direction's package, installed beside the others, forces its target tag: argostranslate
    translates as `nmt translate --src-lang … --tgt-lang …` does on the installed model/ with Argos's
    search."""
    pytest.importorskip("ctranslate2")
    pytest.importorskip("onnx")
    packages = tmp_path / "packages"
    assert run_cli("export", str(learned_multilingual), str(packages), "--to", "argos")[0] == 0
    for name in MULTILINGUAL_DIRECTIONS:
        src, tgt = name.split("-")
        sentences = (learned_multilingual.parent / "data" / f"test.{src}").read_text().splitlines()[:12]
        request = {
            "mode": "translate",
            "packages": [str(p) for p in sorted(packages.iterdir())],
            "from": src,
            "to": tgt,
            "paragraph": sentences[0],
            "sentences": sentences,
        }
        home = tmp_path / f"home-{name}"
        answer = drive(argos_python, request, home)
        model = home / "packages" / f"translate-{src}_{tgt}-nmt" / "model"
        expected = nmt_translations(model, sentences, "--src-lang", src, "--tgt-lang", tgt)
        assert answer["sentences"] == expected and sum(bool(line) for line in expected) >= 10


@pytest.mark.slow
def test_argostranslate_translates_an_imported_marian_model_as_nmt_does(
    argos_python: Path, tmp_path: Path
) -> None:
    """A MarianMT model with separate vocabularies, imported and exported to Argos: argostranslate encodes
    with the package's source.spm and decodes the target pieces with it too, and translates each sentence as
    `nmt translate` does on the installed model/ (which decodes with target.spm)."""
    pytest.importorskip("ctranslate2")
    pytest.importorskip("onnx")
    from tests.importing.marian_models import Variant, word_pairs, write_marian

    marian = write_marian(tmp_path / "opus-mt-de-en", Variant("swish", separate=True), steps=100)
    assert run_cli("-q", "import", str(marian), "--out", str(tmp_path / "run"))[0] == 0
    package = tmp_path / "de_en.argosmodel"
    assert run_cli("export", str(tmp_path / "run"), str(package), "--to", "argos")[0] == 0
    sentences = [line.capitalize() + "." for line in word_pairs(12, seed=5)[0]]
    request = {"mode": "translate", "packages": [str(package)], "from": "de", "to": "en"}
    answer = drive(
        argos_python, request | {"paragraph": sentences[0], "sentences": sentences}, tmp_path / "home"
    )
    model = tmp_path / "home" / "packages" / "translate-de_en-nmt" / "model"
    expected = nmt_translations(model, sentences)
    assert any(line.strip() for line in expected)
    assert answer["sentences"] == expected
