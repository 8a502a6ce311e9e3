"""LibreTranslate's files: POST /translate_file translates an uploaded file as /translate translates a text (a
.txt file each line alone, sentence by sentence, a .html or .htm file as format html; the same limits and
refusals) and answers the address
of the translation, which GET /download_file/{name} then serves. The last KEPT translations are kept in
memory, by a name made of a random id and the file's name (looked up in a table: no path is ever built from a
request)."""

from __future__ import annotations

import dataclasses
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import Response

from nmt.serve.answers import TranslatedFile, error_answer, json_answer
from nmt.serve.detect import routes
from nmt.serve.glossary import constrained_terms, request_terms
from nmt.serve.requests import KEY, ApiError, TranslateFileRequest, served_page, utf8_text, validated
from nmt.serve.service import Service, joined

FORMATS = {  # what is translated, and its media type
    ".txt": "text/plain; charset=utf-8",
    ".html": "text/html; charset=utf-8",  # as /translate translates format html
    ".htm": "text/html; charset=utf-8",
}
PAGES = (".html", ".htm")
KEPT = 64


@dataclass(frozen=True)
class TranslatedText:
    filename: str
    data: bytes
    media_type: str


class TranslatedFiles:
    """The last `kept` translated files by name, oldest out first."""

    def __init__(self, kept: int = KEPT) -> None:
        self.kept, self.files = kept, OrderedDict[str, TranslatedText]()

    def add(self, translated: TranslatedText) -> str:
        """Keep `translated`; its name."""
        name = f"{uuid.uuid4().hex}.{translated.filename}"
        self.files[name] = translated
        while len(self.files) > self.kept:
            self.files.popitem(last=False)
        return name

    def get(self, name: str) -> TranslatedText | None:
        return self.files.get(name)


async def translate_file(request: Request) -> Response:
    """Translate `file` from `source` (or auto: its detected language) to `target`; the address of the
    translation (`translatedFileUrl`)."""
    service: Service = request.app.state.service
    asked = validated(TranslateFileRequest, request.state.fields)
    filename = PurePosixPath(asked.file.filename.replace("\\", "/")).name
    suffix = PurePosixPath(filename).suffix.lower()
    if suffix not in FORMATS:
        found = f"a {suffix} file" if suffix else "a file without an extension"
        raise ApiError(400, f"{found} is not translated; this server translates {', '.join(FORMATS)} files")
    text = utf8_text(asked.file.data, "file", "utf-8-sig").replace("\r\n", "\n").replace("\r", "\n")
    if len(text) > (most := service.limits.max_chars):
        raise ApiError(400, f"file holds {len(text)} characters; this server takes at most {most}")
    page = served_page(text) if suffix in PAGES else None
    if asked.source == "auto":
        [(engine, _)] = await routes(service, [" ".join(page.lines) if page else text], asked.target)
    else:
        engine = service.choose(asked.source, asked.target, None)
    decoding = dataclasses.replace(service.decoding(engine, {}), glossary=constrained_terms(engine, None))
    terms = request_terms(engine, None)  # the server's glossary: written in, or constraints in `decoding`
    if page is not None:
        [lines] = await service.translate_pages(engine, [page], decoding, terms=terms)
    elif terms is not None:
        [lines] = await service.translate_cached(engine, [text], decoding, terms=terms)
    else:
        [lines] = await service.translate(engine, [text], decoding)
    translated = TranslatedText(
        filename, joined(lines, 0, page, engine.target).encode("utf-8"), FORMATS[suffix]
    )
    name = request.app.state.files.add(translated)
    return json_answer(TranslatedFile(translatedFileUrl=f"{request.base_url}download_file/{quote(name)}"))


async def download_file(request: Request) -> Response:
    """A translated file, by the name its `translatedFileUrl` ends with."""
    name = request.path_params["name"]
    found = request.app.state.files.get(name)
    if found is None:
        return error_answer(404, f"no translated file {name[:100]!r} (this server keeps the last {KEPT})")
    disposition = f"attachment; filename*=UTF-8''{quote(found.filename)}"
    return Response(found.data, media_type=found.media_type, headers={"Content-Disposition": disposition})


def openapi_body() -> dict[str, Any]:
    """The request body of POST /translate_file: LibreTranslate's multipart form."""
    text = {"type": "string", "minLength": 1}
    fields = {"file": {"type": "string", "format": "binary"}, "source": text, "target": text}
    schema = {
        "type": "object",
        "properties": fields | {"api_key": {"type": "string", "description": KEY}},
        "required": ["file", "source", "target"],
    }
    return {"requestBody": {"required": True, "content": {"multipart/form-data": {"schema": schema}}}}
