"""The ASGI app: the routes, the gate every request passes first (body size, body fields, API key), JSON
errors, the explorer page's static files, the batcher's life (started with the app, drained at the end)."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from nmt.serve import libretranslate, native
from nmt.serve.batcher import Batcher
from nmt.serve.engines import Catalog
from nmt.serve.payloads import ApiError, Limits, parse_fields
from nmt.serve.service import Service

log = logging.getLogger(__name__)

STATIC = Path(__file__).parent / "static"
MEDIA_TYPES = {".html": "text/html", ".js": "text/javascript", ".css": "text/css", ".png": "image/png",
               ".svg": "image/svg+xml"}  # fmt: skip
PAGE_POLICY = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; base-uri 'none'"
KEY_COOKIE = "nmt_api_key"
CORS_HEADERS = ["Authorization", "Content-Type"]  # what LibreTranslate allows, for web apps on other origins


def create_app(catalog: Catalog, limits: Limits, keys: frozenset[str] | None, max_batch_tokens: int,
               max_delay: float) -> Starlette:  # fmt: skip
    """The server's app over the loaded models; `keys`: the API keys every request needs (None: no key)."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        batcher = Batcher(lambda key, sources: catalog.engines[key[0]].search(sources, key[1]),
                          max_batch_tokens, max_delay)  # fmt: skip
        app.state.service = Service(catalog, batcher, limits)
        task = asyncio.create_task(batcher.run())
        yield
        await batcher.close()  # the requests in flight are answered first
        await task
        batcher.shutdown()

    static = {path.name: path for path in STATIC.iterdir() if path.suffix in MEDIA_TYPES}
    routes = [
        Route("/", _page(static["index.html"]), methods=["GET"]),
        Route("/static/{name}", _static_files(static), methods=["GET"]),
        Route("/translate", _json_errors(libretranslate.translate), methods=["POST"]),
        Route("/languages", _json_errors(libretranslate.languages), methods=["GET"]),
        Route("/frontend/settings", _json_errors(libretranslate.frontend_settings), methods=["GET"]),
        Route("/v1/translate", _json_errors(native.translate), methods=["POST"]),
        Route("/v1/models", _json_errors(native.models), methods=["GET"]),
        Route("/health", _json_errors(native.health), methods=["GET"]),
    ]
    middleware = [
        Middleware(
            CORSMiddleware, allow_origins=["*"], allow_methods=["GET", "POST"], allow_headers=CORS_HEADERS
        ),
        Middleware(Gate, limits=limits, keys=keys),
    ]
    handlers = {HTTPException: _http_error, Exception: _internal_error}
    app = Starlette(routes=routes, middleware=middleware, exception_handlers=handlers, lifespan=lifespan)
    app.state.keys = keys
    return app


def _json_errors(route: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
    async def answer(request: Request) -> Response:
        try:
            return await route(request)
        except ApiError as err:
            return _error(err.status, str(err))

    return answer


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        return _error(404, f"no such page: {request.url.path[:200]}")
    return _error(exc.status_code, f"{exc.detail}: {request.method} {request.url.path[:200]}")


async def _internal_error(request: Request, exc: Exception) -> Response:
    log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
    return _error(500, f"internal error: {type(exc).__name__}")


def _page(path: Path) -> Callable[[Request], Awaitable[Response]]:
    """GET /: the explorer. Opened as /?api_key=KEY on a server with keys, it keeps the key in a cookie that
    the page's own requests then carry."""

    async def page(request: Request) -> Response:
        response = FileResponse(path, media_type="text/html", headers=_page_headers())
        keys, key = request.app.state.keys, request.state.fields.get("api_key")
        if keys is not None and valid_key(keys, key):
            response.set_cookie(KEY_COOKIE, key, httponly=True, samesite="strict")
        return response

    return page


def _static_files(files: dict[str, Path]) -> Callable[[Request], Awaitable[Response]]:
    """GET /static/NAME: one of the package's static files, looked up by name in a fixed table (no path is
    ever built from the request)."""

    async def static(request: Request) -> Response:
        path = files.get(request.path_params["name"])
        if path is None:
            return _error(404, f"no static file {request.path_params['name'][:100]!r}")
        return FileResponse(path, media_type=MEDIA_TYPES[path.suffix], headers=_page_headers())

    return static


def _page_headers() -> dict[str, str]:
    return {"Content-Security-Policy": PAGE_POLICY, "X-Content-Type-Options": "nosniff",
            "Cache-Control": "no-cache"}  # fmt: skip


class Gate:
    """Every HTTP request passes here first: its body is read within the size limit (413), its fields are
    parsed from the query and the body (400, 415), its API key is checked (403); the route finds the fields in
    `request.state.fields`."""

    def __init__(self, app: ASGIApp, limits: Limits, keys: frozenset[str] | None) -> None:
        self.app, self.limits, self.keys = app, limits, keys

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        try:
            body = await _read_body(headers, receive, self.limits.max_body)
            fields = parse_fields(body, headers.get("content-type", ""), scope.get("query_string", b""))
        except ApiError as err:
            if err.status in (400, 415) and not self._allowed(_bearer(headers, scope), None):
                err = ApiError(403, "a valid api_key is required")  # no details for strangers
            await _error(err.status, str(err))(scope, receive, send)
            return
        if not self._allowed(_bearer(headers, scope), fields.get("api_key")):
            await _error(403, "a valid api_key is required (field api_key, or Authorization: Bearer KEY)")(
                scope, receive, send
            )
            return
        scope.setdefault("state", {})["fields"] = fields
        await self.app(scope, _replay(body, receive), send)

    def _allowed(self, *offered: Any) -> bool:
        return self.keys is None or any(valid_key(self.keys, key) for key in offered)


def valid_key(keys: frozenset[str], key: Any) -> bool:
    """Whether `key` is one of `keys` (compared in constant time)."""
    return isinstance(key, str) and any(hmac.compare_digest(k.encode(), key.encode()) for k in keys)


def _bearer(headers: Headers, scope: Scope) -> str | None:
    """The key of an `Authorization: Bearer KEY` header, else of the explorer's cookie."""
    auth = headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    for part in headers.get("cookie", "").split(";"):
        name, _, value = part.strip().partition("=")
        if name == KEY_COOKIE:
            return value
    return None


async def _read_body(headers: Headers, receive: Receive, limit: int) -> bytes:
    """The whole body, refused with 413 as soon as it exceeds `limit` bytes (announced or received)."""
    length = headers.get("content-length", "")
    if length.isdigit() and int(length) > limit:
        raise ApiError(413, f"the body has {length} bytes; this server takes at most {limit}")
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise ApiError(413, f"the body exceeds {limit} bytes, this server's limit")
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A `receive` that hands the app the body already read, then the server's own messages (a disconnect)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay
