"""What clients send, read into fields: the query string, then the body (JSON, or a form as LibreTranslate
clients send) over it; fields.py checks each operation's fields. Every problem is an ApiError whose message
names it, answered as `{"error": message}`."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

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

    @property
    def max_body(self) -> int:
        return 64 * 1024 + 6 * self.max_chars + 8 * self.max_texts


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


def _json_object(body: bytes) -> dict[str, Any]:
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
        pairs = parse_qsl(_text(data, what), keep_blank_values=True, errors="strict")
    except UnicodeDecodeError as err:
        raise ApiError(400, f"{what} is not valid UTF-8 once percent-decoded") from err
    fields = dict(pairs)
    if len(fields) < len(pairs):
        twice = sorted(k for k, count in Counter(k for k, _ in pairs).items() if count > 1)
        raise ApiError(400, f"{', '.join(twice)} given more than once in {what}")
    return fields


def kind(value: Any) -> str:
    """What a JSON value is, in words: 'an object', 'a string', 'null', …"""
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number"
    )


def clipped(text: str, most: int = 40) -> str:
    """`text`, cut to `most` characters (an ellipsis says so): a client's value quoted in a message."""
    return text if len(text) <= most else f"{text[: most - 1]}…"
