"""`nmt import` of a MarianMT directory: an ordinary run directory (config, checkpoint, tokenizer, origin),
and one line naming the problem for every bad input, with nothing written."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import socket
import zipfile
from pathlib import Path
from typing import Any

import pytest
import torch

from nmt.config.yaml_file import load_saved_config
from tests.conftest import assert_one_line_error, run_cli
from tests.importing.marian_models import Variant, write_marian


@pytest.fixture(scope="module")
def marian(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An untrained tiny MarianMT directory (its outputs do not matter here)."""
    return write_marian(tmp_path_factory.mktemp("marian") / "opus-mt-de-en", Variant(), steps=0)


def broken(marian: Path, tmp_path: Path) -> Path:
    """A copy of the model to damage."""
    return Path(shutil.copytree(marian, tmp_path / "model"))


def import_error(model: Path, tmp_path: Path, *fragments: str) -> None:
    """One line naming `fragments`, exit code 2, and no run directory."""
    out = tmp_path / "run"
    assert_one_line_error(run_cli("import", str(model), "--out", str(out)), *fragments)
    assert not out.exists()
    assert not [path for path in tmp_path.iterdir() if path.name.startswith(".run")]


def test_an_import_is_an_ordinary_run_directory(marian: Path, tmp_path: Path) -> None:
    code, _, err = run_cli("-q", "import", str(marian), "--out", str(tmp_path / "run"))
    assert code == 0, err
    run = tmp_path / "run"
    assert {"config.yaml", "best.pt", "source.spm", "target.spm", "vocab.json", "origin.json"} <= {
        path.name for path in run.iterdir()
    }
    cfg = load_saved_config(run / "config.yaml")
    arch = cfg.model.transformer_settings
    assert (arch.norm, arch.activation, arch.decoder_start, arch.output_bias) == (
        "post",
        "swish",
        "pad",
        True,
    )
    assert (cfg.tokenizer.vocabulary, cfg.tokenizer.joint, cfg.search.length_normalization) == (
        "marian",
        True,
        "power",
    )
    assert (cfg.data.src_lang, cfg.data.tgt_lang, cfg.search.beam_size) == ("de", "en", 4)
    origin = json.loads((run / "origin.json").read_text())
    assert origin["licence"] == "cc-by-4.0" and len(origin["files"]["model.safetensors"]) == 64
    vocab = json.loads((run / "vocab.json").read_text())
    assert (vocab["<pad>"], vocab["<unk>"], vocab["</s>"]) == (0, 1, 3)  # renumbered as nmt's specials


