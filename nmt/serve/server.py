"""`nmt serve`: the listening socket, the API keys, and uvicorn running the app until SIGINT or SIGTERM,
after which the requests in flight are answered (for at most GRACE seconds; a body that stops arriving is
refused after the gate's BODY_TIMEOUT) and the process exits with code 0. A second Ctrl-C stops at once, also
with code 0: uvicorn stops waiting and cancels the requests still open, which the gate answers 503 quietly,
and one line counts them."""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import logging
import os
import signal
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from nmt.config.sections import SearchLimits
from nmt.errors import UserError
from nmt.serve.cache import CacheLimits
from nmt.serve.engines import Catalog
from nmt.serve.requests import Limits

log = logging.getLogger(__name__)

INSTALL_HINT = 'nmt serve needs fastapi and uvicorn: pip install -e ".[serve]"'
GRACE = 30  # seconds the requests in flight have to be answered after SIGINT or SIGTERM
ACCESS_LOG = {  # uvicorn's access log on stderr, when asked; nmt's own logging stays as it is
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "access": {
            "()": "uvicorn.logging.AccessFormatter",
            "use_colors": False,
            "fmt": 'nmt: %(client_addr)s "%(request_line)s" %(status_code)s',
        }
    },
    "handlers": {
        "access": {"class": "logging.StreamHandler", "formatter": "access", "stream": "ext://sys.stderr"}
    },
    "loggers": {"uvicorn.access": {"handlers": ["access"], "level": "INFO", "propagate": False}},
}


@dataclass(frozen=True)
class Settings:
    """Where to listen and how to batch; `keys`: the API keys every request needs (None: none needed)."""

    host: str = "127.0.0.1"
    port: int = 8000
    max_batch_tokens: int = SearchLimits.batch_tokens  # nmt/data/batching.py `search_cost`
    max_delay_ms: float = 10.0
    limits: Limits = field(default_factory=Limits)
    keys: frozenset[str] | None = None
    access_log: bool = False
    cache: CacheLimits = field(default_factory=CacheLimits)


def check_installed() -> None:
    """A one-line UserError naming the install command when the web packages are missing."""
    try:
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as err:
        raise UserError(f"{INSTALL_HINT} ({err})") from err


def search_threads(asked: int) -> int:
    """The CPU threads searches use, set for PyTorch (CTranslate2 takes them when it loads an export):
    `asked`, or for 0 one fewer than the cores this process may run on (at least one). The server's other
    thread, the event loop that reads requests and writes answers, keeps a core: two OpenMP threads of a
    search that share two cores with it wait for each other at every operation whenever it runs."""
    import torch

    threads = asked or max(1, len(os.sched_getaffinity(0)) - 1)
    torch.set_num_threads(threads)
    return threads


def read_keys(path: Path) -> frozenset[str]:
    """The API keys of a file: one a line; blank lines and lines starting with # are skipped."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise UserError(f"--api-key-file {path} is not UTF-8 text") from err
    except OSError as err:
        raise UserError(f"cannot read --api-key-file {path}: {err.strerror}") from err
    keys = frozenset(line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#"))
    if not keys:
        raise UserError(f"--api-key-file {path} holds no key (one a line; # starts a comment)")
    if any(len(key) < 8 for key in keys):
        raise UserError(f"--api-key-file {path}: every key must have at least 8 characters")
    return keys


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to `host`:`port` (port 0: any free one) and listening; a busy port or an unknown host
    is a UserError."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except (socket.gaierror, UnicodeError) as err:
        raise UserError(f"--host {host}: not an address of this machine ({err})") from err
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        sock.listen(2048)
    except OSError as err:
        sock.close()
        busy = " (another process listens there)" if err.errno == errno.EADDRINUSE else ""
        raise UserError(f"cannot listen on {host}:{port}: {err.strerror}{busy}") from err
    sock.set_inheritable(True)
    return sock


def serve(catalog: Catalog, settings: Settings) -> None:
    """Serve the models until SIGINT or SIGTERM; the requests in flight are answered before it returns."""
    import uvicorn

    from nmt.serve.app import create_app

    sock = listen(settings.host, settings.port)
    app = create_app(
        catalog,
        settings.limits,
        settings.keys,
        settings.max_batch_tokens,
        settings.max_delay_ms / 1000,
        cache=settings.cache,
    )
    config = uvicorn.Config(
        app,
        log_config=ACCESS_LOG if settings.access_log else None,
        access_log=settings.access_log,
        lifespan="on",
        timeout_keep_alive=30,
        timeout_graceful_shutdown=GRACE,
    )
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    budget = settings.max_batch_tokens
    log.info("batches of at most %d tokens (sentences × (longest source + eos) × beam)", budget)
    log.info(
        "serving %s on http://%s:%d (Ctrl-C or SIGTERM to stop)", ", ".join(catalog.engines), shown, port
    )
    if settings.keys is None and not _loopback(host):
        log.warning("listening on %s without --api-key-file: anyone who reaches it can use it", host)
    server = _server(config)
    with sock:
        server.run(sockets=[sock])
    if server.force_exit:
        n = server.unanswered
        log.info("stopped at once; %d request%s not answered (503)", n, " was" if n == 1 else "s were")
    else:
        log.info("stopped")


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


def _server(config: Any) -> Any:
    """uvicorn's server, ending quietly after SIGINT/SIGTERM: uvicorn re-raises the signal once it has shut
    down (the process would then die of it, or nmt report an interruption); `nmt serve` stops with code 0.
    `unanswered`: the requests in flight when a second Ctrl-C forced the exit (uvicorn's `force_exit`)."""
    import uvicorn

    class Server(uvicorn.Server):
        unanswered = 0

        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            forced = self.force_exit
            super().handle_exit(sig, frame)
            if self.force_exit and not forced:
                self.unanswered = len(self.server_state.tasks)

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            previous = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
            try:
                yield
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)

    return Server(config)
