"""What the server refuses, and how: each bad request gets a 4xx JSON error naming its problem, and the
server keeps answering good requests; API keys; no file outside the package's static files can be read."""

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from nmt.serve.engines import Catalog
from nmt.serve.requests import Limits
from tests.serve.conftest import KEY, make_client

KEY_COOKIE = "nmt_api_key"

PAIR = {"source": "src", "target": "tgt"}
GOOD = {"q": "nopaju kaju", **PAIR}
JSON = {"content-type": "application/json"}
FORM = {"content-type": "application/x-www-form-urlencoded"}
SVG_NAMESPACE = "http://www.w3.org/2000/svg"


@pytest.fixture(scope="module")
def small(catalog: Catalog) -> Iterator[TestClient]:
    """A server with small limits: 3 texts, 100 characters a request (a body limit of about 65 KiB)."""
    with make_client(catalog, Limits(max_texts=3, max_chars=100)) as client:
        yield client


BAD = [  # (path, body bytes, headers, status, words the error names)
    ("/translate", b'{"q": "a", "source": ', JSON, 400, "not valid JSON"),
    ("/translate", b'["a", "b"]', JSON, 400, "must be an object"),
    ("/translate", b'{"q": 3, "source": "src", "target": "tgt"}', JSON, 400, "q must be a string"),
    (
        "/translate",
        b'{"q": ["a", null], "source": "src", "target": "tgt"}',
        JSON,
        400,
        "q[1] must be a string",
    ),
    ("/translate", b'{"q": "a", "source": 1, "target": "tgt"}', JSON, 400, "source must be a string"),
    (
        "/translate",
        b'{"q": "a", "source": "src", "target": "tgt", "alternatives": "x"}',
        JSON,
        400,
        "alternatives",
    ),
    (
        "/translate",
        b'{"q": "a", "source": "src", "target": "tgt", "alternatives": true}',
        JSON,
        400,
        "alternatives",
    ),
    ("/translate", b'{"q": "a", "source": "src", "target": "tgt", "alternatives": NaN}', JSON, 400, "NaN"),
    ("/translate", b'{"q": "a", "q": "b", "source": "src", "target": "tgt"}', JSON, 400, "twice"),
    ("/translate", b"", JSON, 400, "missing q"),
    ("/translate", b'{"source": "src", "target": "tgt"}', JSON, 400, "missing q"),
    ("/translate", b'{"q": "a", "target": "tgt"}', JSON, 400, "missing source"),
    ("/translate", b'{"q": [], "source": "src", "target": "tgt"}', JSON, 400, "empty list"),
    ("/translate", b'{"q": ["a", "b", "c", "d"], "source": "src", "target": "tgt"}', JSON, 400, "at most 3"),
    (
        "/translate",
        b'{"q": "' + b"a" * 101 + b'", "source": "src", "target": "tgt"}',
        JSON,
        400,
        "101 characters",
    ),
    ("/translate", b'{"q": "\xff\xfe", "source": "src", "target": "tgt"}', JSON, 400, "not valid UTF-8"),
    ("/translate", b'{"q": "\\ud800", "source": "src", "target": "tgt"}', JSON, 400, "surrogate"),
    ("/translate", b"q=%FF%FE&source=src&target=tgt", FORM, 400, "not valid UTF-8"),
    ("/translate", b"q=a&q=b&source=src&target=tgt", FORM, 400, "more than once"),
    ("/translate", b'{"q": "a", "source": "src", "target": "xx"}', JSON, 400, "src → xx is not served"),
    (
        "/translate",
        b'{"q": "a", "source": "src", "target": "tgt", "format": "markdown"}',
        JSON,
        400,
        "format must be 'text' or 'html', not 'markdown'",
    ),
    ("/translate", b"q=a", {"content-type": "text/plain"}, 415, "text/plain"),
    ("/translate", b"[" * 100 + b"]" * 100, JSON, 400, "JSON"),
    ("/translate", b'{"q": ' + b"[" * 600 + b"]" * 600 + b"}", JSON, 400, "nested deeper"),
    ("/translate", "q=a&source=src&target=tgt&alternatives=²".encode(), FORM, 400, "alternatives"),
    (
        "/v1/translate",
        b'{"q": "a", "source": "src", "target": "tgt", "nbets": 2}',
        JSON,
        400,
        "unknown field(s) nbets",
    ),
    ("/v1/translate", b'{"q": "a", "model": "nope"}', JSON, 400, "no model 'nope'"),
    ("/v1/translate", b'{"q": "a", "source": "src", "target": "tgt", "nbest": 99}', JSON, 400, "nbest=99"),
    (
        "/v1/translate",
        b'{"q": "a", "source": "src", "target": "tgt", "beam_size": -1}',
        JSON,
        400,
        "beam_size=-1",
    ),
    (
        "/v1/translate",
        b'{"q": "a", "source": "src", "target": "tgt", "attention": "maybe"}',
        JSON,
        400,
        "attention",
    ),
    ("/v1/translate", b'{"q": "a", "source": "src", "target": "tgt", "nbest": 1e400}', JSON, 400, "nbest"),
    (
        "/v1/translate",
        b'{"q": "a", "source": "src", "target": "tgt", "nbest": 1.5}',
        JSON,
        400,
        "nbest must be a whole number, not 1.5",
    ),
    ("/v1/translate", b"q=a&source=src&target=tgt&attention=maybe", FORM, 400, "attention must be true or"),
]
V1 = b'{"q": "a", "source": "src", "target": "tgt", '
FORM_V1 = b"q=a&source=src&target=tgt&"
BOOLEAN = "attention must be true or false, not"
STRICT = [  # (path, body, headers, the error): a JSON value has JSON's type; a form's, one of the spellings
    ("/v1/translate", V1 + b'"attention": 1}', JSON, f"{BOOLEAN} 1"),
    ("/v1/translate", V1 + b'"attention": 0}', JSON, f"{BOOLEAN} 0"),
    ("/v1/translate", V1 + b'"attention": "yes"}', JSON, f"{BOOLEAN} the string 'yes'"),
    ("/v1/translate", V1 + b'"attention": "true"}', JSON, f"{BOOLEAN} the string 'true'"),
    ("/v1/translate", V1 + b'"attention": null}', JSON, f"{BOOLEAN} null"),
    ("/v1/translate", V1 + b'"attention": [true]}', JSON, f"{BOOLEAN} a list"),
    ("/v1/translate", V1 + b'"nbest": "2"}', JSON, "nbest must be a JSON number, not the string '2'"),
    ("/v1/translate", V1 + b'"beam_size": "3"}', JSON, "beam_size must be a JSON number, not the string '3'"),
    ("/translate", V1 + b'"alternatives": "1.0"}', JSON, "alternatives must be a whole number, not '1.0'"),
    ("/translate", V1 + b'"alternatives": " 1"}', JSON, "alternatives must be a whole number, not ' 1'"),
    ("/v1/translate", FORM_V1 + b"attention=yes", FORM, "'yes' (in a form: true/false, 1/0, on/off)"),
    ("/v1/translate", FORM_V1 + b"attention=2", FORM, f"{BOOLEAN} '2'"),
    ("/v1/translate", FORM_V1 + b"nbest=2.0", FORM, "nbest must be a whole number, not '2.0'"),
    ("/v1/translate", FORM_V1 + b"nbest=1_0", FORM, "nbest must be a whole number, not '1_0'"),
    ("/v1/translate", FORM_V1 + b"nbest=+2", FORM, "nbest must be a whole number, not ' 2'"),  # + is a space
    ("/translate", FORM_V1 + b"alternatives=%D9%A3", FORM, "alternatives must be a whole number"),  # Arabic 3
    ("/v1/translate", V1 + b'"sampling": 1}', JSON, "sampling must be true or false, not 1"),
    ("/v1/translate", V1 + b'"alignments": 1}', JSON, "alignments must be true or false, not 1"),
    ("/v1/translate", FORM_V1 + b"alignments=yes", FORM, "'yes' (in a form: true/false, 1/0, on/off)"),
    ("/v1/translate", V1 + b'"temperature": "0.5"}', JSON, "temperature must be a JSON number, not the"),
    ("/v1/translate", V1 + b'"temperature": true}', JSON, "temperature must be a number, not a boolean"),
    ("/v1/translate", V1 + b'"top_k": true}', JSON, "top_k must be a whole number, not a boolean"),
    ("/v1/translate", V1 + b'"seed": "7"}', JSON, "seed must be a JSON number, not the string '7'"),
    ("/v1/translate", FORM_V1 + b"sampling=yes", FORM, "sampling must be true or false, not 'yes'"),
    ("/v1/translate", FORM_V1 + b"temperature=inf", FORM, "temperature must be a number, not 'inf'"),
    ("/v1/translate", FORM_V1 + b"top_p=nan", FORM, "top_p must be a number, not 'nan'"),
    ("/v1/translate", FORM_V1 + b"top_p=1_0", FORM, "top_p must be a number, not '1_0'"),
    ("/v1/translate", V1 + b'"top_k": 2147483648}', JSON, "top_k=2147483648 must be at most 2147483647"),
]


