"""The ASGI app (FastAPI): the routes, declared with the models of what they take and answer, which give the
OpenAPI document at /openapi.json (and /spec, where LibreTranslate serves its own); the gate every request
passes first; JSON errors; the explorer page's static files; the batcher's life (started with the app,
drained at the end)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response

from nmt import __version__
from nmt.serve import answers, detect, files, libretranslate, native
from nmt.serve.answers import Error, error_answer
from nmt.serve.batcher import Batcher
from nmt.serve.cache import CacheLimits, TranslationCache
from nmt.serve.engines import Catalog, decode
from nmt.serve.gate import BODY_TIMEOUT, KEY_COOKIE, Gate, key_cookie, valid_key
from nmt.serve.requests import ApiError, Limits, bounded, openapi_body
from nmt.serve.service import Service

log = logging.getLogger(__name__)

STATIC = Path(__file__).parent / "static"
MEDIA_TYPES = {
    ".html": "text/html",
    ".js": "text/javascript",
    ".css": "text/css",
    ".png": "image/png",
    ".svg": "image/svg+xml",
}
PAGE_POLICY = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; base-uri 'none'"
CORS_HEADERS = ["Authorization", "Content-Type"]  # what LibreTranslate allows, for web apps on other origins
ERRORS = {  # what each error status means; the gate may answer every route with 400 to 500
    400: "The query or the body cannot be read (invalid UTF-8, malformed JSON, a field given twice, an "
    "unpaired surrogate), or a field is missing or wrong: the message names it.",
    403: "The server has API keys and the request carries none of them; or, for /detect, the server has no "
    "language detection.",
    408: "The body stopped arriving.",
    413: "The body exceeds the server's limit.",
    415: "The body is neither JSON nor a form (urlencoded or multipart).",
    500: "The server failed (a bug): the message names the exception.",
    404: "No such file (a translated file: no longer kept).",
    503: "The server is shutting down, or ran out of memory translating this text.",
}
GATE = (400, 403, 408, 413, 415, 500)
DEFAULT_CACHE = CacheLimits()


def create_app(
    catalog: Catalog,
    limits: Limits,
    keys: frozenset[str] | None,
    max_batch_tokens: int,
    max_delay: float,
    body_timeout: float = BODY_TIMEOUT,
    cache: CacheLimits = DEFAULT_CACHE,
) -> FastAPI:
    """The server's app over the loaded models; `keys`: the API keys every request needs (None: no key);
    `cache`: the translation cache's size (nmt/serve/cache.py)."""
    requests = bounded(limits)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        batcher = Batcher(decode, max_batch_tokens, max_delay)
        app.state.service = Service(catalog, batcher, limits, requests, TranslationCache(cache))
        task = asyncio.create_task(batcher.run())
        try:
            yield
        except asyncio.CancelledError:  # stopped at once (a second Ctrl-C): nothing more is decoded, quietly
            task.cancel()
            batcher.shutdown(wait=False)
            return
        await batcher.close()  # the requests in flight are answered first
        await task
        batcher.shutdown()

    app = FastAPI(
        title="nmt serve",
        version=__version__,
        description=_description(limits, keys),
        docs_url=None,  # the documentation pages would load their scripts from a CDN
        redoc_url=None,
        lifespan=lifespan,
        middleware=[
            Middleware(
                CORSMiddleware, allow_origins=["*"], allow_methods=["GET", "POST"], allow_headers=CORS_HEADERS
            ),
            Middleware(Gate, limits=limits, keys=keys, body_timeout=body_timeout),
        ],
        exception_handlers={ApiError: _api_error, HTTPException: _http_error, Exception: _internal_error},
    )
    app.state.keys = keys
    app.state.files = files.TranslatedFiles()
    static = {path.name: path for path in STATIC.iterdir() if path.suffix in MEDIA_TYPES}
    page: dict[int | str, Any] = {200: {"description": "The explorer.", "content": {"text/html": {}}}}
    media: dict[str, Any] = {media: {} for media in sorted(set(MEDIA_TYPES.values()))}
    static_answer: dict[int | str, Any] = {200: {"description": "The file.", "content": media}}
    name = {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}
    _route(app, "GET", "/", _page(static["index.html"]), None, responses=page, response_class=FileResponse)
    _route(
        app,
        "GET",
        "/static/{name}",
        _static_files(static),
        None,
        404,
        responses=static_answer,
        response_class=FileResponse,
        openapi_extra={"parameters": [name]},
    )
    _route(
        app,
        "POST",
        "/translate",
        libretranslate.translate,
        answers.Translation,
        503,
        openapi_extra=openapi_body(requests.translate),
    )
    _route(
        app,
        "POST",
        "/detect",
        detect.detect,
        answers.Detections,
        openapi_extra=openapi_body(requests.detect),
    )
    _route(
        app,
        "POST",
        "/translate_file",
        files.translate_file,
        answers.TranslatedFile,
        503,
        openapi_extra=files.openapi_body(),
    )
    _route(
        app,
        "GET",
        "/download_file/{name}",
        files.download_file,
        None,
        404,
        responses={200: {"description": "The translated file.", "content": {"text/plain": {}}}},
        response_class=Response,
        openapi_extra={"parameters": [name]},
    )
    _route(app, "GET", "/languages", libretranslate.languages, answers.Languages)
    _route(app, "GET", "/frontend/settings", libretranslate.frontend_settings, answers.FrontendSettings)
    _route(
        app,
        "POST",
        "/v1/translate",
        native.translate,
        answers.V1Translation,
        503,
        openapi_extra=openapi_body(requests.v1_translate),
    )
    _route(app, "GET", "/v1/models", native.models, answers.Models)
    _route(app, "GET", "/health", native.health, answers.Health)
    app.add_api_route("/spec", lambda: JSONResponse(app.openapi()), include_in_schema=False)
    return app


