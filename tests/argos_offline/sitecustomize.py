"""Loaded by every Python process of the offline Argos tests (their PYTHONPATH names this folder): refuses
every connection and name lookup beyond this machine's loopback and says so on stderr, so that a test sees
any attempt to use the network (inside `unshare -n` there is no network to reach anyway)."""

import socket
import sys
from collections.abc import Callable
from typing import Any

LOOPBACK = {"127.0.0.1", "::1", "localhost", None}


def _refuse(what: object) -> None:
    print(f"offline guard: refused {what}", file=sys.stderr, flush=True)
    raise OSError(101, f"network is unreachable (offline test): {what}")


def _checked(method: Callable[[socket.socket, Any], Any]) -> Callable[[socket.socket, Any], Any]:
    def connect(self: socket.socket, address: Any) -> Any:
        if self.family in (socket.AF_INET, socket.AF_INET6) and address[0] not in LOOPBACK:
            _refuse(address)
        return method(self, address)

    return connect


def _getaddrinfo(host: str | bytes | None, *args: Any, **kwargs: Any) -> list:
    if (host.decode() if isinstance(host, bytes) else host) not in LOOPBACK:
        _refuse(host)
    return _real_getaddrinfo(host, *args, **kwargs)


_real_getaddrinfo = socket.getaddrinfo
socket.getaddrinfo = _getaddrinfo
socket.socket.connect = _checked(socket.socket.connect)
socket.socket.connect_ex = _checked(socket.socket.connect_ex)
