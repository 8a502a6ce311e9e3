"""The gate every HTTP request passes first: its body is read within the size limit (413) and in time (408),
its fields are parsed from the query and the body (400, 415), its API key is checked (403; as in
LibreTranslate, a translated file's download needs none, its random name being its key, nor do the two pages
a client reads before it has a key: GET /languages and GET /frontend/settings, whose `keyRequired` tells it to
ask). The route then finds the fields in `request.state.fields`; it is cancelled when its client disconnects
before the answer (its sentences leave the batcher's queue). A request the server cancels as it stops without
waiting for it (a second Ctrl-C), whether its body is still arriving or its route runs, is answered 503 unless
its answer has started, and ends quietly: no traceback."""

from __future__ import annotations

import asyncio
import hmac
from urllib.parse import quote, unquote

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from nmt.serve.answers import error_answer
from nmt.serve.requests import ApiError, Limits, parse_fields

KEY_COOKIE = "nmt_api_key"  # the explorer's key, set by GET /?api_key=KEY
BODY_TIMEOUT = 10.0  # seconds a body may pause before the request is refused (408)
KEYLESS = "/download_file/"  # a translated file's random name is its key, as in LibreTranslate
KEY_FREE = frozenset({"/languages", "/frontend/settings"})  # read by clients before they have a key


class Gate:
    """Reads, parses and admits each HTTP request (see the module's docstring); `keys` None: no key needed."""

    def __init__(
        self, app: ASGIApp, limits: Limits, keys: frozenset[str] | None, body_timeout: float = BODY_TIMEOUT
    ) -> None:
        self.app, self.limits, self.keys, self.body_timeout = app, limits, keys, body_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def sending(message: Message) -> None:
            nonlocal started
            started = True
            await send(message)

        try:
            await self._admit(scope, receive, sending)
        except asyncio.CancelledError:  # the server stops without waiting for this request
            if not started:
                stopped = error_answer(503, "the server stopped before answering", {"Connection": "close"})
                await stopped(scope, receive, send)

    async def _admit(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Read, parse and check the request, then run the route (see the module's docstring)."""
        headers = Headers(scope=scope)
        try:
            body = await _read_body(headers, receive, self.limits.max_body, self.body_timeout)
            fields = parse_fields(body, headers.get("content-type", ""), scope.get("query_string", b""))
        except ApiError as err:
            if err.status in (400, 415) and not self._allowed(offered_key(headers), None):
                err = ApiError(403, "a valid api_key is required")  # no details for strangers
            close = {"Connection": "close"} if err.status == 408 else None  # the rest of the body may come
            await error_answer(err.status, str(err), close)(scope, receive, send)
            return
        keyless = scope["path"].startswith(KEYLESS) or (
            scope["method"] in ("GET", "HEAD") and scope["path"] in KEY_FREE
        )
        if not keyless and not self._allowed(offered_key(headers), fields.values.get("api_key")):
            message = "a valid api_key is required (field api_key, or Authorization: Bearer KEY)"
            await error_answer(403, message)(scope, receive, send)
            return
        scope.setdefault("state", {})["fields"] = fields
        await _answer_unless_gone(self.app, scope, body, receive, send)

    def _allowed(self, *offered: object) -> bool:
        return self.keys is None or any(valid_key(self.keys, key) for key in offered)


def valid_key(keys: frozenset[str], key: object) -> bool:
    """Whether `key` is one of `keys` (compared in constant time)."""
    return isinstance(key, str) and any(hmac.compare_digest(k.encode(), key.encode()) for k in keys)


def offered_key(headers: Headers) -> str | None:
    """The key of an `Authorization: Bearer KEY` header, else of the explorer's cookie."""
    auth = headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    for part in headers.get("cookie", "").split(";"):
        name, _, value = part.strip().partition("=")
        if name == KEY_COOKIE:
            return unquote(value.removeprefix('"').removesuffix('"'))  # also a quoted cookie of older servers
    return None


def key_cookie(key: str) -> str:
    """The cookie value that carries `key`: percent-encoded, so that no character of a key (base64's / + =
    above all) makes the cookie quoted: a browser would send the quotes back as part of the value."""
    return quote(key, safe="")


async def _read_body(headers: Headers, receive: Receive, limit: int, timeout: float) -> bytes:
    """The whole body, refused with 413 as soon as it exceeds `limit` bytes (announced or received), and with
    408 when nothing of it arrives for `timeout` seconds."""
    length = headers.get("content-length", "")
    if length.isdigit() and int(length) > limit:
        raise ApiError(413, f"the body has {length} bytes; this server takes at most {limit}")
    chunks, size = [], 0
    while True:
        try:
            async with asyncio.timeout(timeout):
                message = await receive()
        except TimeoutError as err:
            stalled = f"the body stopped arriving: {size} bytes, then {timeout:g} s of nothing"
            raise ApiError(408, stalled) from err
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


async def _answer_unless_gone(app: ASGIApp, scope: Scope, body: bytes, receive: Receive, send: Send) -> None:
    """Run the route over the body already read while listening for the client's disconnect: a client gone
    before its answer cancels the route; when the server cancels this request, the route is cancelled too."""
    route, gone, handed = asyncio.current_task(), asyncio.Event(), False
    assert route is not None

    async def replay() -> Message:
        nonlocal handed
        if not handed:
            handed = True
            return {"type": "http.request", "body": body, "more_body": False}
        await gone.wait()
        return {"type": "http.disconnect"}

    async def listen() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        gone.set()
        route.cancel()

    listener = asyncio.create_task(listen())
    try:
        await app(scope, replay, send)
    except asyncio.CancelledError:
        if gone.is_set() and route.uncancel() == 0:  # the client went away, and nothing else cancels it
            return
        raise
    finally:
        listener.cancel()
