"""The answers' models check strictly what the server builds: a value of the wrong type is an error, not
converted quietly (a whole number where a float is due is the one conversion)."""

import pytest
from pydantic import ValidationError

from nmt.serve.answers import Health, HypothesisAnswer, Languages, ReportedBleu


@pytest.mark.parametrize(
    "build",
    [
        lambda: HypothesisAnswer(text="a", score="-0.5", target_pieces=["</s>"]),
        lambda: HypothesisAnswer(text="a", score=-0.5, target_pieces=("</s>",)),
        lambda: Health(status="ok", models=["m"], waiting=1.0, batches=0, sentences=0, split_batches=0),
        lambda: Health(status="ok", models=["m"], waiting=True, batches=0, sentences=0, split_batches=0),
        lambda: ReportedBleu(bleu="35.3", checkpoint="best.pt"),
        lambda: Languages([{"code": "de", "name": "German", "targets": ("en",)}]),
    ],
)
def test_a_value_of_the_wrong_type_is_refused(build: object) -> None:
    with pytest.raises(ValidationError):
        build()  # type: ignore[operator]


def test_a_whole_number_is_a_float() -> None:
    assert ReportedBleu(bleu=35, checkpoint="best.pt").bleu == 35.0
