"""The sentence splitter of an Argos Translate package: written rules as a small ONNX graph for MiniSBD.

argostranslate splits each paragraph into sentences with MiniSBD (github.com/LibreTranslate/MiniSBD), which
runs the package's `minisbd/<lang>.onnx` on the paragraph's characters. Ours is not a trained model: the
graph computes the rules `description(lang)` states (the package's README and metadata carry that text), the
rules and tables of nmt/data/sentences.py, which splits running text for `nmt translate` and the server.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np

from nmt.data.sentences import (
    CLOSERS,
    CLOSERS_AFTER,
    DIGITS,
    LANGUAGES,
    OPENERS,
    RULES,
    TERMINALS,
    Language,
    is_lowercase,
)
from nmt.errors import UserError

if TYPE_CHECKING:
    import onnx

FEATURES = ["space_before", "capitalized"]  # MiniSBD computes them per character: features 0 and 1
SENTENCE_END = 2  # MiniSBD's classes: 0 inside a token, 1 token end, 2 sentence end, 3/4 multi-word token
CLASSES = 5
OPSET, IR_VERSION = 17, 8  # read by onnxruntime from 1.13 on
# MiniSBD cuts longer paragraphs into pieces of max_seqlen characters; one paragraph at a time.
CONFIG = {"feat_funcs": FEATURES, "max_seqlen": 10_000, "batch_size": 1, "skip_newline": False}


def import_onnx() -> ModuleType:
    """The onnx package, or a UserError saying how to install it."""
    try:
        import onnx
    except ImportError:
        raise UserError("onnx is not installed; install it with `pip install 'nmt[argos]'`") from None
    return onnx


def description(lang: str) -> str:
    """RULES and the abbreviations listed for `lang`."""
    listed = LANGUAGES.get(lang, Language()).abbreviations
    shown = ", ".join(map(repr, listed)) if listed else "none"
    return f"{RULES} Computed by an ONNX graph.\nAbbreviations listed for {lang}: {shown}."


def vocabulary(lang: str) -> list[str]:
    """MiniSBD's units: `<PAD>` (0), `<UNK>` (1), then every character a rule looks at (others are `<UNK>`):
    punctuation, quotes, brackets, digits, space, the abbreviations' letters and every lowercase letter of
    the Basic Multilingual Plane (Unicode category Ll, in this Python's Unicode tables)."""
    lowercase = (chr(c) for c in range(0x10000) if is_lowercase(chr(c)))
    listed = "".join(LANGUAGES.get(lang, Language()).abbreviations)
    chars = {*TERMINALS, *CLOSERS, *OPENERS, *DIGITS, " ", *listed, *lowercase}
    return ["<PAD>", "<UNK>", *sorted(chars)]


def splitter_model(lang: str) -> onnx.ModelProto:
    """The ONNX model that splits sentences of language `lang` by `description(lang)`.

    Inputs `units` (batch, length) int64 character ids and `features` (batch, length, 2) float32 (space
    before, capitalized), as MiniSBD computes them; output `logits` (batch, length, 5), one-hot: class 2 at a
    sentence's last character, class 0 elsewhere. The metadata holds MiniSBD's `config`, `vocab`, `lexicon`.
    """
    onnx = import_onnx()
    units = vocabulary(lang)
    unit_ids = {unit: i for i, unit in enumerate(units)}
    graph = _Graph(onnx, unit_ids)
    graph.sentence_ends(LANGUAGES.get(lang, Language()))
    model = onnx.helper.make_model(
        graph.make(f"nmt sentence splitter ({lang})"),
        opset_imports=[onnx.helper.make_opsetid("", OPSET)],
        ir_version=IR_VERSION,
        producer_name="nmt",
    )
    vocab = {"lang": lang, "idx": 0, "cutoff": 0, "lower": False, "_id2unit": units, "_unit2id": unit_ids}
    props = {
        "lang_code": lang,
        "config": json.dumps(CONFIG),
        "vocab": json.dumps(vocab, ensure_ascii=False),
        "lexicon": "null",
        "description": description(lang),
    }
    onnx.helper.set_model_props(model, props)
    onnx.checker.check_model(model, full_check=True)
    return model


def write_splitter(lang: str, path: Path) -> Path:
    """Write the splitter for `lang` to `path` (its folder is created); returns `path`."""
    onnx = import_onnx()
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(splitter_model(lang), str(path))
    return path


class _Graph:
    """The nodes of one ONNX graph over the inputs `units` and `features`; each method returns the name of
    its output. Flags are float32 0/1 tensors (batch, length): `all` multiplies, `any` takes the maximum."""

    def __init__(self, onnx_module: ModuleType, unit_ids: dict[str, int]) -> None:
        self.onnx, self.unit_ids = onnx_module, unit_ids
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []

    def const(self, value: np.ndarray) -> str:
        name = f"c{len(self.initializers)}"
        self.initializers.append(self.onnx.numpy_helper.from_array(value, name))
        return name

    def op(self, op_type: str, *inputs: str, **attrs: object) -> str:
        name = f"{op_type.lower()}{len(self.nodes)}"
        self.nodes.append(self.onnx.helper.make_node(op_type, list(inputs), [name], **attrs))
        return name

    def is_any(self, chars: str) -> str:
        """1 where the unit is one of `chars`."""
        table = np.zeros(len(self.unit_ids), np.float32)
        table[[self.unit_ids[c] for c in chars]] = 1
        return self.op("Gather", self.const(table), "units")

    def feature(self, index: int) -> str:
        return self.op("Gather", "features", self.const(np.array(index, np.int64)), axis=2)

    def shift(self, x: str, by: int, fill: float | int) -> str:
        """`x` moved along the length: the value at i is x[i - by] (x[i + |by|] for a negative `by`), `fill`
        beyond the paragraph's ends (an int `fill` for int64 tensors)."""
        if by == 0:
            return x
        dtype = np.int64 if isinstance(fill, int) else np.float32
        pads = [0, by, 0, 0] if by > 0 else [0, 0, 0, -by]
        padded = self.op("Pad", x, self.const(np.array(pads, np.int64)), self.const(np.array(fill, dtype)))
        start, end = (0, -by) if by > 0 else (-by, np.iinfo(np.int64).max)
        starts_ends_axes = [self.const(np.array([v], np.int64)) for v in (start, end, 1)]
        return self.op("Slice", padded, *starts_ends_axes)

    def all(self, *flags: str) -> str:
        result = flags[0]
        for flag in flags[1:]:
            result = self.op("Mul", result, flag)
        return result

    def any(self, *flags: str) -> str:
        return self.op("Max", *flags)

    def negate(self, flag: str) -> str:
        return self.op("Sub", self.const(np.array(1, np.float32)), flag)

    def sentence_ends(self, language: Language) -> None:
        """The nodes of RULES, ending in the logits (batch, length, 5)."""
        pad = self.op("Cast", self.op("Equal", "units", self.const(np.array(0, np.int64))), to=1)
        space = self.feature(0)
        boundary = self.any(space, pad, self.is_any(OPENERS))  # what may precede a word
        lowercase = self.is_any("".join(c for c in self.unit_ids if len(c) == 1 and is_lowercase(c)))
        terminal, closer, dot = self.is_any(TERMINALS), self.is_any(CLOSERS), self.is_any(".")
        after_terminal = [terminal]  # a terminal at i - k, closers from i - k + 1 to i
        for k in range(1, CLOSERS_AFTER + 1):
            closers = [self.shift(closer, j, 0.0) for j in range(k)]
            after_terminal.append(self.all(self.shift(terminal, k, 0.0), *closers))
        next_space = self.shift(space, -1, 0.0)
        gap_after = self.any(next_space, self.shift(pad, -1, 1.0))
        letter = self.any(lowercase, self.feature(1))
        keeps = [  # the next word in lowercase; initials
            self.all(next_space, self.shift(lowercase, -2, 0.0)),
            self.all(dot, self.shift(letter, 1, 0.0), self.shift(boundary, 2, 1.0)),
        ]
        if language.spaced_closers:
            spaced = self.is_any(language.spaced_closers)
            after_terminal.append(self.all(spaced, self.shift(space, 1, 0.0), self.shift(terminal, 2, 0.0)))
            keeps.append(self.all(next_space, self.shift(spaced, -2, 0.0)))
        if language.ordinals:
            digit = self.is_any(DIGITS)
            one = self.all(self.shift(digit, 1, 0.0), self.shift(boundary, 2, 1.0))
            two = self.all(self.shift(digit, 1, 0.0), self.shift(digit, 2, 0.0), self.shift(boundary, 3, 1.0))
            keeps.append(self.all(dot, self.any(one, two)))
        if language.abbreviations:
            keeps.append(self.all(dot, self.abbreviation_end(language.abbreviations, boundary)))
        end = self.all(self.any(*after_terminal), gap_after, *(self.negate(keep) for keep in keeps))
        end = self.op("Unsqueeze", end, self.const(np.array([2], np.int64)))  # (batch, length, 1)
        one_hot = np.eye(CLASSES, dtype=np.float32)
        inside = self.op("Mul", self.negate(end), self.const(one_hot[0]))
        self.op("Add", inside, self.op("Mul", end, self.const(one_hot[SENTENCE_END])))

    def abbreviation_end(self, abbreviations: tuple[str, ...], boundary: str) -> str:
        """1 where one of `abbreviations` ends with a boundary before it: each position's window of the
        `width` units up to it, compared with every abbreviation right-aligned in a table."""
        width = max(map(len, abbreviations)) + 1  # the longest abbreviation and the boundary before it
        expected = np.full((len(abbreviations), width), -1, np.int64)  # (abbreviations, width); -1: any
        needs_boundary = np.zeros((len(abbreviations), width), np.float32)
        for row, abbreviation in enumerate(abbreviations):
            expected[row, width - len(abbreviation) :] = [self.unit_ids[c] for c in abbreviation]
            needs_boundary[row, width - len(abbreviation) - 1] = 1
        axis2 = self.const(np.array([2], np.int64))
        ids = [self.op("Unsqueeze", self.shift("units", width - 1 - j, 0), axis2) for j in range(width)]
        bounds = [self.op("Unsqueeze", self.shift(boundary, width - 1 - j, 1.0), axis2) for j in range(width)]
        window = self.op("Unsqueeze", self.op("Concat", *ids, axis=2), axis2)  # (batch, length, 1, width)
        window_bounds = self.op("Unsqueeze", self.op("Concat", *bounds, axis=2), axis2)
        same = self.op("Cast", self.op("Equal", window, self.const(expected)), to=1)  # (b, l, abbrevs, width)
        unit_ok = self.op("Max", same, self.const((expected < 0).astype(np.float32)))
        boundary_ok = self.op("Max", window_bounds, self.const(1 - needs_boundary))
        matched = self.op("ReduceMin", self.op("Mul", unit_ok, boundary_ok), axes=[3], keepdims=0)
        return self.op("ReduceMax", matched, axes=[2], keepdims=0)  # (batch, length)

    def make(self, name: str) -> onnx.GraphProto:
        """The graph, its last node's output named `logits`."""
        self.nodes[-1].output[0] = "logits"
        tensor, types = self.onnx.helper.make_tensor_value_info, self.onnx.TensorProto
        inputs = [
            tensor("units", types.INT64, ["batch", "length"]),
            tensor("features", types.FLOAT, ["batch", "length", len(FEATURES)]),
        ]
        output = tensor("logits", types.FLOAT, ["batch", "length", CLASSES])
        return self.onnx.helper.make_graph(self.nodes, name, inputs, [output], self.initializers)
