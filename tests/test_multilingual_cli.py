"""The commands take a multilingual run's direction: `nmt translate`, `nmt evaluate` and `nmt plot-attention`
into --tgt-lang (from --src-lang), a direction the run never saw with --zero-shot, through a third language
with --pivot; whatever they cannot take is a one-line error. Both tag placements."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from nmt.align.pharaoh import parse_links
from nmt.config.yaml_file import load_config
from nmt.decode.trained_run import load_run
from nmt.decode.translator import TorchTranslator
from nmt.evaluate.hypotheses import search_label, source_tag
from tests.conftest import MULTILINGUAL_DIRECTIONS, assert_one_line_error, run_cli


@pytest.fixture(params=["encoder", "decoder"])
def run(request: pytest.FixtureRequest) -> Path:
    return request.getfixturevalue("multilingual_run" if request.param == "encoder" else "decoder_tag_run")


def source_lines(run: Path, lang: str) -> list[str]:
    return (run.parent / "data" / f"test.{lang}").read_text().splitlines()


def library(
    run: Path, tgt: str, lines: list[str], src: str | None = None, zero_shot: bool = False
) -> list[str]:
    """`lines` translated into `tgt` (from `src`) by the run's Translator."""
    translator = TorchTranslator.of_run(load_run(run, torch.device("cpu")))
    return translator.toward(tgt, src, zero_shot).translate(lines)


def cli(run: Path, lines: list[str], *flags: str) -> list[str]:
    code, out, err = run_cli("translate", str(run), "--device", "cpu", *flags, input="\n".join(lines) + "\n")
    assert code == 0, err
    return out.splitlines()


def test_translate_takes_every_direction(run: Path) -> None:
    for name in MULTILINGUAL_DIRECTIONS:
        src, tgt = name.split("-")
        lines = source_lines(run, src)
        assert cli(run, lines, "--src-lang", src, "--tgt-lang", tgt) == library(run, tgt, lines)


def test_alignments_link_every_output_word_and_never_a_tag(run: Path) -> None:
    """An encoder tag is no source word and a forced decoder tag no output: search aligns each output subword
    to a subword of a source word (never the tag, however much attention the tag draws), so every output word
    has a link, as in a bilingual run."""
    translator = TorchTranslator.of_run(load_run(run, torch.device("cpu")))
    assert translator.tags is not None
    for name in MULTILINGUAL_DIRECTIONS:
        src, tgt = name.split("-")
        lines = source_lines(run, src)
        toward = translator.toward(tgt)
        sources = toward.encode(lines)
        found = toward.search(sources, alignments=True)
        attended = {ids[p] for ids, hyps in zip(sources, found, strict=True) for p in hyps[0].alignment or []}
        assert attended and not attended & set(translator.tags.banned)
        for line in cli(run, lines, "--src-lang", src, "--tgt-lang", tgt, "--alignments"):
            text, links = line.split(" ||| ")
            linked = {j for _, j in parse_links(links, line).possible}
            assert linked == set(range(len(text.split()))), line


def test_zero_shot_and_pivot(run: Path) -> None:
    """xb → xc was never trained: with --zero-shot the tag of xc decides; --pivot xa translates into xa, then
    into xc."""
    lines = source_lines(run, "xb")
    zero_shot = library(run, "xc", lines, "xb", zero_shot=True)  # in xc's vocabulary
    assert cli(run, lines, "--src-lang", "xb", "--tgt-lang", "xc", "--zero-shot") == zero_shot
    pivoted = cli(run, lines, "--src-lang", "xb", "--tgt-lang", "xc", "--pivot", "xa")
    assert pivoted == library(run, "xc", library(run, "xa", lines))


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ([], "translates several directions (xa-xb, xb-xa, xa-xc, xc-xa): name the target language with"),
        (["--src-lang", "xb", "--tgt-lang", "xc"], "never trained to translate xb → xc"),
        (["--tgt-lang", "zz"], "the vocabulary has no tag for language 'zz' (its tags: xa, xb, xc)"),
        (["--src-lang", "xa", "--tgt-lang", "xb", "--pivot", "xc"], "never trained to translate xc → xb"),
        (["--tgt-lang", "xb", "--pivot", "xb"], "the pivot is a third language"),
    ],
)
def test_translate_refuses_in_one_line(multilingual_run: Path, flags: list[str], message: str) -> None:
    assert_one_line_error(run_cli("translate", str(multilingual_run), *flags, input="a b\n"), message)


def test_a_bilingual_run_takes_its_own_pair_only(trained_run: Path) -> None:
    assert (
        run_cli("translate", str(trained_run), "--src-lang", "src", "--tgt-lang", "tgt", input="a\n")[0] == 0
    )
    result = run_cli("translate", str(trained_run), "--tgt-lang", "xx", input="a\n")
    assert_one_line_error(result, "this model translates src → tgt only")
    result = run_cli("translate", str(trained_run), "--tgt-lang", "tgt", "--pivot", "en", input="a\n")
    assert_one_line_error(result, "--pivot: this model translates one language pair")


