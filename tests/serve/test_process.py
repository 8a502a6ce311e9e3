"""`nmt serve` as a real process on 127.0.0.1 (slow layer): a real LibreTranslate client (libretranslatepy)
gets the offline translations; SIGTERM or Ctrl-C answers the requests in flight, then exits with 0, whatever
a stalled client does; a client that hangs up costs no decoding; a second Ctrl-C ends at once, in one line,
also while a client stalls its upload."""

import json
import signal
import socket
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.serve.conftest import start

pytestmark = pytest.mark.slow
PAIR = {"source": "src", "target": "tgt"}


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
    assert client.languages() == [
        {"code": "src", "name": "src", "targets": ["tgt"]},
        {"code": "tgt", "name": "tgt", "targets": []},
    ]
    for sentence, expected in offline.items():
        assert client.translate(sentence, "src", "tgt") == expected


def test_libretranslatepy_with_an_api_key(trained_run: Path, tmp_path: Path, offline: dict[str, str]) -> None:
    libretranslatepy = pytest.importorskip("libretranslatepy")
    (tmp_path / "keys").write_text("# keys\nkey-of-the-test-1\n")
    served = start(trained_run, "--api-key-file", str(tmp_path / "keys"))
    url = served.url
    try:
        sentence = next(iter(offline))
        with pytest.raises(urllib.error.HTTPError) as refused:
            libretranslatepy.LibreTranslateAPI(url).translate(sentence, "src", "tgt")
        assert refused.value.code == 403
        client = libretranslatepy.LibreTranslateAPI(url, api_key="key-of-the-test-1")
        assert client.translate(sentence, "src", "tgt") == offline[sentence]
        assert client.languages()[0]["code"] == "src"  # its GET carries the key in a form body
    finally:
        assert served.stop() == 0


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_answers_the_requests_in_flight_then_exits_0(
    trained_run: Path, offline: dict[str, str], stop: signal.Signals
) -> None:
    """Requests wait in the queue (behind a long batch, then a 3 s batching delay) when the signal comes: each
    is still answered, correctly, and the process then exits with code 0 and refuses new connections."""
    served = start(trained_run, "--max-delay-ms", "3000", "--max-batch-tokens", "1000000")
    url = served.url
    answers: dict[str, tuple[int, dict]] = {}
    long = busy(url)

    def ask(sentence: str) -> None:
        answers[sentence] = call(url, "/translate", {"q": sentence, "source": "src", "target": "tgt"})

    threads = [threading.Thread(target=ask, args=(s,)) for s in offline]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 60
    while call(url, "/health")[1]["waiting"] < len(offline):  # every request queued, none answered yet
        assert time.monotonic() < deadline, "the requests never reached the queue"
        time.sleep(0.05)
    served.process.send_signal(stop)
    for thread in (*threads, long):
        thread.join(timeout=120)
    assert served.process.wait(timeout=60) == 0
    assert {s: a for s, a in answers.items()} == {s: (200, {"translatedText": t}) for s, t in offline.items()}
    with pytest.raises(urllib.error.URLError):
        call(url, "/health")


