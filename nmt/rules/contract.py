"""The contract of a search rule and of a processor, and how each declares its settings once.

At every step of the search loop (nmt/decode/search.py) the model gives the next-token log-probabilities of
every live hypothesis; then

1. each **processor** (`Processor.process`) may change them — forbid a token, favour another — seeing the
   step, the tokens so far and buffers of its own (`StepView`);
2. the **search rule** (`SearchRule.extend`) proposes candidates from them, in its own order: the candidates
   ending in eos among the first `width` finish a hypothesis (or those `Extensions.ends` marks), and the first
   `width` others live on (or those `Extensions.live` names), carrying every per-hypothesis field with them.

A rule or a processor is a frozen dataclass whose fields are the settings it reads: its own, each declared
once with `setting` (default, meaning, range), and settings of the search itself (`beam_size`,
`length_penalty`, nmt/config/sections.py `SearchLimits`). nmt/rules/registry.py lists the parts; the `search`
config section, the command-line flags of `nmt translate` and `nmt evaluate`, the server's request fields and
the batcher's key derive from their declarations. A field's name is the setting's name everywhere (a config
key, `--flag-name`, a request field). `kind` derives from the fields: a graph captured for one setting never
replays for another (nmt/decode/step_graphs.py).

Modules of this package import torch only inside the methods that run a search: reading a config (which
derives its `search` section from these declarations) loads no torch.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

if TYPE_CHECKING:
    import torch
    from torch import Tensor

P = TypeVar("P", bound="Part")


@dataclass(frozen=True)
class Extensions:
    """The candidates a rule proposes for each sentence, in the rule's order: `scores` (sentences,
    candidates) summed log-probabilities with the new token, `tokens` (sentences, candidates), `parents`
    (sentences, candidates) the live hypothesis (0 … width − 1) each continues (None: candidate j continues
    hypothesis j; then there are `width` candidates). By default the candidates ending in eos among the first
    `width` finish a hypothesis and the first `width` others live on, in that order; a rule that keeps an
    order of its own names them: `ends` (sentences, candidates) bool, `live` (sentences, width) candidate
    indices, the new hypotheses' order."""

    scores: Tensor
    tokens: Tensor
    parents: Tensor | None
    ends: Tensor | None = None
    live: Tensor | None = None


@dataclass(frozen=True)
class StepView:
    """What a step shows a rule or a processor: `step` (0-d, on the device) the tokens output so far (a
    forced prefix not counted), `tokens` (rows, max_steps + 1) each live hypothesis' bos and tokens so far
    (positions past `step` hold eos), `width` hypotheses per sentence (rows = sentences × width), the `eos`
    id, and `state`: the part's own per-hypothesis buffers (those `Part.buffers` made; they move with their
    hypotheses, and may be changed in place); `constants`: the part's tensors that are the same for every
    hypothesis (those `Part.constants` made; read them, never change them)."""

    step: Tensor
    tokens: Tensor
    width: int
    eos: int
    state: dict[str, Tensor] = field(default_factory=dict)
    constants: dict[str, Tensor] = field(default_factory=dict)


class Part:
    """What a search rule and a processor share: settings as dataclass fields, a `kind` derived from them,
    per-hypothesis buffers, and how the part is made from (and applies to) a search config."""

    graph_safe: ClassVar[bool] = True  # whether a step may be replayed from a CUDA graph
    title: ClassVar[str]  # what the part is called in a message: "beam search", "sampling"
    switch: ClassVar[str | None] = None  # the setting that asks for this part, at any value but its default

    @property
    def kind(self) -> tuple:
        """What a captured step bakes in of this part: its class and every setting (nmt/decode/step_graphs.py
        keys its graphs by it). Each must be hashable."""
        settings = tuple((f.name, getattr(self, f.name)) for f in fields(self) if f.compare)  # type: ignore[arg-type]
        return (type(self).__qualname__, *settings)

    def buffers(self, src: Tensor, width: int) -> dict[str, Tensor]:
        """This part's per-hypothesis buffers for a search of the sources `src` (sentences, src_len), each
        (sentences × width, …), or none."""
        return {}

    def constants(self, device: torch.device) -> dict[str, Tensor]:
        """Tensors this part reads at every step, the same for every hypothesis, made once per search on the
        search's `device` (a captured step cannot copy host values to the device), or none."""
        return {}

    @classmethod
    def settings(cls) -> tuple[dataclasses.Field, ...]:
        """The settings this part declares: its dataclass fields made with `setting` (others, such as
        `beam_size`, are settings of the search itself that it reads)."""
        return tuple(f for f in fields(cls) if "meaning" in f.metadata)  # type: ignore[arg-type]

    @classmethod
    def reads(cls) -> tuple[str, ...]:
        """The names of every setting this part reads: its fields."""
        return tuple(f.name for f in fields(cls) if f.init)  # type: ignore[arg-type]

    @classmethod
    def check(cls, settings: Any, name: Any) -> None:
        """Raise ConfigError where settings this part reads do not go together; `name(setting, value)` words
        a setting as the user gave it (`search.beam_size=5`, `--beam-size 5`)."""

    @classmethod
    def applies(cls, settings: Any) -> bool:
        """Whether a search config (any object with the settings as attributes) asks for this part: its
        `switch` is not at its default (a part without one always applies: the search of last resort)."""
        if cls.switch is None:
            return True
        default = next(f.default for f in fields(cls) if f.name == cls.switch)  # type: ignore[arg-type]
        return getattr(settings, cls.switch) != default

    @classmethod
    def of(cls: type[P], settings: Any) -> P:
        """This part with its settings read from a search config."""
        return cls(**{name: getattr(settings, name) for name in cls.reads()})


class SearchRule(Part):
    """The contract of a search rule: `width` live hypotheses per sentence, finished ones scored by their
    summed log-probability over the length penalty of `length_penalty` and `length_normalization`
    (nmt/decode/search.py `score`)."""

    length_penalty: float
    length_normalization: str

    @property
    def width(self) -> int:
        raise NotImplementedError

    @property
    def groups(self) -> int:
        """Groups of its hypotheses that finish apart (hypothesis j of a sentence is in group j % groups): a
        group is done once width / groups of its hypotheses finished, and the n-best list holds each group's
        best, then each group's second, and so on."""
        return 1

    def start(self, sentences: int, device: torch.device) -> Tensor:
        """The scores of the live hypotheses before the first step. (sentences, width)"""
        import torch

        return torch.zeros(sentences, self.width, device=device)

    def extend(self, log_probs: Tensor, scores: Tensor, view: StepView) -> Extensions:
        """Candidates from the next-token log-probabilities of every live hypothesis, log_probs (sentences ×
        width, vocab) with banned tokens at -inf, and their scores (sentences, width)."""
        raise NotImplementedError


class Processor(Part):
    """The contract of a processor: changes the next-token log-probabilities before the rule sees them."""

    def process(self, log_probs: Tensor, view: StepView) -> Tensor:
        """The log-probabilities (rows, vocab), changed (in place is allowed)."""
        raise NotImplementedError


@dataclass(frozen=True, kw_only=True)
class Scored(SearchRule):
    """A rule whose finished hypotheses are scored with `search.length_penalty` (a setting of the search
    itself, declared in nmt/config/sections.py `SearchLimits`)."""

    length_penalty: float = 1.0
    length_normalization: str = "gnmt"
