"""Target-language tags, spelled `>>de<<` as Marian and OPUS-MT spell them: one piece each in the vocabulary,
inserted as ids, never as text.

`vocabulary_tags` is the one place that says which pieces a multilingual vocabulary reserves (nmt/data/
tokenizer.py passes them to sentencepiece as control symbols, like `<s>`: an id of their own that no text
ever encodes to, and that decoding drops). `Tokenizer.tag_ids` reads them back from a trained model;
`LanguageTags` puts a tag's id where the run's placement wants it: first in the source ids (encoder tags) or
as the decoder's forced first token (decoder tags). Text that happens to contain `>>fr<<` is text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from nmt.config.multilingual import Placement, RunDirections
from nmt.errors import UserError

TAG = re.compile(r">>([A-Za-z0-9_]+)<<")  # a tag piece; the group is its language code


def tag_piece(lang: str) -> str:
    """The tag of language `lang`: `>>de<<`."""
    return f">>{lang}<<"


def vocabulary_tags(languages: Iterable[str]) -> list[str]:
    """The tag pieces a vocabulary for `languages` reserves, in a fixed order (sorted by language)."""
    return [tag_piece(lang) for lang in sorted(set(languages))]


@dataclass(frozen=True)
class LanguageTags:
    """The tags of a run: each language's tag id (`Tokenizer.tag_ids`) and where tags go (None: nowhere, the
    one direction of a bilingual run, whose ids stay as they are).

    Encoder tags: the source ids of a sentence into `L` are `[tag(L), *ids]`, the target ids as they are.
    Decoder tags: the source ids as they are; the target ids `[tag(L), *ids]`, so that after bos the decoder
    reads the tag (in training its prediction counts in the loss, as in mBART; search forces it). Search must
    never output a tag id (`banned`) except the one it is told to force (`forced_prefix`).
    """

    ids: Mapping[str, int]
    placement: Placement | None = "encoder"

    @classmethod
    def of(cls, directions: RunDirections, tag_ids: Mapping[str, int]) -> LanguageTags:
        """The tags `directions` place, from a vocabulary's `tag_ids`; UserError when one of the run's
        languages has none."""
        tags = cls(tag_ids if directions.tagged else {}, directions.tags)
        tags.check(directions.languages)
        return tags

    def id(self, lang: str) -> int:
        """The id of language `lang`'s tag; UserError for a language the vocabulary has no tag for."""
        if lang not in self.ids:
            known = ", ".join(sorted(self.ids)) or "none"
            raise UserError(f"the vocabulary has no tag for language {lang!r} (its tags: {known})")
        return self.ids[lang]

    def check(self, languages: Iterable[str]) -> None:
        """Raise UserError unless every one of `languages` has a tag (where tags are placed)."""
        if self.placement is None:
            return
        for lang in languages:
            self.id(lang)

    def source(self, ids: Sequence[int], tgt_lang: str) -> list[int]:
        """The source ids of a sentence to translate into `tgt_lang`."""
        return [self.id(tgt_lang), *ids] if self.placement == "encoder" else list(ids)

    @property
    def tagged(self) -> bool:
        """Whether tags mark the target language (else the model translates into its one language)."""
        return self.placement is not None

    def target(self, ids: Sequence[int], tgt_lang: str) -> list[int]:
        """The target ids of a training pair into `tgt_lang` (without bos/eos)."""
        return [*self.forced_prefix(tgt_lang), *ids]

    def forced_prefix(self, tgt_lang: str) -> list[int]:
        """The tokens search must force after bos for output in `tgt_lang`: the tag with decoder tags."""
        return [self.id(tgt_lang)] if self.placement == "decoder" else []

    @property
    def banned(self) -> list[int]:
        """Every tag id, sorted: search outputs none of them (but the forced prefix)."""
        return sorted(self.ids.values())


NO_TAGS = LanguageTags({}, None)  # a bilingual run's: ids stay as they are
