"""Where an evaluation keeps its hypotheses: `RUN_DIR/eval/<source>[.<checkpoint>].<search>.hyp`, a name that
states what was translated (a split and direction, or a file), with which checkpoint and by which search, so
that two evaluations that differ in any of them never share a file; and never over a file the run's report
points to (`nmt evaluate` leaves the final report's hypotheses as they are).

The search part is the beam size where the rule reads one (`beam5`), then every other setting the search
reads that is off its default, as `name=value` (a switch that is on: its name alone), e.g.
`test.beam5.length_penalty=0.6.hyp`, `test.sampling.top_k=10.hyp`, `test.beam3.diverse_groups=3.hyp`."""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nmt.atomic_files import atomic_write_text
from nmt.config.sections import SearchConfig
from nmt.decode.trained_run import TrainedRun
from nmt.rules.registry import active, rule_of
from nmt.run.report import read_report

OUTPUT_LIMIT = ("max_len_a", "max_len_b")  # read by every search, whatever its rule


def stated_search(settings: SearchConfig) -> dict[str, Any]:
    """The settings that say which search ran: the beam size where its rule reads one, and every other setting
    its rule and processors read (and the output limit) that is off its default, in declaration order."""
    read = {name for part in active(settings) for name in part.reads()} | set(OUTPUT_LIMIT)
    stated = {}
    for field in dataclasses.fields(SearchConfig):
        value = getattr(settings, field.name)
        if field.name in read and (value != field.default or field.name == "beam_size"):
            stated[field.name] = value
    return stated


def search_record(settings: SearchConfig) -> dict[str, Any]:
    """The search as a report records it: its rule's title and its stated settings."""
    return {"rule": rule_of(settings).title, **stated_search(settings)}


def search_label(settings: SearchConfig) -> str:
    """The search as a file name states it: `beam5`, `beam5.length_penalty=0.6`, `sampling.top_k=10`."""
    parts = []
    for name, value in stated_search(settings).items():
        if name == "beam_size":
            parts.append(f"beam{value}")
        else:
            parts.append(name if value is True else f"{name}={value}")
    return ".".join(parts)


def source_tag(path: Path) -> str:
    """A short digest of a file's or folder's absolute path: two sources of the same name in different
    folders get different hypothesis files."""
    return hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:8]


def reported_files(run: TrainedRun) -> frozenset[str]:
    """The names of the hypothesis files in the run's eval/ that its report (report.json) points to."""
    try:
        report = read_report(run.directory.report)
    except (OSError, ValueError):
        return frozenset()
    found: set[str] = set()

    def collect(value: Any) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                if key == "hypotheses" and isinstance(item, str):
                    found.add(Path(item).name)
                else:
                    collect(item)

    collect({"valid": report.get("valid"), "test": report.get("test")})
    return frozenset(found)


@dataclass(frozen=True)
class HypothesisFiles:
    """How one evaluation names and keeps its hypothesis files: in `folder`, each named by its source (a name
    given per file, then `tag`: an ensemble's `.ensemble<n>`, a data folder's digest), `checkpoint` (but
    'best') and the whole search `settings`; a file named in `protected` (the report's) is never written."""

    folder: Path
    checkpoint: str
    settings: SearchConfig
    tag: str = ""
    protected: frozenset[str] = frozenset()

    @classmethod
    def of_run(cls, run: TrainedRun, tag: str = "", protect_report: bool = False) -> HypothesisFiles:
        """A loaded run's files (its eval/, checkpoint and search); with `protect_report`, never over the
        files its report points to."""
        protected = reported_files(run) if protect_report else frozenset()
        return cls(run.directory.eval_dir, run.checkpoint_name, run.cfg.search, tag, protected)

    def path(self, name: str) -> Path:
        """`<folder>/<name><tag>[.<checkpoint>].<search>.hyp`."""
        checkpoint = "" if self.checkpoint == "best" else f".{self.checkpoint}"
        return self.folder / f"{name}{self.tag}{checkpoint}.{search_label(self.settings)}.hyp"

    def keep(self, name: str, lines: list[str]) -> Path:
        """Write the hypotheses of `name`, one a line, and return where they are. Where the file is one the
        report points to, it is left as it is: it is theirs when it holds the same lines, else they go to
        `<…>.evaluate.hyp` beside it."""
        path, text = self.path(name), "".join(line + "\n" for line in lines)
        if path.name in self.protected:
            if path.is_file() and path.read_text(encoding="utf-8") == text:
                return path
            path = path.with_suffix(".evaluate.hyp")
        atomic_write_text(path, text)
        return path
