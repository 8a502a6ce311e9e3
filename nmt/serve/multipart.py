"""A multipart/form-data body, as browsers and LibreTranslate's clients send a file, read by the standard
library's MIME parser: each part is a field, its value text (UTF-8), or an `Upload` where the part names a
file."""

from __future__ import annotations

from email.message import EmailMessage
from email.parser import BytesParser
from email.policy import HTTP


class Upload:
    """A file sent in a multipart form: its name as the client gave it, and its bytes. Not a dataclass: a
    request model would then take a JSON object for a file."""

    def __init__(self, filename: str, data: bytes) -> None:
        self.filename, self.data = filename, data


def multipart_fields(body: bytes, content_type: str) -> dict[str, str | Upload]:
    """The fields of a multipart/form-data `body` whose header is `content_type` (with its boundary). Raises
    ValueError naming the problem: no boundary, or not the body's; a part without a name; a field given twice;
    a text value that is not UTF-8."""
    head = b"Content-Type: " + content_type.encode("latin-1") + b"\r\n\r\n"
    message = BytesParser(policy=HTTP).parsebytes(head + body)
    if message.defects or not message.is_multipart():
        raise ValueError("the multipart form cannot be read: its boundary is missing or not the body's")
    fields: dict[str, str | Upload] = {}
    for part in message.iter_parts():
        assert isinstance(part, EmailMessage)  # as the HTTP policy makes them
        name = part.get_param("name", header="content-disposition")
        if part.get_content_disposition() != "form-data" or not isinstance(name, str):
            raise ValueError("a part of the multipart form has no Content-Disposition: form-data; name=…")
        name = _header_text(name)
        if name in fields:
            raise ValueError(f"{name[:40]} given more than once in the form")
        data = part.get_payload(decode=True)
        assert isinstance(data, bytes)  # a part that is not itself multipart
        filename = part.get_filename()
        fields[name] = Upload(_header_text(filename), data) if filename is not None else _utf8(data, name)
    return fields


def _header_text(value: str) -> str:
    """A name from a part's header: browsers write UTF-8 there, which the parser keeps as escaped bytes."""
    return value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _utf8(data: bytes, name: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(
            f"{name[:40]} is not valid UTF-8 (byte {data[err.start]:#04x} at {err.start})"
        ) from err
