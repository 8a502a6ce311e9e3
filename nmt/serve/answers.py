"""What the server answers, as pydantic models: the routes build their answers from them (so each answer is
checked against its model as it is made) and the OpenAPI document describes them. Field names are the
clients' (LibreTranslate's are camelCase). The check is strict (`Answer`): a value of the wrong type is a bug
to see, not one to convert quietly; a whole number where the model says float is the one conversion."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel
from starlette.responses import Response

from nmt.decode.confidence import LONG_RATIO, LOOP_NGRAM, LOOP_REPEATS, LOW_COVERAGE, MIN_COVERED, Suspicion

Weights = list[list[list[list[float]]]]  # (layers, heads, target subwords, source subwords)


class Answer(BaseModel):
    """An answer's model: strict, as the module says."""

    model_config = ConfigDict(strict=True)


class Error(Answer):
    """Every refusal and failure: 4xx for a request the server refuses, 5xx for one it could not answer."""

    error: str = Field(description="What went wrong, in one line.")


def json_answer(
    answer: BaseModel, omit_none: bool = False, status: int = 200, headers: Mapping[str, str] | None = None
) -> Response:
    """`answer` as a JSON response; `omit_none`: fields without a value are left out rather than null."""
    body = answer.model_dump_json(exclude_none=omit_none)
    return Response(body, status_code=status, headers=headers, media_type="application/json")


def error_answer(status: int, message: str, headers: Mapping[str, str] | None = None) -> Response:
    """The answer `{"error": message}` with HTTP `status`."""
    return json_answer(Error(error=message), status=status, headers=headers)


class Detected(Answer):
    confidence: float = Field(
        description="How likely the text is in `language`, in percent, among the served languages (100 where "
        "the server has no language detection: the one source language served into the target)."
    )
    language: str


class Detections(RootModel[list[Detected] | list[list[Detected]]]):
    """POST /detect: the likeliest served language of `q`, as a list of one; a list of such lists for a list
    of texts."""

    model_config = ConfigDict(strict=True)


SUSPECT = (
    f"Why the translation looks degenerate, if it does: loop (an n-gram of up to {LOOP_NGRAM} subwords "
    f"repeated back to back {LOOP_REPEATS} times or more), long (over {LONG_RATIO:g} times the source's "
    f"subwords), uncovered (with alignments: its tokens attend most to under {LOW_COVERAGE:.0%} of a source "
    f"of {MIN_COVERED} subwords or more)."
)
MEAN_LOG_PROB = "Mean log-probability per output token and eos: the score without its length penalty"


class TextConfidence(Answer):
    """How far to trust one text's translation: its least sure line's."""

    meanLogProb: float = Field(
        description=f"{MEAN_LOG_PROB}, of the text's least sure line (0: certain; lower: less sure)."
    )
    suspect: list[Suspicion] = Field(description=SUSPECT + " Any line's.")


class LibreTranslation(Answer):
    """POST /translate: as `q`, a string or a list."""

    translatedText: str | list[str]
    alternatives: list[str] | list[list[str]] | None = Field(
        None, description="Other translations, distinct and unlike translatedText (when asked)."
    )
    detectedLanguage: Detected | list[Detected] | None = Field(None, description="With source auto.")
    confidence: TextConfidence | list[TextConfidence] | None = Field(
        None,
        description="nmt's addition, which LibreTranslate clients ignore: how far to trust each translation.",
    )


class TranslatedFile(Answer):
    """POST /translate_file: where to download the translation (GET)."""

    translatedFileUrl: str


class Language(Answer):
    code: str = Field(description="The code the model was trained with, as `source` and `target` take it.")
    name: str


class ServedLanguage(Language):
    targets: list[str] = Field(description="The languages it is translated into (empty: a target only).")


class Languages(RootModel[list[ServedLanguage]]):
    """GET /languages: each language of the served pairs."""

    model_config = ConfigDict(strict=True)


class PairOfLanguages(Answer):
    source: Language
    target: Language


class FrontendSettings(Answer):
    """GET /frontend/settings: what LibreTranslate's web page reads."""

    charLimit: int
    frontendTimeout: int
    apiKeys: bool
    keyRequired: bool
    suggestions: bool
    filesTranslation: bool
    supportedFilesFormat: list[str]
    language: PairOfLanguages


