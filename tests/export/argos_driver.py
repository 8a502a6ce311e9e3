"""The Argos tests' driver (tests/export/test_argos.py), run by tests/argos_offline/harness.py with the
Python of a virtual environment that holds argos-translate-lt and LibreTranslate: reads a JSON request on
stdin, writes a JSON answer on stdout; imports nothing from nmt.

The harness sets HOME, XDG_*_HOME and ARGOS_PACKAGES_DIR (argostranslate reads them when imported) and runs
this under `unshare -n` where it can, with tests/argos_offline/sitecustomize.py refusing any connection
beyond loopback.

- {"mode": "translate", "packages": [...], "from": "de", "to": "en", "paragraph": "...", "sentences": [...]}
  installs the packages, splits the paragraph with the package's own sentencizer and translates each
  sentence and the paragraph with argostranslate.translate.translate.
- {"mode": "libretranslate", ... "load_only": "de,en"} installs the packages, starts `libretranslate
  --host 127.0.0.1 --port P --load-only de,en` and translates the paragraph through its /translate.
"""

import fcntl
import json
import socket
import struct
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
LOCAL = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never through a proxy


def install(packages: list[str]) -> list[str]:
    from argostranslate import package

    for path in packages:
        package.install_from_path(Path(path))
    return sorted(p.package_path.name for p in package.get_installed_packages())


def translate(request: dict[str, Any]) -> dict[str, Any]:
    from argostranslate import translate

    installed = install(request["packages"])
    source, target = request["from"], request["to"]
    translation = translate.get_translation_from_codes(source, target)
    sentencizer = translation.underlying.sentencizer  # CachedTranslation(PackageTranslation)
    return {
        "installed": installed,
        "sentencizer": type(sentencizer).__name__,
        "split": sentencizer.split_sentences(request["paragraph"]),
        "sentences": [translate.translate(s, source, target) for s in request["sentences"]],
        "paragraph": translate.translate(request["paragraph"], source, target),
    }


def loopback_up() -> None:
    """Bring the loopback interface up: in a new network namespace it starts down."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as handle:
        flags = struct.unpack("16sH", fcntl.ioctl(handle, SIOCGIFFLAGS, struct.pack("16sH", b"lo", 0)))[1]
        if not flags & IFF_UP:
            fcntl.ioctl(handle, SIOCSIFFLAGS, struct.pack("16sH", b"lo", flags | IFF_UP))


def free_port() -> int:
    with socket.socket() as handle:
        handle.bind(("127.0.0.1", 0))
        return handle.getsockname()[1]


def libretranslate(request: dict[str, Any]) -> dict[str, Any]:
    installed = install(request["packages"])
    loopback_up()
    port = free_port()
    program = Path(sys.executable).parent / "libretranslate"
    command = [str(program), "--host", "127.0.0.1", "--port", str(port), "--load-only", request["load_only"]]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        languages = wait_for(f"{url}/languages", server)
        body = {"q": request["paragraph"], "source": request["from"], "target": request["to"]}
        post = urllib.request.Request(
            f"{url}/translate", json.dumps(body).encode(), {"Content-Type": "application/json"}
        )
        with LOCAL.open(post, timeout=60) as response:
            answer = json.load(response)
    finally:
        server.terminate()
        log = server.communicate(timeout=30)[0]
    return {"installed": installed, "languages": languages, "answer": answer, "log": log}


def wait_for(url: str, server: subprocess.Popen, timeout: float = 300.0) -> Any:
    """The JSON at `url` once the server answers (it loads the models first)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"libretranslate exited with {server.returncode}:\n{server.communicate()[0]}")
        try:
            with LOCAL.open(url, timeout=5) as response:
                return json.load(response)
        except OSError:
            time.sleep(0.5)
    raise TimeoutError(f"libretranslate did not answer {url} within {timeout} s")


if __name__ == "__main__":
    request = json.load(sys.stdin)
    modes = {"translate": translate, "libretranslate": libretranslate}
    answer = modes[request["mode"]](request)
    json.dump(answer, sys.stdout, ensure_ascii=False)