def open_request(url: str, body: bytes, sent: int | None = None) -> socket.socket:
    """A connection that sends a JSON POST /translate of `body` (its first `sent` bytes), then nothing."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    connection = socket.create_connection((host, int(port)), timeout=120)
    head = f"POST /translate HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
    connection.sendall(f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body[:sent])
    return connection


def waiting(url: str) -> int:
    return call(url, "/health")[1]["waiting"]


def wait_until(condition: Callable[[], bool], what: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def busy(url: str) -> threading.Thread:
    """A client whose request of 1,000 lines keeps the decoder busy (a server started with a large
    --max-batch-tokens decodes them in one batch): the requests sent meanwhile wait in the queue, and then
    --max-delay-ms longer, for the client the batch answered to come back."""
    body = {"q": "\n".join(["nopaju kaju zufete"] * 1000), **PAIR}
    thread = threading.Thread(target=call, args=(url, "/translate", body), daemon=True)
    thread.start()
    wait_until(lambda: call(url, "/health")[1]["decoding"] == 1000, "the decoder never started")
    return thread


def test_a_stalled_upload_holds_neither_requests_nor_the_shutdown(trained_run: Path) -> None:
    """A client sends its headers and half of a 400-byte body, then nothing: the others are answered, SIGTERM
    still stops the server (the stalled body is refused with 408 and the connection closed), with code 0."""
    served = start(trained_run)
    stalled = open_request(served.url, b'{"q": "' + b"a" * 390 + b'"}', sent=200)
    try:
        assert call(served.url, "/translate", {"q": "nopaju kaju", **PAIR})[0] == 200
        served.process.send_signal(signal.SIGTERM)
        assert served.process.wait(timeout=60) == 0
        answer = stalled.recv(1000)
        assert answer == b"" or answer.startswith(b"HTTP/1.1 408 "), answer
    finally:
        stalled.close()
        served.process.kill()


def test_a_client_that_disconnects_cancels_the_decoding_of_its_lines(trained_run: Path) -> None:
    """60 lines wait in the queue (behind a long batch, then a 30 s batching delay); their client hangs up:
    they leave the queue at once, and none of them is decoded."""
    served = start(trained_run, "--max-delay-ms", "30000", "--max-batch-tokens", "1000000")
    try:
        long = busy(served.url)
        body = json.dumps({"q": "\n".join(["nopaju kaju zufete"] * 60), **PAIR})
        connection = open_request(served.url, body.encode())
        wait_until(lambda: waiting(served.url) == 60, "the lines never reached the queue")
        connection.close()
        wait_until(lambda: waiting(served.url) == 0, "the lines stayed queued", 20)
        long.join(timeout=120)
        assert call(served.url, "/health")[1]["sentences"] == 1000  # the long request's alone
    finally:
        assert served.stop() == 0


def test_a_second_ctrl_c_stops_at_once_and_quietly(trained_run: Path) -> None:
    """Ctrl-C twice while a request waits (behind a long batch, then a 30 s batching delay): the request is
    answered 503, the server ends with one line and no traceback."""
    served = start(trained_run, "--max-delay-ms", "30000", "--max-batch-tokens", "1000000")
    busy(served.url)  # answered, or still decoding at the second Ctrl-C
    answers: list[tuple[int, dict]] = []
    ask = {"q": "ka", **PAIR}
    client = threading.Thread(target=lambda: answers.append(call(served.url, "/translate", ask)))
    client.start()
    wait_until(lambda: waiting(served.url) == 1, "the request never reached the queue")
    served.process.send_signal(signal.SIGINT)
    time.sleep(0.5)
    assert served.stop(signal.SIGINT) == 0
    client.join(timeout=60)
    log = served.stderr()
    assert "Traceback" not in log and "Exception" not in log, log
    ends = [f"nmt: stopped at once; {n} not answered (503)" for n in ("1 request was", "2 requests were")]
    assert log.splitlines()[-1] in ends, log  # the long request too, if it was still decoding
    assert answers and answers[0][0] == 503


def test_the_access_log_is_offered_by_a_flag(trained_run: Path) -> None:
    served = start(trained_run, "--access-log")
    assert call(served.url, "/health")[0] == 200
    assert served.stop() == 0
    assert '"GET /health HTTP/1.1" 200' in served.stderr()


def test_a_second_ctrl_c_during_a_stalled_upload_is_one_line(trained_run: Path) -> None:
    """Ctrl-C while a client stalls its upload (the drain waits for its body), Ctrl-C again 2 s later: the
    server stops within seconds, with one line counting the request it did not answer, and no traceback; the
    stalled client is answered 503."""
    served = start(trained_run)
    stalled = open_request(served.url, b'{"q": "' + b"a" * 390 + b'"}', sent=200)
    try:
        assert call(served.url, "/health")[0] == 200  # the stalled request is in the server's hands
        served.process.send_signal(signal.SIGINT)
        time.sleep(2)
        assert served.process.poll() is None, "the first Ctrl-C did not wait for the stalled request"
        started = time.monotonic()
        assert served.stop(signal.SIGINT) == 0
        assert time.monotonic() - started < 5
        log = served.stderr()
        assert "Traceback" not in log and "Exception" not in log and "Error" not in log, log
        assert log.splitlines()[-1] == "nmt: stopped at once; 1 request was not answered (503)", log
        assert stalled.recv(1000).startswith(b"HTTP/1.1 503 ")
    finally:
        stalled.close()
        served.process.kill()
