"""The answers' models check strictly what the server builds: a value of the wrong type is an error, not
converted quietly (a whole number where a float is due is the one conversion)."""

from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from nmt.serve.answers import Health, HypothesisAnswer, Languages, ReportedBleu

HYPOTHESIS = {"text": "a", "score": -0.5, "mean_log_prob": -0.25, "suspect": [], "target_pieces": ["</s>"]}
CACHE = {"entries": 0, "bytes": 0, "max_entries": 10, "max_bytes": 100, "hits": 0, "misses": 0}
HEALTH = {
    "status": "ok",
    "models": ["m"],
    "waiting": 1,
    "decoding": 0,
    "batches": 0,
    "sentences": 0,
    "split_batches": 0,
    "cache": CACHE,
    "dropped_sentences": 0,
}


@pytest.mark.parametrize(
    ("model", "given", "wrong"),
    [
        (HypothesisAnswer, HYPOTHESIS, {"score": "-0.5"}),
        (HypothesisAnswer, HYPOTHESIS, {"target_pieces": ("</s>",)}),
        (HypothesisAnswer, HYPOTHESIS, {"mean_log_prob": "-0.25"}),
        (HypothesisAnswer, HYPOTHESIS, {"suspect": ["salad"]}),
        (Health, HEALTH, {"waiting": 1.0}),
        (Health, HEALTH, {"waiting": True}),
        (ReportedBleu, {"bleu": 35.3, "checkpoint": "best.pt"}, {"bleu": "35.3"}),
    ],
)
def test_a_value_of_the_wrong_type_is_refused(
    model: type[BaseModel], given: dict[str, Any], wrong: dict[str, Any]
) -> None:
    """Each answer is built from values that pass, then with one of them of the wrong type, which fails."""
    model(**given)
    with pytest.raises(ValidationError):
        model(**(given | wrong))


def test_a_languages_list_is_a_list() -> None:
    Languages([{"code": "de", "name": "German", "targets": ["en"]}])
    with pytest.raises(ValidationError):
        Languages([{"code": "de", "name": "German", "targets": ("en",)}])


def test_a_whole_number_is_a_float() -> None:
    assert ReportedBleu(bleu=35, checkpoint="best.pt").bleu == 35.0