def test_evaluate_scores_every_direction_and_their_means(run: Path, tmp_path: Path) -> None:
    code, out, err = run_cli("evaluate", str(run), "--device", "cpu", "--json", str(tmp_path / "all.json"))
    assert code == 0, err
    scores = json.loads((tmp_path / "all.json").read_text())
    assert list(scores["directions"]) == MULTILINGUAL_DIRECTIONS
    assert [line.split()[0] for line in out.splitlines()[1:5]] == MULTILINGUAL_DIRECTIONS
    assert f"mean BLEU = {scores['bleu']:.2f}" in out
    for name, record in scores["directions"].items():
        src, tgt = name.split("-")
        hypotheses = Path(record["hypotheses"]).read_text().splitlines()
        assert hypotheses == library(run, tgt, source_lines(run, src))


def test_evaluate_scores_the_direction_named(multilingual_run: Path, tmp_path: Path) -> None:
    run = multilingual_run

    def scored(*flags: str) -> dict:
        path = tmp_path / "scores.json"
        code, _, err = run_cli("evaluate", str(run), "--device", "cpu", "--json", str(path), *flags)
        assert code == 0, err
        return json.loads(path.read_text())

    label = search_label(load_config(run / "config.yaml").search)  # beam2, the output limit
    one = scored("--src-lang", "xa", "--tgt-lang", "xb")
    assert one["direction"] == "xa-xb" and one["sentences"] == 6 and "off_target" in one
    assert Path(one["hypotheses"]).name == f"test.xa-xb.{label}.hyp"
    zero_shot = scored("--src-lang", "xb", "--tgt-lang", "xc", "--zero-shot", "--split", "valid")
    assert Path(zero_shot["hypotheses"]).name == f"valid.xb-xc.{label}.hyp" and zero_shot["sentences"] == 12
    pivot = scored("--src-lang", "xb", "--tgt-lang", "xc", "--pivot", "xa")
    hypotheses = Path(pivot["hypotheses"])
    assert hypotheses.name == f"test.xb-xc.pivot-xa.{label}.hyp"
    lines = source_lines(run, "xb")
    assert hypotheses.read_text().splitlines() == library(run, "xc", library(run, "xa", lines))
    data = run.parent / "data"
    files = ["--src", str(data / "test.xc"), "--ref", str(data / "test.xa")]
    hypotheses = Path(scored(*files, "--src-lang", "xc", "--tgt-lang", "xa")["hypotheses"])
    assert hypotheses.name == f"test.xc.{source_tag(data / 'test.xc')}.xc-xa.{label}.hyp"  # the file's own
    assert hypotheses.read_text().splitlines() == library(run, "xa", source_lines(run, "xc"))


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--tgt-lang", "xb"], "name the direction to score: --src-lang and --tgt-lang"),
        (
            ["--src", "x", "--ref", "y"],
            "--src and --ref: name their languages with --src-lang and --tgt-lang",
        ),
        (["--src-lang", "xb", "--tgt-lang", "xc"], "never trained to translate xb → xc"),
        (
            ["--baseline-hypotheses", "config.yaml"],  # any file: refused before it is read
            "--baseline, --comet and --glossary: name the direction with --src-lang and --tgt-lang",
        ),
    ],
)
def test_evaluate_refuses_in_one_line(
    multilingual_run: Path, flags: list[str], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(multilingual_run)
    assert_one_line_error(run_cli("evaluate", str(multilingual_run), "--device", "cpu", *flags), message)


def test_plot_attention_draws_the_direction_named(decoder_tag_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "attention.png"
    text = source_lines(decoder_tag_run, "xa")[0]
    args = ["plot-attention", str(decoder_tag_run), "--text", text, "--out", str(out), "--device", "cpu"]
    code, stdout, err = run_cli(*args, "--src-lang", "xa", "--tgt-lang", "xc")
    assert code == 0, err
    assert stdout.splitlines()[0] == library(decoder_tag_run, "xc", [text])[0]
    assert out.stat().st_size > 1000
    assert_one_line_error(run_cli(*args), "name the target language with --tgt-lang")


def test_align_takes_a_direction_and_never_links_the_tag(run: Path, tmp_path: Path) -> None:
    """`nmt align --src-lang --tgt-lang` teacher-forces the model's own greedy translations with the tag where
    it was trained: the same links as `nmt translate --alignments` gave them, the tag no word; the same run
    as --reverse-run aligns the other way. Without a direction it is one line."""
    lines = source_lines(run, "xa")
    flags = ["--src-lang", "xa", "--tgt-lang", "xb"]
    translated = [line.split(" ||| ") for line in cli(run, lines, *flags, "--beam-size", "1", "--alignments")]
    (tmp_path / "src").write_text("\n".join(lines) + "\n")
    (tmp_path / "tgt").write_text("\n".join(text for text, _ in translated) + "\n")
    pairs = ["--src", str(tmp_path / "src"), "--tgt", str(tmp_path / "tgt"), "--device", "cpu"]
    code, out, err = run_cli("align", str(run), *pairs, *flags)
    assert code == 0, err
    assert out.splitlines() == [links for _, links in translated]
    both = ["--reverse-run", str(run), "--symmetrize", "intersection"]
    code, out, err = run_cli("align", str(run), *pairs, *flags, *both)
    assert code == 0, err
    for line, (text, _) in zip(out.splitlines(), translated, strict=True):
        assert all(j < len(text.split()) for _, j in parse_links(line, line).possible)
    assert_one_line_error(run_cli("align", str(run), *pairs), "name the target language")