@pytest.mark.parametrize(("path", "body", "headers", "status", "named"), BAD)
def test_bad_requests_get_a_4xx_json_error_naming_the_problem(
    small: TestClient, path: str, body: bytes, headers: dict[str, str], status: int, named: str
) -> None:
    response = small.post(path, content=body, headers=headers)
    assert response.status_code == status, response.text
    assert named in response.json()["error"]
    assert small.post("/translate", json=GOOD).status_code == 200  # and the server keeps serving


@pytest.mark.parametrize(("path", "body", "headers", "error"), STRICT)
def test_values_of_the_wrong_type_are_refused_not_converted(
    small: TestClient, path: str, body: bytes, headers: dict[str, str], error: str
) -> None:
    """No lax coercion: `"attention": 1` or `"nbest": "2"` in JSON, `attention=yes` or `nbest=2.0` in a form
    are refused with 400, the error naming the field and the value."""
    response = small.post(path, content=body, headers=headers)
    assert response.status_code == 400, response.text
    assert error in response.json()["error"]


UNPAIRED = [  # a \ud800 escape is valid JSON but no text: in a value, a list, a field's name, a nested name
    ("/translate", rb'{"q": "paho", "source": "\ud800", "target": "tgt"}'),
    ("/translate", rb'{"q": "paho", "source": "src", "target": "\ud800"}'),
    ("/translate", rb'{"q": "paho", "source": "src", "target": "tgt", "format": "\ud800"}'),
    ("/translate", rb'{"q": ["paho", "\udfff"], "source": "src", "target": "tgt"}'),
    ("/v1/translate", rb'{"q": "paho", "\ud800": 1}'),
    ("/v1/translate", rb'{"q": "paho", "model": "\ud800x"}'),
    ("/v1/translate", rb'{"q": "paho", "source": "src", "target": "tgt", "nbest": "\ud800"}'),
    ("/v1/translate", rb'{"q": "paho", "source": "src", "target": "tgt", "attention": {"\ud800": [1]}}'),
]