class HypothesisAnswer(Answer):
    text: str
    score: float = Field(description="Length-normalised log-probability (CTranslate2's own for an export).")
    mean_log_prob: float = Field(description=f"{MEAN_LOG_PROB} (0 for a blank line).")
    suspect: list[Suspicion] = Field(description=SUSPECT)
    target_pieces: list[str] = Field(description="The output's subwords, ending with '</s>'.")
    attention: Weights | None = Field(
        None,
        description="With attention: (layers, heads, target_pieces, source_pieces) weights, each row "
        "summing to 1, rounded to 5 decimals.",
    )
    unmet_terms: list[str] | None = Field(
        None,
        description="With a glossary, for a model trained without terminology annotation (translated by "
        "constrained search): the glossary's target terms the hypothesis lacks, where the length limit ended "
        "its search first.",
    )
    alignment: list[list[int]] | None = Field(
        None,
        description="With alignments: [source word, output word] links, from 0, the words of the line and of "
        "text (whitespace-separated); each output word linked to the source words its subwords attended "
        "most in the attention the run aligns with (a guided run's supervised heads, else a Transformer's "
        "penultimate layer's mean of heads).",
    )


class LineAnswer(Answer):
    line: int = Field(
        description="The line of the text it translates, from 0 (a page's: its block, then its attributes); "
        "with split_sentences, a line has one entry for each of its sentences."
    )
    source_pieces: list[str] = Field(description="Its subwords and '</s>' (a blank line: none).")
    hypotheses: list[HypothesisAnswer] = Field(description="Best first.")


class SentenceCount(Answer):
    line: int = Field(description="The line, from 0 (a page's: its block, then its attributes).")
    source_sentences: int
    translated_sentences: int = Field(description="Those of its best translation: fewer than the source's.")


class CutPiece(Answer):
    line: int = Field(description="The line, from 0 (a page's: its block, then its attributes).")
    subwords: int = Field(
        description="The subwords of a part of a sentence that no space splits (a whole line's, without "
        "split_sentences)."
    )
    translated: int = Field(
        description="Those translated (the model's limit); '[…]' follows the translation."
    )


class TextAnswer(Answer):
    translatedText: str = Field(description="The best translation of each line, one line each.")
    lines: list[LineAnswer]
    dropped: list[SentenceCount] = Field(
        description="The lines whose best translation holds fewer sentences than the line (each counted by "
        "its language's sentence rules): sentences the model dropped."
    )
    cut: list[CutPiece] = Field(description="The pieces of lines cut to the model's limit.")


class V1Translation(Answer):
    """POST /v1/translate: per text of `q`, its lines and their hypotheses."""

    model: str
    source: str
    target: str
    beam_size: int
    translations: list[TextAnswer]


class ReportedBleu(Answer):
    bleu: float
    checkpoint: str


class ModelFacts(Answer):
    """What a served model is, beyond its name and pair (null: not known, as for an export)."""

    engine: Literal["torch", "ctranslate2"]
    type: str = Field(description="transformer, rnn-bahdanau, rnn-luong or ensemble.")
    runs: list[str]
    checkpoint: str | None
    domain: str | None = Field(
        description="What the model was trained on, and so what it handles (data.domain; null: not stated)."
    )
    parameters: int | None
    test_bleu: ReportedBleu | None = Field(description="The test BLEU of the run's report, for one run.")
    beam_size: int
    attention: str | None = Field(description="The attention /v1/translate returns (null: none).")


class ServedModel(ModelFacts):
    name: str
    source: str
    target: str
    default: bool = Field(description="Whether it translates its pair when no model is named.")


class Models(Answer):
    """GET /v1/models."""

    models: list[ServedModel]


class CacheHealth(Answer):
    """The translation cache: its texts and their bytes now, its bounds, and the lookups of a text since the
    server started that found its translation (`hits`) and that did not (`misses`)."""

    entries: int
    bytes: int
    max_entries: int = Field(description="0: no cache (--no-cache).")
    max_bytes: int
    hits: int
    misses: int


class Health(Answer):
    """GET /health: the server answers; its models, sentences waiting, batches decoded so far, its cache."""

    status: Literal["ok"]
    models: list[str]
    waiting: int
    decoding: int = Field(description="Lines of the batch being decoded now.")
    batches: int
    sentences: int
    split_batches: int
    cache: CacheHealth
    dropped_sentences: int = Field(
        description="The sentences translations have lacked so far: each line's source sentences less its "
        "best translation's, where fewer."
    )
