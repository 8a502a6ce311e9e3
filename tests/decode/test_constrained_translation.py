"""`nmt translate --glossary` by constrained search on a tiny run trained without annotation: each target term
appears (beam and greedy, int8, an ensemble), JSON lines name the terms a translation lacks, an empty glossary
changes no output on any path, a batch translates each line as alone, and each impossible mode is refused in
one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from nmt.data.glossary import Term
from nmt.decode.loading import load_translator
from nmt.decode.terminology import Constraining
from tests.conftest import assert_one_line_error, run_cli


@pytest.fixture(scope="module")
def lines(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("constrained") / "in.txt"
    path.write_text("\n".join(corpus.joinpath("valid.src").read_text().splitlines()[:8]) + "\n\n")
    return path


def glossary_of(corpus: Path, lines: Path, to: Path) -> tuple[Path, list[str]]:
    """Two entries: the first words of the first two lines, each translated as a target word of another
    line (whatever the run would write there)."""
    sources = [line.split()[0] for line in lines.read_text().splitlines()[:2]]
    targets = [corpus.joinpath("valid.tgt").read_text().splitlines()[40 + i].split()[0] for i in range(2)]
    to.write_text("".join(f"{s}\t{t}\n" for s, t in zip(sources, targets, strict=True)))
    return to, targets


def translate(*args: str) -> str:
    code, out, err = run_cli("translate", *args, "--device", "cpu")
    assert code == 0, err
    return out


@pytest.mark.parametrize(
    "extra", [("--beam-size", "5"), ("--beam-size", "1"), ("--int8",), ("--beam-size", "3", "--nbest", "2")]
)
def test_each_term_appears_and_none_is_unmet(
    trained_run: Path, corpus: Path, lines: Path, tmp_path: Path, extra: tuple[str, ...]
) -> None:
    glossary, targets = glossary_of(corpus, lines, tmp_path / "terms.tsv")
    runs = [str(trained_run)] * (2 if "--int8" not in extra else 1)  # an ensemble of two, and int8
    code, found, err = run_cli(
        "translate", *runs, "-i", str(lines), "--glossary", str(glossary), "--format", "jsonl", *extra
    )
    assert code == 0 and "lack a glossary term" not in err, err
    records = [json.loads(line) for line in found.splitlines()]
    sources = lines.read_text().splitlines()
    for record, source in zip(records, sources, strict=True):
        wanted = [t for s, t in zip(sources[:2], targets, strict=True) if s.split()[0] in source.split()]
        for hypothesis in record["hypotheses"]:
            assert hypothesis["unmet_terms"] == []
            assert all(target in hypothesis["text"].split() for target in wanted), (hypothesis, wanted)


def test_a_term_the_limit_leaves_no_room_for_is_reported(
    trained_run: Path, corpus: Path, lines: Path, tmp_path: Path
) -> None:
    """A term of two words cannot fit in an output of one token: the translation comes, the term unmet."""
    _, targets = glossary_of(corpus, lines, tmp_path / "terms.tsv")
    glossary, term = tmp_path / "long.tsv", " ".join(targets)
    glossary.write_text(f"{lines.read_text().split()[0]}\t{term}\n")
    limit = ("--max-len-a", "0", "--max-len-b", "1")
    found = translate(
        str(trained_run), "-i", str(lines), "--glossary", str(glossary), "--format", "jsonl", *limit
    )
    first = json.loads(found.splitlines()[0])["hypotheses"][0]
    times = lines.read_text().splitlines()[0].split().count(lines.read_text().split()[0])
    assert first["unmet_terms"] == [term] * times and len(first["text"].split()) <= 1
    lacking = sum(bool(json.loads(line)["hypotheses"][0]["unmet_terms"]) for line in found.splitlines())
    code, out, err = run_cli(
        "translate",
        str(trained_run),
        "-i",
        str(lines),
        "--glossary",
        str(glossary),
        "--device",
        "cpu",
        *limit,
    )  # plain text: no field names the lacking terms, so the command says how many lines lack one
    assert code == 0 and out.splitlines()[0] == first["text"], err
    assert f"the translations of {lacking} lines lack a glossary term" in err


def unchanged_by_an_empty_glossary(models: list[list[str]], lines: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty.tsv"
    empty.write_text("\n")
    for model in models:
        for extra in ((), ("--format", "jsonl", "--beam-size", "3", "--nbest", "2")):
            plain = translate(*model, "-i", str(lines), *extra)
            assert translate(*model, "-i", str(lines), "--glossary", str(empty), *extra) == plain


def test_an_empty_glossary_changes_no_output(trained_run: Path, lines: Path, tmp_path: Path) -> None:
    unchanged_by_an_empty_glossary([[str(trained_run)]], lines, tmp_path)


@pytest.mark.slow
def test_an_empty_glossary_changes_no_output_on_any_path(
    trained_run: Path, lines: Path, tmp_path: Path
) -> None:
    """An ensemble, int8 weights, a CTranslate2 export."""
    export = tmp_path / "export"
    code, _, err = run_cli("export", str(trained_run), str(export))
    assert code == 0, err
    runs = [str(trained_run)] * 2
    unchanged_by_an_empty_glossary([runs, [str(trained_run), "--int8"], [str(export)]], lines, tmp_path)


def test_a_batch_translates_each_line_as_alone(trained_run: Path, corpus: Path, lines: Path) -> None:
    translator = load_translator([trained_run], "torch", torch.device("cpu"), None, {"beam_size": 4})
    texts = lines.read_text().splitlines()
    targets = corpus.joinpath("valid.tgt").read_text().splitlines()[50].split()
    terms = [Term(text.split()[0], target) for text, target in zip(texts[:3], targets, strict=False)]
    constraining = Constraining.of(translator, terms, "terms")
    together = constraining.translated(texts)
    alone = [constraining.translated([text])[0] for text in texts]
    assert [line.best.text for line in together] == [line.best.text for line in alone]
    assert [line.best.unmet_terms for line in together] == [line.best.unmet_terms for line in alone]


def test_impossible_modes_are_one_line(trained_run: Path, tmp_path: Path) -> None:
    glossary = tmp_path / "terms.tsv"
    glossary.write_text("a\tb\n")
    export = tmp_path / "export"
    code, _, err = run_cli("export", str(trained_run), str(export))
    assert code == 0, err
    ask = ("--glossary", str(glossary))
    result = run_cli("translate", str(trained_run), *ask, "--glossary-mode", "annotated", input="a b\n")
    assert_one_line_error(
        result, "was not trained with terminology annotation", "--glossary-mode constrained"
    )
    assert_one_line_error(run_cli("translate", str(export), *ask, input="a b\n"), "CTranslate2 export")
    result = run_cli("translate", str(trained_run), *ask, "--glossary-mode", "both", input="a b\n")
    assert_one_line_error(result, "--glossary-mode both: expected auto, constrained, annotated")
    result = run_cli("translate", str(trained_run), *ask, "--sampling", input="a b\n")
    assert_one_line_error(result, "constrained search is beam search")
    result = run_cli("translate", str(trained_run), "--glossary-mode", "constrained", input="a b\n")
    assert_one_line_error(result, "--glossary-mode constrained reads a glossary", "--glossary FILE")


def test_more_terms_than_the_beam_holds_is_one_warning(
    trained_run: Path, lines: Path, caplog: pytest.LogCaptureFixture
) -> None:
    translator = load_translator([trained_run], "torch", torch.device("cpu"), None, {"beam_size": 2})
    texts = lines.read_text().splitlines()[:2]
    terms = [Term(word, word.upper()) for word in texts[0].split()[:3]]
    with caplog.at_level("WARNING"):
        found = Constraining.of(translator, terms, "terms").translated(texts)
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "more glossary terms than the beam's 2 hypotheses" in warnings[0]
    assert found[0].best.unmet_terms is not None


def test_a_page_translates_under_constraints(trained_run: Path, corpus: Path, tmp_path: Path) -> None:
    """`nmt translate --format html --glossary` on a run trained without annotation: the page's sentences are
    searched under the terms, its tags placed by the constrained translation's word links."""
    words = corpus.joinpath("valid.src").read_text().splitlines()[0].split()
    target = corpus.joinpath("valid.tgt").read_text().splitlines()[40].split()[0]
    page, glossary = tmp_path / "page.html", tmp_path / "terms.tsv"
    page.write_text(f"<p>{words[0]} <b>{words[1]}</b> {' '.join(words[2:])}</p>\n")
    glossary.write_text(f"{words[0]}\t{target}\n")
    code, out, err = run_cli(
        *("translate", str(trained_run), "--format", "html", "--device", "cpu"),
        *("--input", str(page), "--glossary", str(glossary)),
    )
    assert code == 0, err
    assert out.startswith("<p>") and out.count("<b>") == out.count("</b>") == 1, out
    assert target in out.replace("<b>", " ").replace("</b>", " ").split(), out
