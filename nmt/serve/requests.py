"""What a request to the translating routes is, in one place: its fields read from the query string and the
body (JSON, or a form as LibreTranslate clients send) over it (`parse_fields`, which the gate calls); each
operation's fields as a pydantic model, bounded by this server's limits (texts, characters, beam) and giving
the OpenAPI document its request bodies (`bounded`, `openapi_body`); and every refusal, an ApiError whose
message names the field, answered as `{"error": message}`.

No value is converted to another type, with two exceptions, both for text:
- JSON values have JSON's types: a boolean is true or false, a number a JSON number (a whole number may be 2
  or 2.0: JSON has one type of number), a text a string. Only LibreTranslate's `alternatives` may also be a
  string of digits, as LibreTranslate itself reads it with int().
- Values of a form or the query string are text: a boolean is one of TEXT_BOOLEANS (any case: true/false,
  1/0, on/off, which Python, JavaScript, PHP and a ticked HTML checkbox send), a whole number is written in
  digits (`WHOLE`), another number in decimals (`DECIMAL`: 0.5, 1e-3).
An empty value ("") is a field not sent, in JSON too (LibreTranslate clients send `"api_key": ""`).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypeVar
from urllib.parse import parse_qsl

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    ValidationInfo,
    create_model,
    model_validator,
)
from pydantic_core import ErrorDetails, PydanticCustomError

from nmt.config.search_flags import setting_types
from nmt.config.sections import SearchLimits
from nmt.decode.markup import Page, read_page
from nmt.errors import UserError
from nmt.rules.registry import settings_fields
from nmt.serve.multipart import Upload, multipart_fields

M = TypeVar("M", bound=BaseModel)
MAX_JSON_DEPTH = 32


class ApiError(Exception):
    """A request the server refuses: HTTP `status` and a message naming the problem."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Fields:
    """A request's fields by name (`values`); `texts`: those that came as text, from the query string or a
    form, whose values are all strings (a JSON body's values have JSON's types)."""

    values: dict[str, Any]
    texts: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Limits:
    """What one request may ask for: texts in `q`, characters in all of them, and the body's bytes (JSON may
    escape a character as \\uXXXX: 6 bytes, plus room for the other fields)."""

    max_texts: int = 128
    max_chars: int = 20_000
    max_beam: int = 16
    max_terms: int = 100  # glossary entries
    max_term_chars: int = 100  # characters of a glossary term

    @property
    def max_body(self) -> int:
        glossary = self.max_terms * (2 * 6 * self.max_term_chars + 8)
        return 64 * 1024 + 6 * self.max_chars + 8 * self.max_texts + glossary


def parse_fields(body: bytes, content_type: str, query: bytes) -> Fields:
    """The request's fields: those of the query string, then those of the body (a JSON object, or a
    urlencoded form) over them, and which came as text. Invalid UTF-8, malformed JSON, a field given twice
    → 400."""
    texts = _form(query, "the query string")
    media = content_type.split(";")[0].strip().lower()
    if not body.strip():
        return Fields(texts, frozenset(texts))
    if media == "application/json" or media.endswith("+json"):
        typed = _json_object(body)
        return Fields(texts | typed, frozenset(texts.keys() - typed.keys()))
    if media in ("application/x-www-form-urlencoded", ""):
        texts |= _form(body, "the form")
        return Fields(texts, frozenset(texts))
    if media == "multipart/form-data":
        try:
            values = texts | multipart_fields(body, content_type)
        except ValueError as err:
            raise ApiError(400, str(err)) from err
        return Fields(values, frozenset(name for name, value in values.items() if isinstance(value, str)))
    raise ApiError(
        415,
        f"a body of type {media} is not understood; send JSON or a form (urlencoded or multipart)",
    )


def utf8_text(data: bytes, what: str, encoding: str = "utf-8") -> str:
    """`data` decoded (`encoding`: utf-8, or utf-8-sig to drop a byte-order mark); an ApiError naming `what`
    and the first bad byte where it is not UTF-8."""
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as err:
        raise ApiError(
            400, f"{what} is not valid UTF-8 (byte {data[err.start]:#04x} at {err.start}); send UTF-8 text"
        ) from err


