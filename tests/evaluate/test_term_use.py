"""`nmt evaluate --glossary`: term use counted on occurrences (worked out by hand), printed beside BLEU and
written into the JSON report, for a file of any system's output, for a run trained with annotation (terms
written in) and for one trained without (constrained search); a hypotheses file without its sources is refused
in one line."""

from __future__ import annotations

import json
from pathlib import Path

from nmt.data.glossary import Term, TermFinder, nfkc
from nmt.evaluate.term_use import TermUse, term_use
from tests.conftest import assert_one_line_error, run_cli

SOURCES = [
    "Ich fahre Fahrrad und mein Fahrrad ist rot.",  # the term twice
    "Die Deutsche Bahn fährt.",  # a match-case term
    "Kein Begriff hier.",  # no term: not counted
    "Das fahrrad steht im Fahrradweg.",  # once: never inside a longer word, case ignored
]
OUTPUTS = [
    "I ride a Bicycle and my bike is red.",  # once of twice, case ignored
    "The deutsche bahn runs.",  # its case does not match
    "No term here.",
    "The bicycle stands in the bicycle lane.",  # held twice, counted once: the source holds it once
]
REFERENCES = [
    "I ride a bicycle and my bicycle is red.",
    "The Deutsche Bahn runs.",
    "No term here.",
    "The bike stands in the bicycle lane.",
]
GLOSSARY = "Fahrrad\tbicycle\nDeutsche Bahn\tDeutsche Bahn\tmatch-case\n"


def finder() -> TermFinder:
    terms = [Term("Fahrrad", "bicycle"), Term("Deutsche Bahn", "Deutsche Bahn", match_case=True)]
    return TermFinder(terms, nfkc)


def test_term_use_counts_each_occurrence_once() -> None:
    found = term_use(SOURCES, OUTPUTS, finder(), REFERENCES)
    assert found == TermUse(occurrences=4, used=2, sentences=3, in_references=4)
    assert found.as_dict() == {
        "occurrences": 4,
        "used": 2,
        "sentences": 3,
        "rate": 50.0,
        "in_references": 4,
        "reference_rate": 100.0,
    }
    assert term_use(["Kein Begriff."], ["None."], finder()).as_dict()["rate"] is None


def write(folder: Path) -> dict[str, Path]:
    files = {}
    for name, lines in (("src", SOURCES), ("hyp", OUTPUTS), ("ref", REFERENCES)):
        files[name] = folder / f"{name}.txt"
        files[name].write_text("".join(line + "\n" for line in lines))
    files["glossary"] = folder / "terms.tsv"
    files["glossary"].write_text(GLOSSARY)
    return files


def test_a_system_file_is_scored_with_its_term_use(tmp_path: Path) -> None:
    files = write(tmp_path)
    report = tmp_path / "report.json"
    code, out, err = run_cli(
        "evaluate",
        *(
            "--hypotheses",
            str(files["hyp"]),
            "--references",
            str(files["ref"]),
            "--source",
            str(files["src"]),
        ),
        *("--glossary", str(files["glossary"]), "--json", str(report)),
    )
    assert code == 0, err
    assert "term use = 50.00% (2 of 4 glossary terms in 3 sentences; references: 100.00%)" in out
    assert "BLEU" in out
    found = json.loads(report.read_text())
    assert found["term_use"] == term_use(SOURCES, OUTPUTS, finder(), REFERENCES).as_dict() | {
        "glossary": str(files["glossary"])
    }
    assert "BLEU" in found["metrics"]


def test_term_use_needs_the_sources_and_a_readable_glossary(tmp_path: Path) -> None:
    files = write(tmp_path)
    scored = ("evaluate", "--hypotheses", str(files["hyp"]), "--references", str(files["ref"]))
    result = run_cli(*scored, "--glossary", str(files["glossary"]))
    assert_one_line_error(result, "--glossary finds its terms in the sources: give --source")
    files["glossary"].write_text("no tab\n")
    result = run_cli(*scored, "--source", str(files["src"]), "--glossary", str(files["glossary"]))
    assert_one_line_error(result, f"{files['glossary']} line 1: no tab")


def test_a_run_trained_with_annotation_reports_term_use(
    terminology_run: Path, labelled: Path, tmp_path: Path
) -> None:
    sources = labelled.joinpath("valid.src").read_text().splitlines()[:8]
    references = labelled.joinpath("valid.tgt").read_text().splitlines()[:8]
    src, ref, glossary, report = (tmp_path / name for name in ("in.src", "in.ref", "terms.tsv", "r.json"))
    src.write_text("".join(line + "\n" for line in sources))
    ref.write_text("".join(line + "\n" for line in references))
    glossary.write_text(f"{sources[0].split()[0]}\tZZZ\n")
    given = ("--src", str(src), "--ref", str(ref), "--device", "cpu", "--glossary", str(glossary))
    code, out, err = run_cli("evaluate", str(terminology_run), *given, "--json", str(report))
    assert code == 0, err
    found = json.loads(report.read_text())["term_use"]
    assert found["occurrences"] >= 1 and found["reference_rate"] == 0.0  # no reference says ZZZ
    assert f"term use = {found['rate']:.2f}%" in out
    hypotheses = json.loads(report.read_text())["hypotheses"]
    assert ".glossary-" in hypotheses  # kept apart from the translations without the glossary


def test_a_run_trained_without_annotation_translates_by_constrained_search(
    trained_run: Path, corpus: Path, tmp_path: Path
) -> None:
    sources = corpus.joinpath("valid.src").read_text().splitlines()[:8]
    target = corpus.joinpath("valid.tgt").read_text().splitlines()[40].split()[0]
    src, ref, glossary, report = (tmp_path / name for name in ("in.src", "in.ref", "terms.tsv", "r.json"))
    src.write_text("".join(line + "\n" for line in sources))
    references = corpus.joinpath("valid.tgt").read_text().splitlines()[:8]
    ref.write_text("".join(line + "\n" for line in references))
    glossary.write_text(f"{sources[0].split()[0]}\t{target}\n")
    given = ("--src", str(src), "--ref", str(ref), "--device", "cpu", "--glossary", str(glossary))
    code, out, err = run_cli("evaluate", str(trained_run), *given, "--beam-size", "5", "--json", str(report))
    assert code == 0, err
    found = json.loads(report.read_text())["term_use"]
    assert found["occurrences"] >= 1 and found["rate"] == 100.0, found  # each output holds its terms
    assert f"term use = {found['rate']:.2f}%" in out
