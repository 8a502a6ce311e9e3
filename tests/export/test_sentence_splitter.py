"""The Argos package's sentence splitter: MiniSBD's contract, and the sentences it finds in hand-written
paragraphs, run through MiniSBD's own code as argostranslate runs it: those nmt/data/sentences.py finds for
`nmt translate` and the server, on those paragraphs and on random ones."""

import json
import random
from pathlib import Path

import numpy as np
import pytest

from tests.sentence_cases import SPLITS


@pytest.mark.parametrize(("lang", "paragraph", "sentences"), SPLITS)
def test_splitter_finds_the_sentences(tmp_path: Path, lang: str, paragraph: str, sentences: list) -> None:
    minisbd = pytest.importorskip("minisbd")
    from nmt.export.sentence_splitter import write_splitter

    path = write_splitter(lang, tmp_path / "minisbd" / f"{lang}.onnx")
    assert minisbd.SBDetect(str(path), use_gpu=False).sentences(paragraph) == sentences


def test_splitter_follows_minisbd_s_contract(tmp_path: Path) -> None:
    """Inputs `units` (int64) and `features`, an output (batch, length, 5) whose argmax is 2 at a sentence's
    end and 0 elsewhere, padding included; `config`, `vocab` and `lexicon` in the metadata."""
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from nmt.export.sentence_splitter import write_splitter

    path = write_splitter("en", tmp_path / "en.onnx")
    model = onnx.load(str(path))
    assert [(i.name, i.type.tensor_type.elem_type) for i in model.graph.input] == [
        ("units", onnx.TensorProto.INT64),
        ("features", onnx.TensorProto.FLOAT),
    ]
    meta = {prop.key: prop.value for prop in model.metadata_props}
    config, vocab = json.loads(meta["config"]), json.loads(meta["vocab"])
    assert meta["lexicon"] == "null" and config["feat_funcs"] == ["space_before", "capitalized"]
    assert vocab["_id2unit"][:2] == ["<PAD>", "<UNK>"] and vocab["_unit2id"]["."] > 1
    assert "not a trained model" in meta["description"] and "Mr." in meta["description"]
    texts = ["Hi. Yo", "Ok! Go on."]
    units = [[vocab["_unit2id"].get(c, 1) for c in text] for text in texts]
    width = max(map(len, units)) + 1
    batch = [row + [0] * (width - len(row)) for row in units]  # (2, 11); padded as MiniSBD pads
    features = [[[float(c == " "), float(c.isupper())] for c in text.ljust(width, "\0")] for text in texts]
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    inputs = {"units": np.array(batch, np.int64), "features": np.array(features, np.float32)}
    logits = session.run(None, inputs)[0]
    assert logits.shape == (2, width, 5)
    ends = [[i for i, cls in enumerate(row) if cls] for row in logits.argmax(axis=2).tolist()]
    assert ends == [[2], [2, 9]] and set(logits.argmax(axis=2).ravel().tolist()) == {0, 2}


def test_the_graph_splits_as_the_python_rules_do(tmp_path: Path) -> None:
    """The ONNX graph and nmt/data/sentences.py compute the same rules: the same sentences of random
    paragraphs made of the characters and abbreviations the rules look at (one space between words, as
    MiniSBD reads a paragraph)."""
    minisbd = pytest.importorskip("minisbd")
    from nmt.data.sentences import split_sentences
    from nmt.export.sentence_splitter import write_splitter

    pieces = [*"AbcéÉxZ .!?…\"'»«()„“", "12", "123", "z. B.", "Dr.", "M.", "p. ex.", "č.", "e.g.", "usw."]
    rng = random.Random(0)
    for lang in ("de", "en", "fr", "cs", "xx"):
        detect = minisbd.SBDetect(str(write_splitter(lang, tmp_path / f"{lang}.onnx")), use_gpu=False)
        for _ in range(300):
            paragraph = " ".join("".join(rng.choices(pieces, k=rng.randint(1, 25))).split())
            if paragraph:
                assert split_sentences(paragraph, lang) == detect.sentences(paragraph), (lang, paragraph)
