"""What clients may send to the translating routes: each operation's fields as a pydantic model, bounded by
this server's limits (texts, characters, beam), and each refusal as one line naming the field. The gate
gathers the fields (the query string, then a JSON or form body over it); these models check them, and give
the OpenAPI document its request bodies.

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

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypeVar

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
from nmt.rules.registry import settings_fields
from nmt.serve.payloads import ApiError, Fields, Limits, clipped, kind

M = TypeVar("M", bound=BaseModel)
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


class Asked(BaseModel):
    """The fields every translating operation shares; `q` is bounded by the server's limits (`bounded`)."""

    q: str | list[str]
    api_key: str | None = Field(None, description=KEY)

    @model_validator(mode="before")
    @classmethod
    def _blanks_are_missing(cls, fields: Any) -> Any:
        return {k: v for k, v in fields.items() if v != ""} if isinstance(fields, dict) else fields


class TranslateAsked(Asked):
    """POST /translate, LibreTranslate's fields (others are ignored, as LibreTranslate does)."""

    model_config = ConfigDict(extra="ignore")

    source: str = Field(
        min_length=1, description="The source language, or auto: the one source served into target."
    )
    target: str = Field(min_length=1, description="The target language.")
    format: Literal["text"] = Field("text", description="Only text (LibreTranslate's html is not served).")
    alternatives: int = 0


class V1TranslateAsked(Asked):
    """POST /v1/translate; an unknown field is refused (a typo would otherwise be ignored silently)."""

    model_config = ConfigDict(extra="forbid")

    source: str | None = Field(None, description="The source language (with target; or auto).")
    target: str | None = Field(
        None,
        description="The target language; without source, target and model: "
        "the one pair served, if there is one.",
    )
    model: str | None = Field(None, description="A model of /v1/models (default: the pair's default).")
    nbest: int = 1
    beam_size: int = 0
    attention: Annotated[bool, BOOLEAN] = Field(False, description="Return the attention of each hypothesis.")
    alignments: Annotated[bool, BOOLEAN] = Field(
        False,
        description="Return the word alignment of each hypothesis: [source word, output word] pairs, from 0.",
    )

    def search_given(self) -> dict[str, Any]:
        """The search settings this request gives (the fields `bounded` adds; absent: the model's own)."""
        return {name: value for name in SEARCH_FIELDS if (value := getattr(self, name, None)) is not None}


@dataclass(frozen=True)
class RequestModels:
    """The models of the translating operations, bounded by one server's limits."""

    translate: type[TranslateAsked]
    v1_translate: type[V1TranslateAsked]


def bounded(limits: Limits) -> RequestModels:
    """The request models with `limits` in their fields (and so in the OpenAPI document)."""
    chars, beam = limits.max_chars, limits.max_beam

    class BoundedTexts(Asked):
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
            "all); each line of a text is translated alone (blank lines stay blank)."
        )

    class Translate(BoundedTexts, TranslateAsked):
        alternatives: Annotated[int, Field(ge=0, le=beam - 1), LIBRETRANSLATE_WHOLE_NUMBER] = Field(
            0, description="How many other translations to return besides the best one."
        )

    class Searched(BoundedTexts, V1TranslateAsked):
        nbest: Annotated[int, Field(ge=1, le=beam), WHOLE_NUMBER] = Field(
            1, description="Hypotheses per line."
        )
        beam_size: Annotated[int, Field(ge=0, le=beam), WHOLE_NUMBER] = Field(
            0, description="The beam (0: the model's own; widened to nbest)."
        )

    v1_translate = create_model("V1Translate", __base__=Searched, **search_fields())
    return RequestModels(Translate, v1_translate)


SEARCH_FIELDS = tuple(f.name for f in settings_fields())  # every search rule's and processor's own settings


def search_fields() -> dict[str, Any]:
    """A request field for each setting a search rule or processor declares (nmt/rules/registry.py): its
    type's strict check, its range and meaning; absent, the model's own applies."""
    types, found = setting_types(), {}
    for declared in settings_fields():
        kind, allowed = types[declared.name], declared.metadata.get("range")
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
        case "literal_error":
            return f"{name} must be {context['expected']}, not {_shown(value)}"
        case "too_short":
            return f"{name} is an empty list; send at least one text"
        case "too_long":
            found, most = context["actual_length"], context["max_length"]
            return f"{name} holds {found} texts; this server takes at most {most}"
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