def test_the_import_draws_no_initial_weights(
    marian: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file's weights replace the model's own, so building it draws none (drawing them on the meta device
    imported torch._dynamo: 2.6 of the 4.7 s an import of OPUS-MT's size took)."""
    from nmt.importing.marian import import_model

    drawn: list[str] = []
    for name in ("normal_", "uniform_"):
        draw = getattr(torch.Tensor, name)

        def spy(
            tensor: torch.Tensor, *args: object, _name: str = name, _draw: Any = draw, **kw: object
        ) -> Any:
            drawn.append(_name)
            return _draw(tensor, *args, **kw)

        monkeypatch.setattr(torch.Tensor, name, spy)
    import_model(str(marian), tmp_path / "run")
    assert drawn == []


def test_each_weight_of_the_checkpoint_owns_its_storage(marian: Path, tmp_path: Path) -> None:
    """best.pt holds the weights once: no tensor is a view into a larger storage (the weight file's, which
    torch.save would write whole)."""
    assert run_cli("-q", "import", str(marian), "--out", str(tmp_path / "run"))[0] == 0
    weights = torch.load(tmp_path / "run" / "best.pt", weights_only=True)["model"]
    for name, tensor in weights.items():
        assert tensor.untyped_storage().nbytes() == tensor.numel() * tensor.element_size(), name


def test_pickled_weights_load_as_weights_only(marian: Path, tmp_path: Path) -> None:
    """pytorch_model.bin, the older format, read with weights_only=True: the same run as safetensors."""
    from safetensors.torch import load_file

    model = broken(marian, tmp_path)
    torch.save(load_file(model / "model.safetensors"), model / "pytorch_model.bin")
    (model / "model.safetensors").unlink()
    assert run_cli("-q", "import", str(model), "--out", str(tmp_path / "bin"))[0] == 0
    assert run_cli("-q", "import", str(marian), "--out", str(tmp_path / "st"))[0] == 0
    ours, theirs = (
        torch.load(tmp_path / name / "best.pt", weights_only=True)["model"] for name in ("bin", "st")
    )
    assert all(torch.equal(ours[name], theirs[name]) for name in theirs)


class Payload:
    def __reduce__(self) -> tuple:
        return (os.system, ("touch pwned",))


def test_a_pickle_that_runs_code_is_refused(marian: Path, tmp_path: Path) -> None:
    model = broken(marian, tmp_path)
    (model / "model.safetensors").unlink()
    (model / "pytorch_model.bin").write_bytes(pickle.dumps({"model.shared.weight": Payload()}))
    import_error(model, tmp_path, "pytorch_model.bin", "corrupt")
    assert not Path("pwned").exists() and not (tmp_path / "pwned").exists()


@pytest.mark.parametrize(
    ("model_type", "architecture"),
    [
        ("t5", "T5ForConditionalGeneration"),
        ("m2m_100", "M2M100ForConditionalGeneration"),
        ("pegasus", "PegasusForConditionalGeneration"),
    ],
)
def test_another_architecture_is_named(
    marian: Path, tmp_path: Path, model_type: str, architecture: str
) -> None:
    model = broken(marian, tmp_path)
    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(
        json.dumps(config | {"model_type": model_type, "architectures": [architecture]})
    )
    import_error(model, tmp_path, f"'{model_type}'", architecture, "marian")


@pytest.mark.parametrize("name", ["config.json", "target.spm", "source.spm", "vocab.json"])
def test_a_missing_file_is_named(marian: Path, tmp_path: Path, name: str) -> None:
    model = broken(marian, tmp_path)
    (model / name).unlink()
    import_error(model, tmp_path, name)


def test_missing_weights_are_named(marian: Path, tmp_path: Path) -> None:
    model = broken(marian, tmp_path)
    (model / "model.safetensors").unlink()
    import_error(model, tmp_path, "model.safetensors", "pytorch_model.bin")


def test_a_vocabulary_that_disagrees_with_the_embedding_is_named(marian: Path, tmp_path: Path) -> None:
    model = broken(marian, tmp_path)
    vocab = json.loads((model / "vocab.json").read_text())
    (model / "vocab.json").write_text(json.dumps(vocab | {"▁extra": len(vocab)}))
    import_error(model, tmp_path, "vocab.json", f"{len(vocab) + 1} pieces", f"{len(vocab)} rows")


def test_truncated_weights_are_named(marian: Path, tmp_path: Path) -> None:
    model = broken(marian, tmp_path)
    weights = model / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    import_error(model, tmp_path, "model.safetensors", "truncated or corrupt")


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"encoder_ffn_dim": 128, "decoder_ffn_dim": 128}, "contradicts the weights"),
        ({"encoder_layers": 3}, "lacks the weight"),
        ({"d_model": 64}, "d_model is 64"),
        ({"d_model": 16}, "d_model is 16"),
    ],
)
def test_a_config_that_contradicts_the_weights_is_named(
    marian: Path, tmp_path: Path, change: dict, fragment: str
) -> None:
    model = broken(marian, tmp_path)
    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps(config | change))
    import_error(model, tmp_path, "model.safetensors", "config.json", fragment)


def test_a_non_empty_out_is_refused(marian: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert_one_line_error(
        run_cli("import", str(marian), "--out", str(out)), str(out), "not an empty directory"
    )
    assert [path.name for path in out.iterdir()] == ["notes.txt"]


@pytest.mark.parametrize("offline", [True, False], ids=["HF_HUB_OFFLINE", "no network"])
def test_an_unreachable_hub_is_one_line_naming_the_local_form(
    offline: bool, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """In-process, with an empty hub cache: the hub's offline mode (HF_HUB_OFFLINE=1, read when
    huggingface_hub is imported), or no host name resolving, as on a machine without a network."""
    import huggingface_hub.constants

    def unreachable(host: str, *args: Any, **kwargs: Any) -> Any:
        raise OSError("no network in tests")

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", offline)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hf"))
    monkeypatch.setattr(socket, "getaddrinfo", unreachable)
    out = tmp_path / "run"
    result = run_cli("import", "Helsinki-NLP/opus-mt-de-en", "--out", str(out))
    assert_one_line_error(result, "the Hugging Face hub is unreachable", "nmt import opus-mt-de-en --out")
    assert not out.exists()


def test_neither_a_directory_nor_a_hub_id_is_one_line(tmp_path: Path) -> None:
    assert_one_line_error(
        run_cli("import", str(tmp_path / "no" / "such" / "model"), "--out", str(tmp_path / "run")),
        "neither a directory nor a hub id",
    )


