"""A target-language vocabulary binds itself to a direction (`TargetVocabulary.bound`): the translator passes
the direction and the vocabularies it knows, the rule decides whether it applies and what it forbids."""

import logging

import pytest

from nmt.errors import UserError
from nmt.rules.target_vocabulary import TargetVocabulary

HELD = TargetVocabulary(target_vocabulary=True, zero_shot_vocabulary=True)


def test_a_known_vocabulary_forbids_every_other_subword() -> None:
    bound = HELD.bound(False, [0, 2, 3], 6, "torch", "de")
    assert bound is not None and bound.forbidden == (1, 4, 5) and bound.vocabulary_size == 6


def test_a_direction_its_settings_leave_alone_is_not_held() -> None:
    trained_only = TargetVocabulary(target_vocabulary=True, zero_shot_vocabulary=False)
    assert trained_only.bound(True, [0], 6, "torch", "de") is None
    assert TargetVocabulary(target_vocabulary=False).bound(False, [0], 6, "torch", "de") is None


def test_an_unknown_vocabulary_is_warned_of_zero_shot_and_refused_in_a_trained_direction(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING):
        assert HELD.bound(True, None, 6, "ctranslate2", "fr") is None
    assert "the ctranslate2 engine has no vocabulary of fr here" in caplog.text
    with pytest.raises(UserError, match="add --no-target-vocabulary"):
        HELD.bound(False, None, 6, "ctranslate2", "fr")