def served_page(text: str) -> Page:
    """`text` read as an HTML page (nmt/decode/markup.py); a page that cannot be read is an ApiError."""
    try:
        return read_page(text)
    except UserError as err:
        raise ApiError(400, str(err)) from err


def _json_object(body: bytes) -> dict[str, Any]:
    def no_constants(name: str) -> None:
        raise ValueError(f"{name} is not a JSON number")

    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        found = dict(pairs)
        if len(found) < len(pairs):
            raise ValueError("a key is given twice")
        return found

    text = utf8_text(body, "the JSON body")
    try:
        value = json.loads(text, parse_constant=no_constants, object_pairs_hook=unique)
    except (ValueError, RecursionError) as err:
        raise ApiError(400, f"the body is not valid JSON: {str(err)[:200]}") from err
    if not isinstance(value, dict):
        raise ApiError(400, f"the JSON body must be an object, not {kind(value)}")
    _check_json(value)
    return value


def _check_json(body: dict[str, Any]) -> None:
    """Refuse a body nested deeper than MAX_JSON_DEPTH levels, or with an unpaired surrogate in a string or a
    name: a \\ud800 escape is valid JSON but no text (it cannot be encoded, translated or named in an answer).
    Level by level, without recursion: a body nested deep enough would exhaust Python's stack."""
    depth, level = 0, [("", body)]
    while level:
        depth += any(isinstance(value, dict | list) for _, value in level)
        if depth > MAX_JSON_DEPTH:
            raise ApiError(400, f"the JSON body is nested deeper than {MAX_JSON_DEPTH} levels")
        below: list[tuple[str, Any]] = []
        for where, value in level:
            if isinstance(value, str) and not _is_text(value):
                raise ApiError(400, f"{where} holds an unpaired surrogate; send UTF-8 text")
            if isinstance(value, dict):
                for name, child in value.items():
                    if not _is_text(name):
                        shown = name.encode("utf-8", "backslashreplace").decode()
                        raise ApiError(400, f"the field name {shown!r} holds an unpaired surrogate")
                    below.append((f"{where}.{name}" if where else name, child))
            elif isinstance(value, list):
                below.extend((f"{where}[{i}]", child) for i, child in enumerate(value))
        level = below


def _is_text(value: str) -> bool:
    """Whether `value` can be encoded as UTF-8 (it holds no unpaired surrogate)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _form(data: bytes, what: str) -> dict[str, str]:
    try:
        pairs = parse_qsl(utf8_text(data, what), keep_blank_values=True, errors="strict")
    except UnicodeDecodeError as err:
        raise ApiError(400, f"{what} is not valid UTF-8 once percent-decoded") from err
    fields = dict(pairs)
    if len(fields) < len(pairs):
        twice = sorted(k for k, count in Counter(k for k, _ in pairs).items() if count > 1)
        raise ApiError(400, f"{', '.join(twice)} given more than once in {what}")
    return fields


def kind(value: Any) -> str:
    """What a JSON value is, in words: 'an object', 'a string', 'null', …"""
    kinds = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}
    return kinds.get(type(value), "a file" if isinstance(value, Upload) else "a number")


def clipped(text: str, most: int = 40) -> str:
    """`text`, cut to `most` characters (an ellipsis says so): a client's value quoted in a message."""
    return text if len(text) <= most else f"{text[: most - 1]}…"


TEXT_BOOLEANS = {"true": True, "false": False, "1": True, "0": False, "on": True, "off": False}
WHOLE = re.compile(r"[+-]?[0-9]{1,4000}")  # a whole number as text: ASCII digits (Python reads up to 4300)
DECIMAL = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")  # a number as text: 0.5, 1e-3
FORM_BOOLEANS = "in a form: true/false, 1/0, on/off"


def _texts(info: ValidationInfo) -> frozenset[str]:
    """The fields that came as text (`validated` passes them as the context)."""
    return info.context.get("texts", frozenset()) if isinstance(info.context, dict) else frozenset()


def _boolean(value: Any, info: ValidationInfo) -> bool:
    if isinstance(value, str) and info.field_name in _texts(info):
        value = TEXT_BOOLEANS.get(value.lower(), value)
    if not isinstance(value, bool):
        raise PydanticCustomError("bool_type", "must be true or false")
    return value


