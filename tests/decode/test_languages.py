"""Which direction a translator translates: a multilingual model's target language checked against its
directions, zero-shot on request, a pivot language; a one-pair model's own pair."""

from __future__ import annotations

from typing import Any

import pytest

from nmt.config.multilingual import Direction
from nmt.config.sections import SearchConfig
from nmt.data.language_tags import LanguageTags
from nmt.decode.languages import Asked, Pivot, into_direction
from nmt.decode.search import Hypothesis
from nmt.decode.translator import Translator
from nmt.errors import UserError

TRAINED = tuple(Direction.parse(name) for name in ("en-de", "de-en", "en-fr", "fr-en"))
TAGS = LanguageTags({"de": 4, "en": 5, "fr": 6, "cs": 7})  # cs: a tag, but no direction into or from it


class Unsearched(Translator):
    """A translator that is never asked to translate: no model, no tokenizers."""

    def search_batch(self, *args: Any) -> list[list[Hypothesis]]:
        raise AssertionError("never searched")


def translator(tags: LanguageTags | None = TAGS, directions: tuple[Direction, ...] = TRAINED) -> Any:
    return Unsearched(None, SearchConfig(), 10, tags, directions)  # type: ignore[arg-type]


def test_a_trained_direction_translates_into_its_target() -> None:
    assert translator().toward("de", "en").target == "de"
    assert translator().toward("en", None).target == "en"  # the source unnamed: any direction into en


@pytest.mark.parametrize(
    ("src", "tgt", "message"),
    [
        ("en", None, "translates several directions (en-de, de-en, en-fr, fr-en): name the target language"),
        ("de", "fr", "never trained to translate de → fr (its directions: en-de, de-en, en-fr, fr-en); add "),
        (None, "cs", "never trained to translate into cs"),
        ("en", "xx", "the vocabulary has no tag for language 'xx'"),
        ("xx", "de", "the vocabulary has no tag for language 'xx'"),
    ],
)
def test_a_direction_the_model_cannot_take_is_refused(src: str | None, tgt: str | None, message: str) -> None:
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace(")", r"\)")):
        translator().toward(tgt, src)


def test_zero_shot_translates_between_any_two_of_its_languages() -> None:
    assert translator().toward("fr", "de", zero_shot=True).target == "fr"
    assert translator().toward("de", "cs", zero_shot=True).target == "de"
    with pytest.raises(UserError, match="no tag for language 'xx'"):
        translator().toward("xx", "de", zero_shot=True)


def test_a_pivot_chains_two_trained_directions() -> None:
    pivot = into_direction(translator(), Asked("de", "fr", pivot="en"))
    assert isinstance(pivot, Pivot)
    assert (pivot.first.target, pivot.second.target) == ("en", "fr")
    assert pivot.first.settings.nbest == 1


@pytest.mark.parametrize(
    ("asked", "message"),
    [
        (Asked("de", "fr", pivot="cs"), "never trained to translate de → cs"),
        (Asked("de", None, pivot="en"), "--pivot needs the target language"),
        (Asked("de", "en", pivot="en"), "--pivot en: the pivot is a third language"),
    ],
)
def test_a_pivot_needs_two_directions_the_model_takes(asked: Asked, message: str) -> None:
    with pytest.raises(UserError, match=message):
        into_direction(translator(), asked)


def test_a_one_pair_model_takes_its_own_pair_only() -> None:
    one = translator(None, (Direction("de", "en"),))
    assert one.toward("en", "de") is one and one.toward(None, None) is one
    with pytest.raises(UserError, match="this model translates de → en only"):
        one.toward("fr", "de")
    with pytest.raises(UserError, match="--zero-shot: this model translates one language pair"):
        one.toward("en", "de", zero_shot=True)
    with pytest.raises(UserError, match="--pivot: this model translates one language pair"):
        into_direction(one, Asked("de", "en", pivot="fr"))


def test_a_pivot_gives_no_word_alignments() -> None:
    """Two translations in a row have no links from the input's words to the output's."""
    pivot = into_direction(translator(), Asked("de", "fr", pivot="en"))
    assert isinstance(pivot, Pivot)
    with pytest.raises(UserError, match="drop --pivot or --alignments"):
        pivot.translated(["ein Hund"], alignments=True)
