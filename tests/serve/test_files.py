"""POST /translate_file and GET /download_file (nmt/serve/files.py): a .txt file in LibreTranslate's
multipart form is translated line by line as /translate translates a text (a .html file as format html), its
translation downloaded from the address answered; other formats, files over the limits, bad forms are refused
in one line."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from nmt.serve.engines import Catalog
from nmt.serve.files import TranslatedFiles, TranslatedText
from nmt.serve.requests import Limits
from tests.markup_checks import assert_well_formed_with_every_tag, words
from tests.serve.conftest import KEY, make_client

PAIR = {"source": "src", "target": "tgt"}


def translated_file(client: TestClient, name: str, data: bytes, **fields: str) -> str:
    """The text of `data` translated through /translate_file, then downloaded."""
    answer = client.post("/translate_file", data=PAIR | fields, files={"file": (name, data, "text/plain")})
    assert answer.status_code == 200, answer.text
    url = answer.json()["translatedFileUrl"]
    assert url.startswith("http://testserver/download_file/") and url.endswith(name.replace(" ", "%20"))
    download = client.get(url)
    assert download.status_code == 200
    assert (
        download.headers["content-disposition"] == f"attachment; filename*=UTF-8''{name.replace(' ', '%20')}"
    )
    return download.text


def test_a_text_file_is_translated_line_by_line(client: TestClient, offline: dict[str, str]) -> None:
    first, second = list(offline)[:2]
    text = f"{first}\n\n{second}\n"
    expected = f"{offline[first]}\n\n{offline[second]}\n"
    assert translated_file(client, "my notes.txt", text.encode()) == expected
    windows = text.replace("\n", "\r\n").encode("utf-8-sig")  # a byte-order mark and CRLF lines
    assert translated_file(client, "notes.TXT", windows) == expected


def test_an_html_file_is_translated_as_format_html(client: TestClient, offline: dict[str, str]) -> None:
    sentence = next(iter(offline))
    first, *rest = sentence.split()
    page = f"<html><body><p><b>{first}</b> {' '.join(rest)}</p><script>a < b</script></body></html>"
    answer = client.post("/translate_file", data=PAIR, files={"file": ("page.html", page.encode())})
    download = client.get(answer.json()["translatedFileUrl"])
    assert download.headers["content-type"] == "text/html; charset=utf-8"
    assert_well_formed_with_every_tag(page, download.text)
    assert words(download.text.replace("a < b", "")) == offline[sentence].split()


def test_other_formats_and_bad_files_are_refused_in_one_line(client: TestClient) -> None:
    def refusal(name: str, data: bytes, fields: dict[str, str] = PAIR) -> str:
        answer = client.post("/translate_file", data=fields, files={"file": (name, data, "text/plain")})
        assert answer.status_code == 400
        return answer.json()["error"]

    assert (
        refusal("report.docx", b"PK")
        == "a .docx file is not translated; this server translates .txt, .html, .htm files"
    )
    assert refusal("README", b"a") == (
        "a file without an extension is not translated; this server translates .txt, .html, .htm files"
    )
    assert refusal("a.txt", b"ok \xff") == "file is not valid UTF-8 (byte 0xff at 3); send UTF-8 text"
    assert refusal("a.txt", b"a", {"source": "src", "target": "xx"}).startswith("src → xx is not served")
    missing = client.post("/translate_file", data=PAIR)
    assert missing.json() == {"error": "Invalid request: missing file parameter"}  # LibreTranslate's words
    text = client.post("/translate_file", data=PAIR | {"file": "a b"}, files={"other": ("x.txt", b"a")})
    assert text.json()["error"] == (
        "file must be a file (a part of a multipart form with a filename), not a string"
    )


def test_a_file_is_bounded_as_q(catalog: Catalog) -> None:
    with make_client(catalog, Limits(max_chars=10)) as client:
        answer = client.post("/translate_file", data=PAIR, files={"file": ("a.txt", b"a b c d e f g")})
    assert answer.status_code == 400
    assert answer.json() == {"error": "file holds 13 characters; this server takes at most 10"}


def test_a_broken_multipart_form_is_refused_in_one_line(client: TestClient) -> None:
    body = b"--other\r\nContent-Disposition: form-data; name=source\r\n\r\nsrc\r\n--other--\r\n"
    answer = client.post(
        "/translate_file", content=body, headers={"content-type": "multipart/form-data; boundary=mine"}
    )
    assert answer.status_code == 400
    assert answer.json() == {
        "error": "the multipart form cannot be read: its boundary is missing or not the body's"
    }
    twice = client.post("/translate_file", files=[("source", (None, b"src")), ("source", (None, b"src"))])
    assert twice.json() == {"error": "source given more than once in the form"}


def test_the_key_may_come_in_the_multipart_form(catalog: Catalog, offline: dict[str, str]) -> None:
    """The download needs no key: the file's random name is its key."""
    sentence = next(iter(offline))
    with make_client(catalog, keys=frozenset({KEY})) as client:
        refused = client.post("/translate_file", data=PAIR, files={"file": ("a.txt", sentence.encode())})
        assert refused.status_code == 403
        assert translated_file(client, "a.txt", sentence.encode(), api_key=KEY) == offline[sentence]


def test_an_unknown_or_evicted_file_is_404(client: TestClient) -> None:
    answer = client.get("/download_file/0123.notes.txt")
    assert answer.status_code == 404 and "no translated file '0123.notes.txt'" in answer.json()["error"]
    kept = TranslatedFiles(kept=2)
    names = [kept.add(TranslatedText(f"{i}.txt", b"x", "text/plain")) for i in range(3)]
    assert [kept.get(name) is not None for name in names] == [False, True, True]
    assert names[2].endswith(".2.txt") and len(set(names)) == 3


def test_frontend_settings_list_the_file_formats(client: TestClient) -> None:
    settings = client.get("/frontend/settings").json()
    assert settings["filesTranslation"] is True and settings["supportedFilesFormat"] == [
        ".txt",
        ".html",
        ".htm",
    ]


@pytest.mark.parametrize("name", ["../../etc/passwd.txt", "C:\\Users\\me\\notes.txt"])
def test_only_the_file_s_own_name_is_kept(client: TestClient, name: str) -> None:
    answer = client.post("/translate_file", data=PAIR, files={"file": (name, b"a")})
    url = answer.json()["translatedFileUrl"]
    assert url.rsplit("/", 1)[1].split(".", 1)[1] == name.replace("\\", "/").rsplit("/", 1)[1]