def _number(whole: bool, digit_strings: bool = False) -> Callable[[Any, ValidationInfo], Any]:
    """A number's check before pydantic's (which, for a whole number, takes 2 and 2.0 and refuses 2.5): no
    boolean; a string only as text, or in JSON where `digit_strings`, and then written as `WHOLE` or
    `DECIMAL` says."""
    kind, text, read = ("int", WHOLE, int) if whole else ("float", DECIMAL, float)

    def check(value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, bool):
            raise PydanticCustomError(f"{kind}_type", "must be a number")
        if not isinstance(value, str):
            return value
        if not digit_strings and info.field_name not in _texts(info):
            raise PydanticCustomError("json_number", "must be a JSON number")
        if not text.fullmatch(value):
            raise PydanticCustomError(f"{kind}_parsing", "must be a number")
        return read(value)

    return check


BOOLEAN = BeforeValidator(_boolean)
WHOLE_NUMBER = BeforeValidator(_number(whole=True))  # last in a field's Annotated, after its bounds
LIBRETRANSLATE_WHOLE_NUMBER = BeforeValidator(_number(whole=True, digit_strings=True))
NUMBER = BeforeValidator(_number(whole=False))
KEY = "A key of the server's --api-key-file (or send `Authorization: Bearer KEY`, or ?api_key=KEY)."


class KeyedRequest(BaseModel):
    """The field every operation takes; an empty value is a field not sent."""

    api_key: str | None = Field(None, description=KEY)

    @model_validator(mode="before")
    @classmethod
    def _blanks_are_missing(cls, fields: Any) -> Any:
        return {k: v for k, v in fields.items() if v != ""} if isinstance(fields, dict) else fields


class TextRequest(KeyedRequest):
    """The fields every translating operation shares; `q` is bounded by the server's limits (`bounded`)."""

    q: str | list[str]


class TranslateFileRequest(KeyedRequest):
    """POST /translate_file, LibreTranslate's multipart form (other fields are ignored, as LibreTranslate
    does); the file's text is bounded as `q` is, once read."""

    model_config = ConfigDict(extra="ignore", arbitrary_types_allowed=True)

    file: Upload
    source: str = Field(min_length=1)
    target: str = Field(min_length=1)


class TranslateRequest(TextRequest):
    """POST /translate, LibreTranslate's fields (others are ignored, as LibreTranslate does)."""

    model_config = ConfigDict(extra="ignore")

    source: str = Field(
        min_length=1, description="The source language, or auto: the one source served into target."
    )
    target: str = Field(min_length=1, description="The target language.")
    format: Literal["text", "html"] = Field(
        "text", description="text, or html: block-level text translated, inline tags placed on its words."
    )
    alternatives: int = 0
    glossary: list[tuple[str, str]] | None = None


class DetectRequest(TextRequest):
    """POST /detect, LibreTranslate's fields (others are ignored, as LibreTranslate does)."""

    model_config = ConfigDict(extra="ignore")


class V1TranslateRequest(TextRequest):
    """POST /v1/translate; an unknown field is refused (a typo would otherwise be ignored silently)."""

    model_config = ConfigDict(extra="forbid")

    source: str | None = Field(None, description="The source language (with target; or auto).")
    target: str | None = Field(
        None,
        description="The target language; without source, target and model: "
        "the one pair served, if there is one.",
    )
    model: str | None = Field(None, description="A model of /v1/models (default: the pair's default).")
    format: Literal["text", "html"] = Field(
        "text", description="text, or html: block-level text translated (a line each), inline tags placed."
    )
    attention: Annotated[bool, BOOLEAN] = Field(False, description="Return the attention of each hypothesis.")
    alignments: Annotated[bool, BOOLEAN] = Field(
        False,
        description="Return the word alignment of each hypothesis: [source word, output word] pairs, from 0.",
    )
    split_sentences: Annotated[bool, BOOLEAN] = Field(
        True,
        description="Translate each line sentence by sentence, as a model trained on sentences needs (false: "
        "each line whole, and one over the model's limit is cut, as `cut` says).",
    )
    glossary: list[tuple[str, str]] | None = None

    def search_given(self) -> dict[str, Any]:
        """The search settings this request gives (the fields `bounded` adds; absent: the model's own)."""
        return {name: value for name in SEARCH_FIELDS if (value := getattr(self, name, None)) is not None}


