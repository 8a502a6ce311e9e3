"""Schemathesis (slow layer): requests generated from the OpenAPI document for every operation, valid ones and
invalid ones, sent to `nmt serve` on the tiny trained model with small limits; no answer may be a 5xx, and
each must conform to the document (status code, content type, headers, body)."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from schemathesis import GenerationMode  # noqa: E402
from schemathesis.checks import not_a_server_error  # noqa: E402
from schemathesis.specs.openapi.checks import (  # noqa: E402
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.serve.conftest import start  # noqa: E402
from tests.serve.test_openapi import ROUTES  # noqa: E402

pytestmark = pytest.mark.slow
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]
EXAMPLES = 30  # per operation and mode: (7 + 4 × 2) × 30 requests
PAIR = {"source": "src", "target": "tgt"}
POSTED = {"/translate", "/detect", "/translate_file", "/v1/translate"}
CASES = [  # every operation with valid fields, the translating ones also with invalid fields
    *(("GET", path, GenerationMode.POSITIVE) for path in sorted(ROUTES - POSTED)),
    *(("POST", path, mode) for path in sorted(POSTED) for mode in GenerationMode),
]


@pytest.fixture(scope="module")
def document(trained_run: Path) -> Iterator[Any]:
    """The schema served by `nmt serve` with small limits (4 texts, 200 characters: short decodes)."""
    served = start(trained_run, "--max-texts", "4", "--max-chars", "200")
    yield schemathesis.openapi.from_url(f"{served.url}/openapi.json")
    assert served.stop() == 0


def with_the_served_pair(case: Any) -> Any:
    """`case` with the served languages, where its body names languages: random ones are seldom served."""
    if isinstance(case.body, dict) and {"source", "target"} & case.body.keys():
        case.body |= PAIR
    return case


@pytest.mark.parametrize(("method", "path", "mode"), CASES)
def test_every_answer_conforms_to_the_openapi_document(
    document: Any, method: str, path: str, mode: GenerationMode
) -> None:
    generated = document[path][method].as_strategy(generation_mode=mode)
    if mode == GenerationMode.POSITIVE:
        generated = generated | generated.map(with_the_served_pair)

    @given(case=generated)
    @settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    def answered_as_documented(case: Any) -> None:
        case.call_and_validate(checks=CHECKS)

    answered_as_documented()
