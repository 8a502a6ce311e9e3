"""The Argos package's sentence splitter: MiniSBD's contract, and the sentences it finds in hand-written
paragraphs, run through MiniSBD's own code as argostranslate runs it."""

import json
from pathlib import Path

import numpy as np
import pytest

SPLITS = [  # language, paragraph, the sentences the splitter must find
    (
        "de",
        'Das kostet z. B. 3.5 Euro. Dr. Müller kam um 9 Uhr. Er fragte: "Wirklich?!" Dann ging er.',
        [
            "Das kostet z. B. 3.5 Euro.",
            "Dr. Müller kam um 9 Uhr.",
            'Er fragte: "Wirklich?!"',
            "Dann ging er.",
        ],
    ),
    (
        "de",
        "Hunde, Katzen usw. und Vögel. Katzen usw. Dann kam der Regen... und es hörte nicht auf. "
        "Am 3. Mai war es kalt.",
        [
            "Hunde, Katzen usw. und Vögel.",
            "Katzen usw.",
            "Dann kam der Regen... und es hörte nicht auf.",
            "Am 3. Mai war es kalt.",
        ],
    ),
    (
        "de",
        "J. R. R. Tolkien schrieb Bücher (viele!). „Ja!“ Er sah z.B. Hunde. Sie kosten 1.000 Euro! Warum?",
        [
            "J. R. R. Tolkien schrieb Bücher (viele!).",
            "„Ja!“",
            "Er sah z.B. Hunde.",
            "Sie kosten 1.000 Euro!",
            "Warum?",
        ],
    ),
    (
        "en",
        'Mr. Smith, e.g. a doctor, met Dr. Jones. They talked. It cost $3.50! Why?! "Because." Then I left.',
        [
            "Mr. Smith, e.g. a doctor, met Dr. Jones.",
            "They talked.",
            "It cost $3.50!",
            "Why?!",
            '"Because."',
            "Then I left.",
        ],
    ),
    (
        "fr",
        "M. Dupont est arrivé. Il a dit : « Bonjour ! » Puis il est parti, p. ex. à Paris. Fin.",
        ["M. Dupont est arrivé.", "Il a dit : « Bonjour ! »", "Puis il est parti, p. ex. à Paris.", "Fin."],
    ),
    # Known misses, asserted as they are: no space after the punctuation; a sentence that ends in a single
    # letter, or in German in a number of one or two digits
    (
        "de",
        "Sie sind gut.„Nein“, sagte sie. Er war 12. Dann nahm er Vitamin A. Es half.",
        ["Sie sind gut.„Nein“, sagte sie.", "Er war 12. Dann nahm er Vitamin A. Es half."],
    ),
    ("xx", "Ka lo mi. Su te ra? Be zu! Dr. No.", ["Ka lo mi.", "Su te ra?", "Be zu!", "Dr.", "No."]),
]


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