def test_an_argos_package_of_an_imported_run_holds_its_source_model(marian: Path, tmp_path: Path) -> None:
    """Argos packages hold one sentencepiece model: an imported run's is source.spm, with which argostranslate
    encodes (CTranslate2's vocabularies map the pieces) and decodes (tests/export/test_argos.py checks)."""
    pytest.importorskip("ctranslate2")
    pytest.importorskip("onnx")
    assert run_cli("-q", "import", str(marian), "--out", str(tmp_path / "run"))[0] == 0
    out = tmp_path / "de_en.argosmodel"
    code, _, err = run_cli("export", str(tmp_path / "run"), str(out), "--to", "argos")
    assert code == 0, err
    with zipfile.ZipFile(out) as package:
        held = package.read("translate-de_en-nmt/sentencepiece.model")
        readme = package.read("translate-de_en-nmt/README.md").decode()
    assert held == (marian / "source.spm").read_bytes()
    assert "source.spm" in readme


def test_an_argos_export_of_a_target_model_with_byte_fallback_is_refused(tmp_path: Path) -> None:
    """Argos decodes with the package's one sentencepiece model, the source's, which would leave the target
    model's byte pieces (<0xE3>) as text: one line names them and the export that keeps them."""
    pytest.importorskip("ctranslate2")
    pytest.importorskip("onnx")
    marian = write_marian(tmp_path / "opus-mt-de-en", Variant(target_bytes=True), steps=0)
    assert run_cli("-q", "import", str(marian), "--out", str(tmp_path / "run"))[0] == 0
    out = tmp_path / "de_en.argosmodel"
    assert_one_line_error(
        run_cli("export", str(tmp_path / "run"), str(out), "--to", "argos"),
        "target.spm has byte-fallback pieces (<0x00>, 256 in all)",
        "source.spm lacks",
        "--to ctranslate2",
    )
    assert not out.exists() and not [path for path in tmp_path.iterdir() if path.name.startswith(".")]


def sharded(marian: Path, tmp_path: Path) -> Path:
    """The model saved by transformers in shards of at most 100 kB (model.safetensors.index.json names
    them), its tokenizer and generation files beside them."""
    from transformers import MarianMTModel

    model = tmp_path / "sharded"
    shutil.copytree(marian, model, ignore=shutil.ignore_patterns("model.safetensors"))
    MarianMTModel.from_pretrained(marian).save_pretrained(model, max_shard_size="100KB")
    assert (model / "model.safetensors.index.json").is_file() and not (model / "model.safetensors").exists()
    return model


def test_sharded_weights_import_as_the_whole_file(marian: Path, tmp_path: Path) -> None:
    model = sharded(marian, tmp_path)
    shards = sorted(path.name for path in model.glob("model-*-of-*.safetensors"))
    assert len(shards) > 1
    for source, out in ((marian, "whole"), (model, "from-shards")):
        code, _, err = run_cli("-q", "import", str(source), "--out", str(tmp_path / out))
        assert code == 0, err
    whole, parts = (
        torch.load(tmp_path / out / "best.pt", weights_only=True) for out in ("whole", "from-shards")
    )
    assert whole["model"].keys() == parts["model"].keys()
    for name, tensor in whole["model"].items():
        assert torch.equal(tensor, parts["model"][name]), name
    files = json.loads((tmp_path / "from-shards" / "origin.json").read_text())["files"]
    assert {"model.safetensors.index.json", *shards} <= set(files)


def test_a_missing_shard_is_named(marian: Path, tmp_path: Path) -> None:
    model = sharded(marian, tmp_path)
    shard = sorted(model.glob("model-*-of-*.safetensors"))[-1]
    shard.unlink()
    import_error(model, tmp_path, shard.name, "is missing", "model.safetensors.index.json")


@pytest.mark.parametrize("name", ["source.spm", "target.spm"])
def test_a_damaged_sentencepiece_model_is_named_in_the_source(
    marian: Path, tmp_path: Path, name: str
) -> None:
    model = broken(marian, tmp_path)
    (model / name).write_text("not a sentencepiece model")
    import_error(model, tmp_path, str(model / name), "download the model again")


@pytest.mark.parametrize(
    ("settings", "fragment"),
    [({"num_beams": "four"}, "num_beams='four'"), ({"length_penalty": [1]}, "length_penalty=[1]")],
)
def test_a_generation_setting_that_is_not_a_number_is_named(
    marian: Path, tmp_path: Path, settings: dict, fragment: str
) -> None:
    model = broken(marian, tmp_path)
    (model / "generation_config.json").write_text(json.dumps(settings))
    import_error(model, tmp_path, "generation_config.json", fragment)


@pytest.mark.parametrize("name", ["dropout", "attention_dropout"])
def test_a_config_setting_that_is_not_a_number_is_named(marian: Path, tmp_path: Path, name: str) -> None:
    model = broken(marian, tmp_path)
    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps(config | {name: "high"}))
    import_error(model, tmp_path, "config.json", f"{name}='high'")