def _route(
    app: FastAPI,
    method: str,
    path: str,
    endpoint: Callable[..., Awaitable[Response]],
    answer: type[BaseModel] | None,
    *statuses: int,
    **options: Any,
) -> None:
    """A route that the OpenAPI document describes with its `answer`, the gate's refusals and `statuses`;
    `options`: FastAPI's (`responses` are added to the errors)."""
    errors = {s: {"model": Error, "description": ERRORS[s]} for s in (*GATE, *statuses)}
    responses = errors | options.pop("responses", {})
    app.add_api_route(path, endpoint, methods=[method], response_model=answer, responses=responses, **options)


def _description(limits: Limits, keys: frozenset[str] | None) -> str:
    """What the document says of every operation: where fields come from, this server's limits and keys."""
    key = (
        "Every request but GET /languages, GET /frontend/settings and a translated file's download needs an "
        "API key: the field api_key, `Authorization: Bearer KEY`, or the explorer's cookie (set by GET "
        "/?api_key=KEY)."
        if keys
        else "No API key is needed."
    )
    return (
        "Neural machine translation: LibreTranslate's API (/translate, /detect, /translate_file, "
        "/languages, /frontend/settings), nmt's own (/v1/translate with n-best lists and attention, "
        "/v1/models, /health) and the attention explorer (/). Fields come from the query string and the "
        "body (JSON, or a urlencoded or multipart form, over the query); a field given twice is refused. "
        "JSON values have JSON's types (a whole number may be written 2.0; LibreTranslate's alternatives "
        "may also be a string of digits, as LibreTranslate reads it); the values of a form and of the "
        "query string are text: a boolean true/false, 1/0 or on/off in any case, a whole number in digits,"
        " another number in decimals (0.5, 1e-3). An empty value is a field not sent. "
        f"This server takes at most {limits.max_texts} texts and {limits.max_chars} characters a request, a "
        f"beam of {limits.max_beam}, and bodies of {limits.max_body} bytes. {key} Errors are "
        '`{"error": message}`.'
    )


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return error_answer(exc.status, str(exc))


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        return error_answer(404, f"no such page: {request.url.path[:200]}")
    message = f"{exc.detail}: {request.method} {request.url.path[:200]}"
    return error_answer(exc.status_code, message, exc.headers)  # 405: with the Allow header


async def _internal_error(request: Request, exc: Exception) -> Response:
    log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
    return error_answer(500, f"internal error: {type(exc).__name__}")


def _page(path: Path) -> Callable[[Request], Awaitable[Response]]:
    async def page(request: Request) -> Response:
        """The attention explorer. Opened as /?api_key=KEY on a server with keys, it keeps the key in a cookie
        that the page's own requests then carry."""
        response = FileResponse(path, media_type="text/html", headers=_page_headers())
        keys, key = request.app.state.keys, request.state.fields.values.get("api_key")
        if keys is not None and valid_key(keys, key):
            response.set_cookie(KEY_COOKIE, key_cookie(key), httponly=True, samesite="strict")
        return response

    return page


def _static_files(files: dict[str, Path]) -> Callable[[Request], Awaitable[Response]]:
    async def static(request: Request) -> Response:
        """One of the explorer's files, looked up by name in a fixed table (no path is ever built from the
        request)."""
        name = request.path_params["name"]
        path = files.get(name)
        if path is None:
            return error_answer(404, f"no static file {name[:100]!r}")
        return FileResponse(path, media_type=MEDIA_TYPES[path.suffix], headers=_page_headers())

    return static


def _page_headers() -> dict[str, str]:
    return {
        "Content-Security-Policy": PAGE_POLICY,
        "X-Content-Type-Options": "nosniff",
        "Cache-Control": "no-cache",
    }