@dataclass(frozen=True)
class RequestModels:
    """The models of the translating operations, bounded by one server's limits."""

    translate: type[TranslateRequest]
    detect: type[DetectRequest]
    v1_translate: type[V1TranslateRequest]


def bounded(limits: Limits) -> RequestModels:
    """The request models with `limits` in their fields (and so in the OpenAPI document)."""
    chars, beam = limits.max_chars, limits.max_beam
    term = Annotated[str, Field(min_length=1, max_length=limits.max_term_chars)]
    described_glossary = Field(
        None,
        description=f"[source term, target term] pairs, at most {limits.max_terms}, each term at most "
        f"{limits.max_term_chars} characters: written into each line's source for a model trained with "
        "terminology annotation (an HTML page's: where no tag cuts a term), else the constraints of the "
        "torch engine's constrained search (each hypothesis names its unmet_terms), beside the server's "
        "glossary "
        "(an entry replaces the server's of the same source term; absent or empty: the server's alone).",
    )
    terms = Annotated[list[tuple[term, term]] | None, Field(max_length=limits.max_terms)]

    class BoundedTexts(TextRequest):
        q: Annotated[
            Annotated[str, Field(min_length=1, max_length=chars), Tag("text")]
            | Annotated[
                list[Annotated[str, Field(max_length=chars)]],
                Field(min_length=1, max_length=limits.max_texts),
                Tag("texts"),
            ],
            Discriminator(_shape),
            AfterValidator(functools.partial(_within, chars)),
        ] = Field(
            description=f"A text, or a list of at most {limits.max_texts} texts ({chars} characters in "
            "all); each line of a text is translated alone, sentence by sentence (blank lines stay blank)."
        )

    class Translate(BoundedTexts, TranslateRequest):
        alternatives: Annotated[int, Field(ge=0, le=beam - 1), LIBRETRANSLATE_WHOLE_NUMBER] = Field(
            0, description="How many other translations to return besides the best one."
        )
        glossary: terms = described_glossary

    class Detect(BoundedTexts, DetectRequest):
        pass

    class Searched(BoundedTexts, V1TranslateRequest):
        glossary: terms = described_glossary

    v1_translate = create_model("V1Translate", __base__=Searched, **search_fields(beam))
    return RequestModels(Translate, Detect, v1_translate)


SERVED_LIMITS = ("nbest", "beam_size")  # the search's own settings a request gives (beam widened to nbest)
SEARCH_FIELDS = (*SERVED_LIMITS, *(f.name for f in settings_fields()))  # and every rule's and processor's


def search_fields(max_beam: int) -> dict[str, Any]:
    """A request field for each of `SERVED_LIMITS` and each setting a search rule or processor declares
    (nmt/rules/registry.py): its type's strict check, its range (a beam and an n-best list at most
    `max_beam`, the server's limit) and meaning; absent, the model's own applies."""
    types, found = setting_types(), {}
    own = [f for f in dataclasses.fields(SearchLimits) if f.name in SERVED_LIMITS]
    for declared in [*own, *settings_fields()]:
        kind, allowed = types[declared.name], declared.metadata.get("range")
        if declared.name in SERVED_LIMITS:
            allowed = dataclasses.replace(declared.metadata["range"], high=max_beam)
        bounds: dict[str, Any] = {}
        if allowed is not None:
            bounds |= {} if allowed.low is None else {"gt" if allowed.low_open else "ge": allowed.low}
            bounds |= {} if allowed.high is None else {"lt" if allowed.high_open else "le": allowed.high}
        strict = BOOLEAN if kind is bool else WHOLE_NUMBER if kind is int else NUMBER
        meaning = declared.metadata["meaning"]
        described = Field(None, description=f"{meaning[0].upper()}{meaning[1:]} (absent: the model's own).")
        found[declared.name] = (Annotated[kind | None, Field(**bounds), strict], described)
    return found


def _shape(value: Any) -> str:
    """Which member of q's union checks `value`: a list is texts, anything else must be a text."""
    return "texts" if isinstance(value, list) else "text"


def _within(chars: int, q: str | list[str]) -> str | list[str]:
    found = sum(map(len, q)) if isinstance(q, list) else len(q)
    if found > chars:
        raise PydanticCustomError(
            "too_many_characters",
            "q holds {found} characters; this server takes at most {chars}",
            {"found": found, "chars": chars},
        )
    return q


