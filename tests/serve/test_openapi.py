"""The server's contract as an OpenAPI document, generated from the models that check requests and build
answers: every route, its fields with this server's limits, both body types, every error answer."""

import pytest

from nmt.serve.engines import Catalog
from nmt.serve.requests import Limits
from tests.serve.conftest import make_client

ROUTES = {
    "/",
    "/static/{name}",
    "/translate",
    "/detect",
    "/translate_file",
    "/download_file/{name}",
    "/languages",
    "/frontend/settings",
    "/v1/translate",
    "/v1/models",
    "/health",
}
GATE = {"400", "403", "408", "413", "415", "500"}


@pytest.fixture(scope="module")
def spec(catalog: Catalog) -> dict:
    with make_client(catalog, Limits(max_texts=3, max_chars=100, max_beam=7)) as client:
        document = client.get("/openapi.json").json()
        assert client.get("/spec").json() == document  # where LibreTranslate serves its own
    return document


def test_every_route_is_described_with_every_error_answer(spec: dict) -> None:
    assert set(spec["paths"]) == ROUTES
    for path, methods in spec["paths"].items():
        for method, operation in methods.items():
            assert set(operation["responses"]) >= GATE, (method, path)
            assert operation["responses"]["400"]["content"]["application/json"]["schema"] == {
                "$ref": "#/components/schemas/Error"
            }
    assert spec["components"]["schemas"]["Error"]["required"] == ["error"]
    assert "503" in spec["paths"]["/v1/translate"]["post"]["responses"]
    assert spec["paths"]["/"]["get"]["responses"]["200"]["content"].keys() == {"text/html"}


def test_the_fields_carry_this_servers_limits_as_json_and_as_a_form(spec: dict) -> None:
    body = spec["paths"]["/v1/translate"]["post"]["requestBody"]
    assert body["required"]
    assert set(body["content"]) == {"application/json", "application/x-www-form-urlencoded"}
    fields = body["content"]["application/json"]["schema"]["properties"]
    text, texts = fields["q"]["oneOf"]
    assert text == {"type": "string", "minLength": 1, "maxLength": 100}
    assert (texts["minItems"], texts["maxItems"], texts["items"]["maxLength"]) == (1, 3, 100)
    for name in ("nbest", "beam_size"):  # absent (null): the model's own
        (number,) = [kind for kind in fields[name]["anyOf"] if kind["type"] == "integer"]
        assert (number["minimum"], number["maximum"]) == (1, 7)
    assert fields["attention"]["type"] == "boolean"
    assert fields["alignments"]["type"] == "boolean"
    assert body["content"]["application/json"]["schema"]["additionalProperties"] is False  # typos refused
    form = body["content"]["application/x-www-form-urlencoded"]["schema"]["properties"]
    assert form["q"]["type"] == "string" and "oneOf" not in form["q"]  # a form has one value a field
    libre = spec["paths"]["/translate"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert set(libre["required"]) == {"q", "source", "target"}
    assert libre["properties"]["alternatives"]["maximum"] == 6
    assert libre["properties"]["format"]["enum"] == ["text", "html"]


def test_the_document_says_how_values_are_read(spec: dict) -> None:
    """JSON values keep their types; a form's are text, whose spellings the document lists."""
    described = spec["info"]["description"]
    assert "JSON values have JSON's types" in described
    assert "a boolean true/false, 1/0 or on/off in any case, a whole number in digits" in described
    assert "another number in decimals" in described


def test_the_answers_are_described(spec: dict) -> None:
    schemas = spec["components"]["schemas"]
    answer = spec["paths"]["/v1/translate"]["post"]["responses"]["200"]["content"]["application/json"]
    assert answer["schema"] == {"$ref": "#/components/schemas/V1Translation"}
    assert set(schemas["HypothesisAnswer"]["properties"]) == {
        "text",
        "score",
        "mean_log_prob",
        "suspect",
        "target_pieces",
        "attention",
        "alignment",
        "unmet_terms",
    }
    assert set(schemas["Health"]["required"]) == {
        "status",
        "models",
        "waiting",
        "decoding",
        "batches",
        "sentences",
        "split_batches",
        "cache",
        "dropped_sentences",
    }


def test_with_api_keys_the_document_needs_one_too(catalog: Catalog) -> None:
    with make_client(catalog, keys=frozenset({"secret-key-123"})) as client:
        assert client.get("/openapi.json").status_code == 403
        described = client.get("/openapi.json", headers={"Authorization": "Bearer secret-key-123"}).json()
    assert (
        "/frontend/settings and a translated file's download needs an API key"
        in described["info"]["description"]
    )
