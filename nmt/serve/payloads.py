"""What clients send, checked: the body (JSON, or a form as LibreTranslate clients send), then each field's
type and range. Every problem is an ApiError whose message names it, answered as `{"error": message}`."""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

Fields = dict[str, Any]
MAX_JSON_DEPTH = 32


class ApiError(Exception):
    """A request the server refuses: HTTP `status` and a message naming the problem."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Limits:
    """What one request may ask for: texts in `q`, characters in all of them, and the body's bytes (JSON may
    escape a character as \\uXXXX: 6 bytes, plus room for the other fields)."""

    max_texts: int = 128
    max_chars: int = 20_000
    max_beam: int = 16

    @property
    def max_body(self) -> int:
        return 64 * 1024 + 6 * self.max_chars + 8 * self.max_texts


def parse_fields(body: bytes, content_type: str, query: bytes) -> Fields:
    """The request's fields: those of the query string, then those of the body (a JSON object, or a
    urlencoded form) over them. Invalid UTF-8, malformed JSON, a field given twice → 400."""
    fields = _form(query, "the query string")
    media = content_type.split(";")[0].strip().lower()
    if not body.strip():
        return fields
    if media == "application/json" or media.endswith("+json"):
        return fields | _json_object(body)
    if media in ("application/x-www-form-urlencoded", ""):
        return fields | _form(body, "the form")
    raise ApiError(
        415, f"a body of type {media} is not understood; send application/json or a urlencoded form"
    )


def _text(data: bytes, what: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ApiError(
            400, f"{what} is not valid UTF-8 (byte {data[err.start]:#04x} at {err.start})"
        ) from err


def _json_object(body: bytes) -> Fields:
    def no_constants(name: str) -> None:
        raise ValueError(f"{name} is not a JSON number")

    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        found = dict(pairs)
        if len(found) < len(pairs):
            raise ValueError("a key is given twice")
        return found

    text = _text(body, "the JSON body")
    try:
        value = json.loads(text, parse_constant=no_constants, object_pairs_hook=unique)
    except (ValueError, RecursionError) as err:
        raise ApiError(400, f"the body is not valid JSON: {str(err)[:200]}") from err
    if not isinstance(value, dict):
        raise ApiError(400, f"the JSON body must be an object, not {_kind(value)}")
    if _depth(value) > MAX_JSON_DEPTH:
        raise ApiError(400, f"the JSON body is nested deeper than {MAX_JSON_DEPTH} levels")
    return value


def _depth(value: Any) -> int:
    """Levels of objects and lists, counted a level at a time (no recursion: a body nested deep enough would
    exhaust Python's stack)."""
    depth, level = 0, [value]
    while containers := [v for v in level if isinstance(v, dict | list)]:
        depth += 1
        level = [child for v in containers for child in (v.values() if isinstance(v, dict) else v)]
    return depth


def _form(data: bytes, what: str) -> Fields:
    try:
        pairs = parse_qsl(_text(data, what), keep_blank_values=True, errors="strict")
    except UnicodeDecodeError as err:
        raise ApiError(400, f"{what} is not valid UTF-8 once percent-decoded") from err
    fields = dict(pairs)
    if len(fields) < len(pairs):
        twice = sorted(k for k, count in Counter(k for k, _ in pairs).items() if count > 1)
        raise ApiError(400, f"{', '.join(twice)} given more than once in {what}")
    return fields


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number"
    )


def texts(fields: Fields, limits: Limits) -> tuple[list[str], bool]:
    """`q`: a string or a non-empty list of strings, within the limits; returns the texts and whether `q` was
    a list."""
    q = fields.get("q")
    if q is None or q == "":
        raise ApiError(400, "Invalid request: missing q parameter")
    many = isinstance(q, list)
    found = q if many else [q]
    if not found:
        raise ApiError(400, "q is an empty list; send at least one text")
    if len(found) > limits.max_texts:
        raise ApiError(400, f"q holds {len(found)} texts; this server takes at most {limits.max_texts}")
    for i, text in enumerate(found):
        where = f"q[{i}]" if many else "q"
        if not isinstance(text, str):
            raise ApiError(400, f"{where} must be a string, not {_kind(text)}")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as err:
            raise ApiError(400, f"{where} holds an unpaired surrogate ({text[err.start]!r})") from err
    chars = sum(map(len, found))
    if chars > limits.max_chars:
        raise ApiError(400, f"q holds {chars} characters; this server takes at most {limits.max_chars}")
    return found, many


def string(fields: Fields, name: str, required: bool = True) -> str | None:
    """A string field; a missing required one → 400."""
    value = fields.get(name)
    if value is None or value == "":
        if required:
            raise ApiError(400, f"Invalid request: missing {name} parameter")
        return None
    if not isinstance(value, str):
        raise ApiError(400, f"{name} must be a string, not {_kind(value)}")
    return value


def integer(fields: Fields, name: str, default: int, low: int, high: int) -> int:
    """An integer field (a JSON number, or digits in a form) within [low, high]."""
    value = fields.get(name, default)
    if isinstance(value, str) and re.fullmatch(r"-?[0-9]{1,11}", value.strip()):
        value = int(value)
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ApiError(400, f"{name} must be a whole number, not {_kind(value)}")
    if not low <= value <= high:
        raise ApiError(400, f"{name}={value} must be between {low} and {high}")
    return value


def boolean(fields: Fields, name: str, default: bool) -> bool:
    """A boolean field (JSON true/false, or true/false/1/0 in a form)."""
    value = fields.get(name, default)
    if isinstance(value, str) and value.lower() in ("true", "false", "1", "0"):
        value = value.lower() in ("true", "1")
    if not isinstance(value, bool):
        raise ApiError(400, f"{name} must be true or false, not {_kind(value)}")
    return value


def only(fields: Fields, known: set[str]) -> None:
    """Refuse fields the endpoint does not know (a typo would otherwise be ignored silently)."""
    unknown = sorted(set(fields) - known)
    if unknown:
        raise ApiError(
            400, f"unknown field(s) {', '.join(unknown)}; expected some of {', '.join(sorted(known))}"
        )