@pytest.mark.parametrize(("path", "body"), UNPAIRED)
def test_an_unpaired_surrogate_anywhere_in_json_is_a_400(small: TestClient, path: str, body: bytes) -> None:
    response = small.post(path, content=body, headers=JSON)
    assert response.status_code == 400, response.text
    assert "unpaired surrogate" in response.json()["error"]


@pytest.mark.parametrize(
    ("query", "form"),
    [
        ("?source=%ED%A0%80", b"q=paho&target=tgt"),
        ("", b"q=paho&source=src&target=%ED%A0%80"),
        ("?%ED%A0%80=1", b"q=paho&source=src&target=tgt"),
    ],
)
def test_a_surrogate_in_the_query_or_a_form_is_a_400(small: TestClient, query: str, form: bytes) -> None:
    response = small.post(f"/translate{query}", content=form, headers=FORM)
    assert response.status_code == 400 and "UTF-8" in response.json()["error"]


def test_an_oversized_body_is_refused_with_413(small: TestClient) -> None:
    limit = Limits(max_texts=3, max_chars=100).max_body
    announced = small.post("/translate", content=b"x" * (limit + 1), headers=FORM)
    assert announced.status_code == 413 and "at most" in announced.json()["error"]

    def chunks() -> Iterator[bytes]:  # no Content-Length: the limit is counted as the body arrives
        for _ in range(limit // 1000 + 2):
            yield b"x" * 1000

    streamed = small.post("/translate", content=chunks(), headers=FORM)
    assert streamed.status_code == 413
    assert small.post("/translate", json=GOOD).status_code == 200


def test_a_line_longer_than_the_model_takes_is_refused_when_translated_whole(client: TestClient) -> None:
    """Split into sentences (the default) a line over the limit is translated in parts
    (tests/serve/test_served_paragraphs.py); translated whole, it is refused."""
    response = client.post("/v1/translate", json={"q": "ka " * 2000, "split_sentences": False})
    assert response.status_code == 400 and "subwords" in response.json()["error"]


def test_unknown_routes_and_methods_are_json_errors(client: TestClient) -> None:
    missing = client.get("/nothing/here")
    assert missing.status_code == 404 and "error" in missing.json()
    wrong = client.get("/translate")
    assert wrong.status_code == 405 and "error" in wrong.json()


@pytest.mark.parametrize(
    "path",
    [
        "/static/../cli.py",
        "/static/..%2Fcli.py",
        "/static/%2e%2e/%2e%2e/pyproject.toml",
        "/static/..%2F..%2F..%2F..%2F..%2F..%2Fetc%2Fpasswd",
        "/static/%2Fetc%2Fpasswd",
        "/static//etc/passwd",
        "/static/app.py",
        "/static/__init__.py",
        "/static/.",
        "/static/index.html%00.py",
        "/../../../etc/passwd",
        "/static/static",
    ],
)
def test_no_file_outside_the_static_files_can_be_read(client: TestClient, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 404, (path, response.text[:200])
    assert "root:" not in response.text and "import" not in response.text


def test_the_page_and_its_files_are_served_without_anything_from_outside(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "default-src 'self'" in page.headers["content-security-policy"]
    static = Path(__file__).resolve().parents[2] / "nmt" / "serve" / "static"
    for path in static.iterdir():
        served = client.get(f"/static/{path.name}")
        assert served.status_code == 200 and served.content == path.read_bytes()
        text = served.text.replace(SVG_NAMESPACE, "")  # a name, never fetched
        assert not re.search(r"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}", text, flags=re.I), path.name  # no address
        assert "@import" not in text


@pytest.fixture(scope="module")
def locked(catalog: Catalog) -> Iterator[TestClient]:
    with make_client(catalog, keys=frozenset({KEY})) as client:
        yield client


ROUTES = [
    *(("GET", path) for path in ("/", "/static/index.html", "/health", "/v1/models", "/no/such/page")),
    *(("GET", path) for path in ("/openapi.json", "/spec")),
    *(("POST", path) for path in ("/translate", "/v1/translate", "/languages")),
]


@pytest.mark.parametrize(("method", "path"), ROUTES)
def test_with_api_keys_every_request_without_a_valid_key_gets_403(
    locked: TestClient, method: str, path: str
) -> None:
    body = GOOD if method == "POST" else None
    assert locked.request(method, path, json=body).status_code == 403
    assert (
        locked.request(method, path, json=body, headers={"Authorization": "Bearer wrong-key-0"}).status_code
        == 403
    )
    if method == "POST":
        assert locked.request(method, path, json={**GOOD, "api_key": "wrong-key-0"}).status_code == 403
    answered = locked.request(method, path, json=body, headers={"Authorization": f"Bearer {KEY}"})
    assert answered.status_code != 403


@pytest.mark.parametrize("path", ["/languages", "/frontend/settings"])
def test_with_api_keys_the_pages_a_client_reads_before_its_key_need_none(
    locked: TestClient, path: str
) -> None:
    """As LibreTranslate serves them: its web page reads `keyRequired` from /frontend/settings, and clients
    build their language menus from /languages, before they have a key."""
    answer = locked.get(path)
    assert answer.status_code == 200, answer.text
    assert answer.json() == locked.get(path, headers={"Authorization": f"Bearer {KEY}"}).json()
    if path == "/frontend/settings":
        assert answer.json()["keyRequired"] is True


def test_the_key_may_come_as_a_field_a_form_field_or_in_the_query(locked: TestClient) -> None:
    assert locked.post("/translate", json={**GOOD, "api_key": KEY}).status_code == 200
    assert locked.post("/translate", data={**GOOD, "api_key": KEY}).status_code == 200
    assert locked.get(f"/languages?api_key={KEY}").status_code == 200
    assert (
        locked.post("/translate", content=b'{"q": ', headers=JSON).status_code == 403
    )  # no details for strangers


def test_a_key_with_an_unpaired_surrogate_is_refused_with_403(locked: TestClient) -> None:
    body = rb'{"q": "paho", "source": "src", "target": "tgt", "api_key": "\ud800abcdefgh"}'
    assert locked.post("/translate", content=body, headers=JSON).status_code == 403


BASE64_KEY = "q0Vd5m/7Xo+3zJwLb9k2hA=="  # what `openssl rand -base64 16` prints


def test_a_base64_key_in_the_explorers_cookie_opens_every_request(catalog: Catalog) -> None:
    """The cookie comes back as a browser sends it: its value exactly as set (quotes included, if any)."""
    with make_client(catalog, keys=frozenset({BASE64_KEY})) as client:
        page = client.get("/", params={"api_key": BASE64_KEY})
        assert page.status_code == 200
        cookie = page.headers["set-cookie"].split(";")[0]
        client.cookies.clear()
        assert client.get("/v1/models", headers={"Cookie": cookie}).status_code == 200
        older = f'{KEY_COOKIE}="{BASE64_KEY}"'  # as servers before this one set it: quoted
        assert client.get("/v1/models", headers={"Cookie": older}).status_code == 200
        assert client.get("/v1/models", headers={"Cookie": f"{KEY_COOKIE}=q0Vd5m"}).status_code == 403


def test_the_explorer_opened_with_its_key_keeps_it_in_a_cookie(catalog: Catalog) -> None:
    with make_client(catalog, keys=frozenset({KEY})) as client:
        assert client.get("/v1/models").status_code == 403
        page = client.get(f"/?api_key={KEY}")
        assert page.status_code == 200 and "httponly" in page.headers["set-cookie"].lower()
        assert client.get("/v1/models").status_code == 200  # the page's own requests carry the cookie