def validated(model: type[M], fields: Fields) -> M:
    """`fields` checked by `model`; the first problem is an ApiError (400) naming the field."""
    try:
        return model.model_validate(fields.values, context={"texts": fields.texts})
    except ValidationError as err:
        raise ApiError(400, _message(err.errors(include_url=False), model, fields.texts)) from err


def _message(errors: list[ErrorDetails], model: type[BaseModel], texts: frozenset[str]) -> str:
    unknown = [clipped(str(e["loc"][0])) for e in errors if e["type"] == "extra_forbidden"]
    if unknown:
        return f"unknown field(s) {', '.join(unknown)}; expected some of {', '.join(model.model_fields)}"
    error = errors[0]
    name = _name(error["loc"])
    value, context = error["input"], error.get("ctx", {})
    match error["type"]:
        case "too_many_characters":
            return error["msg"]
        case "missing":
            return f"Invalid request: missing {name} parameter"  # LibreTranslate's words
        case "string_type":
            return f"{name} must be a string, not {kind(value)}"
        case "int_type" | "int_parsing" | "int_from_float" | "finite_number":
            return f"{name} must be a whole number, not {_shown(value)}"
        case "json_number":
            return f"{name} must be a JSON number, not the string {_shown(value)}"
        case "bool_type" if name in texts:
            return f"{name} must be true or false, not {_shown(value)} ({FORM_BOOLEANS})"
        case "bool_type":
            shown = f"the string {_shown(value)}" if isinstance(value, str) else _shown(value)
            return f"{name} must be true or false, not {shown}"
        case "float_type" | "float_parsing":
            return f"{name} must be a number, not {_shown(value)}"
        case "greater_than":
            return f"{name}={value} must be above {context['gt']}"
        case "less_than":
            return f"{name}={value} must be below {context['lt']}"
        case "greater_than_equal":
            return f"{name}={value} must be at least {context['ge']}"
        case "less_than_equal":
            return f"{name}={value} must be at most {context['le']}"
        case "is_instance_of":
            return f"{name} must be a file (a part of a multipart form with a filename), not {kind(value)}"
        case "literal_error":
            return f"{name} must be {context['expected']}, not {_shown(value)}"
        case "missing" if name.startswith("glossary["):
            return f"{name.rsplit('[', 1)[0]} must be a [source term, target term] pair"
        case "list_type" | "tuple_type" | "too_short" | "too_long" if name.startswith("glossary["):
            return f"{name} must be a [source term, target term] pair, not {_shown(value)}"
        case "list_type" if name == "glossary":
            return f"glossary must be a list of [source term, target term] pairs, not {kind(value)}"
        case "string_too_short":
            return f"{name} is an empty string"
        case "too_short":
            return f"{name} is an empty list; send at least one text"
        case "too_long":
            found, most = context["actual_length"], context["max_length"]
            what = "entries" if name == "glossary" else "texts"
            return f"{name} holds {found} {what}; this server takes at most {most}"
        case "string_too_long":
            return f"{name} holds {len(value)} characters; this server takes at most {context['max_length']}"
    return f"{name}: {error['msg']}"


def _name(loc: tuple[int | str, ...]) -> str:
    """A field as the client wrote it: `q`, `q[1]` (pydantic's names of union members left out)."""
    return f"{loc[0]}" + "".join(f"[{part}]" for part in loc[1:] if isinstance(part, int))


def _shown(value: Any) -> str:
    """A number or a string as the client wrote it (clipped), anything else by its kind."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return kind(value)
    return clipped(repr(value))


def openapi_body(model: type[BaseModel]) -> dict[str, Any]:
    """The request body of an operation, as JSON or as a form, from the model that checks its fields."""
    schema = model.model_json_schema()
    return {
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": schema},
                "application/x-www-form-urlencoded": {"schema": _one_value_each(schema)},
            },
        }
    }


def _one_value_each(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` for a form, which holds one value per field (a field given twice is refused): the list
    branches of each field are left out."""
    properties = {}
    for name, field in schema["properties"].items():
        kept = [branch for branch in field.get("oneOf", []) if branch.get("type") != "array"]
        one = {k: v for k, v in field.items() if k != "oneOf"} | (kept[0] if len(kept) == 1 else {})
        properties[name] = one if "oneOf" in field else field
    return schema | {"properties": properties}
