"""`nmt serve` as a real process on 127.0.0.1 (slow layer): a real LibreTranslate client (libretranslatepy)
gets the offline translations, and SIGTERM or Ctrl-C answers the requests in flight, then exits with 0."""

import json
import signal
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from tests.serve.conftest import start

pytestmark = pytest.mark.slow


def call(url: str, path: str, body: dict | None = None) -> tuple[int, dict]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url + path, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_it_listens_on_127_0_0_1_by_default(server: str) -> None:
    assert server.startswith("http://127.0.0.1:")


def test_libretranslatepy_works_unchanged_against_nmt_serve(server: str, offline: dict[str, str]) -> None:
    libretranslatepy = pytest.importorskip("libretranslatepy")
    client = libretranslatepy.LibreTranslateAPI(server)
    assert client.languages() == [{"code": "src", "name": "src", "targets": ["tgt"]}]
    for sentence, expected in offline.items():
        assert client.translate(sentence, "src", "tgt") == expected


def test_libretranslatepy_with_an_api_key(trained_run: Path, tmp_path: Path, offline: dict[str, str]) -> None:
    libretranslatepy = pytest.importorskip("libretranslatepy")
    (tmp_path / "keys").write_text("# keys\nkey-of-the-test-1\n")
    process, url = start(trained_run, "--api-key-file", str(tmp_path / "keys"))
    try:
        sentence = next(iter(offline))
        with pytest.raises(urllib.error.HTTPError) as refused:
            libretranslatepy.LibreTranslateAPI(url).translate(sentence, "src", "tgt")
        assert refused.value.code == 403
        client = libretranslatepy.LibreTranslateAPI(url, api_key="key-of-the-test-1")
        assert client.translate(sentence, "src", "tgt") == offline[sentence]
        assert client.languages()[0]["code"] == "src"  # its GET carries the key in a form body
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_answers_the_requests_in_flight_then_exits_0(
    trained_run: Path, offline: dict[str, str], stop: signal.Signals
) -> None:
    """Requests wait in the queue (a 3 s batching delay) when the signal comes: each is still answered,
    correctly, and the process then exits with code 0 and refuses new connections."""
    process, url = start(trained_run, "--max-delay-ms", "3000", "--max-batch-tokens", "1000000")
    answers: dict[str, tuple[int, dict]] = {}

    def ask(sentence: str) -> None:
        answers[sentence] = call(url, "/translate", {"q": sentence, "source": "src", "target": "tgt"})

    threads = [threading.Thread(target=ask, args=(s,)) for s in offline]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 60
    while call(url, "/health")[1]["waiting"] < len(offline):  # every request queued, none answered yet
        assert time.monotonic() < deadline, "the requests never reached the queue"
        time.sleep(0.05)
    process.send_signal(stop)
    for thread in threads:
        thread.join(timeout=120)
    assert process.wait(timeout=60) == 0
    assert {s: a for s, a in answers.items()} == {s: (200, {"translatedText": t}) for s, t in offline.items()}
    with pytest.raises(urllib.error.URLError):
        call(url, "/health")
