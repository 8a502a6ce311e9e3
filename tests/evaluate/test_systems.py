"""`nmt evaluate` on any system's output (--hypotheses, --references), against a baseline (--baseline,
--baseline-hypotheses) and with COMET (--comet): the scores are sacreBLEU's (nmt/evaluate/scores.py, checked
against sacreBLEU in test_scores.py), and what cannot be scored together is one line, exit code 2, before
anything is scored."""

import importlib.machinery
import json
import os
import shutil
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from nmt.evaluate.paired import paired_test
from nmt.evaluate.scores import score
from nmt.evaluate.systems import MATCH_LINES, matches_references
from tests.conftest import assert_one_line_error, run_cli
from tests.evaluate.conftest import lines


def evaluated(folder: Path, *args: str) -> dict[str, Any]:
    """`nmt evaluate ARGS`'s report, written as JSON into `folder`; the command must succeed and print the
    metrics first (after the run's checkpoint and search, for a run)."""
    report = folder / "report.json"
    code, out, err = run_cli("evaluate", *args, "--json", str(report))
    assert code == 0, err
    assert out.startswith(("BLEU    = ", "checkpoint: ")), out
    return json.loads(report.read_text())


def files(hypotheses: Path, references: Path) -> list[str]:
    return ["--hypotheses", str(hypotheses), "--references", str(references)]


@pytest.mark.slow  # two paired tests, each twice: 7 s
def test_any_system_is_scored_from_files_with_intervals_and_a_baseline(
    systems: dict[str, Path], tmp_path: Path
) -> None:
    hyps, refs, base = systems["system"], systems["references"], systems["baseline"]
    files = ["--hypotheses", str(hyps), "--references", str(refs), "--baseline-hypotheses", str(base)]
    report = evaluated(tmp_path, *files)
    expected = score(lines(hyps), lines(refs)).as_dict()
    assert {key: report[key] for key in expected} == expected
    assert (report["hypotheses"], report["references"], report["source"]) == (str(hyps), str(refs), None)
    tested = paired_test(lines(hyps), lines(base), lines(refs), "bs")
    assert report["baseline"]["metrics"] == {name: found.rounded() for name, found in tested.items()}
    assert report["baseline"]["test"] == "paired bootstrap resampling"
    ar = evaluated(tmp_path, *files, "--paired-test", "ar")
    assert ar["baseline"]["test"] == "approximate randomization"
    tested = paired_test(lines(hyps), lines(base), lines(refs), "ar")
    assert ar["baseline"]["metrics"] == {name: found.rounded() for name, found in tested.items()}


def test_crlf_and_byte_order_mark_files_are_read_as_text(
    systems: dict[str, Path],
    tmp_path: Path,
) -> None:
    windows = {}
    for name in ("system", "references"):
        windows[name] = tmp_path / f"{name}.txt"
        windows[name].write_bytes(b"\xef\xbb\xbf" + systems[name].read_bytes().replace(b"\n", b"\r\n"))
    plain = evaluated(tmp_path, *files(systems["system"], systems["references"]))
    crlf = evaluated(tmp_path, *files(windows["system"], windows["references"]))
    assert crlf["metrics"] == plain["metrics"]


def test_what_cannot_be_scored_together_is_one_line(
    systems: dict[str, Path], corpus: Path, tmp_path: Path
) -> None:
    hyps, refs = str(systems["system"]), str(systems["references"])
    short, empty, latin1 = tmp_path / "short.txt", tmp_path / "empty.txt", tmp_path / "latin1.txt"
    other = corpus / "valid.tgt"  # another test set of as many lines
    assert len(lines(other)) == len(lines(systems["references"]))
    short.write_text("".join(line + "\n" for line in lines(systems["system"])[:-3]))
    empty.write_text("")
    latin1.write_bytes("café\n".encode("latin-1"))
    count = len(lines(systems["references"]))
    refusals = {
        ("--hypotheses", str(short), "--references", refs): f"has {count - 3} lines but --references",
        ("--hypotheses", str(empty), "--references", refs): "is empty: nothing to score",
        ("--hypotheses", hyps, "--references", str(empty)): "is empty: nothing to score",
        ("--hypotheses", hyps, "--references", refs, "--baseline-hypotheses", str(short)): (
            f"--baseline-hypotheses {short} has {count - 3} lines but --references"
        ),
        ("--hypotheses", str(other), "--references", refs): f"--hypotheses {other} does not translate",
        ("--hypotheses", hyps, "--references", refs, "--baseline-hypotheses", str(other)): (
            f"--baseline-hypotheses {other} does not translate --references {refs} line for line"
        ),
        ("--hypotheses", hyps, "--references", refs, "--baseline-hypotheses", str(tmp_path / "none")): (
            "no such file"
        ),
        ("--hypotheses", str(latin1), "--references", refs): "line 1 is not valid UTF-8",
        ("--hypotheses", hyps): "--hypotheses and --references go together",
        ("--hypotheses", hyps, "--references", refs, "--beam-size", "3"): "search options: these choose how",
        ("--hypotheses", hyps, "--references", refs, "--src", hyps): "--src: these choose how a run",
        ("--hypotheses", hyps, "--references", refs, "--paired-test", "t"): "--paired-test t: expected bs or",
        ("--hypotheses", hyps, "--references", refs, "--baseline", str(tmp_path)): (
            "--baseline RUN reads the source sentences: give --source FILE"
        ),
        ("--hypotheses", hyps, "--references", refs, "--source", str(short)): f"--source {short} has",
        (): "nothing to score: give a run directory, or --hypotheses FILE --references FILE",
    }
    for args, fragment in refusals.items():
        assert_one_line_error(run_cli("evaluate", *args), fragment)


def comet_model(folder: Path) -> Path:
    """A directory laid out as a COMET model (its contents are never read here: COMET is simulated)."""
    (folder / "checkpoints").mkdir(parents=True)
    (folder / "checkpoints" / "model.ckpt").write_bytes(b"")
    (folder / "hparams.yaml").write_text("class_identifier: regression_metric\n")
    return folder


def test_comet_is_refused_in_one_line_without_its_model_or_its_package(
    systems: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    files = ["--hypotheses", str(systems["system"]), "--references", str(systems["references"])]
    source = ["--source", str(systems["references"])]
    missing = tmp_path / "no-model"
    assert_one_line_error(
        run_cli("evaluate", *files, *source, "--comet", str(missing)), f"--comet {missing}: no COMET model"
    )
    model = comet_model(tmp_path / "wmt22-comet-da")
    monkeypatch.setitem(sys.modules, "comet", None)  # the package is not installed
    assert_one_line_error(
        run_cli("evaluate", *files, *source, "--comet", str(model)), "pip install 'nmt[comet]'"
    )


def test_comet_scores_offline_from_the_local_checkpoint(
    systems: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With unbabel-comet simulated: the checkpoint file is loaded with the Hugging Face libraries offline
    (nothing downloaded), every (source, output, reference) triple is scored, and the system score kept."""
    calls: dict[str, Any] = {}

    class Model:
        def predict(self, samples: list[dict[str, str]], **options: Any) -> types.SimpleNamespace:
            calls["samples"], calls["options"] = samples, options
            return types.SimpleNamespace(system_score=0.8123456, scores=[0.8] * len(samples))

    def load_from_checkpoint(path: str, **options: Any) -> Model:
        calls["path"], calls["load"] = path, options
        calls["offline"] = (os.environ.get("HF_HUB_OFFLINE"), os.environ.get("TRANSFORMERS_OFFLINE"))
        return Model()

    comet = types.ModuleType("comet")
    comet.__spec__ = importlib.machinery.ModuleSpec("comet", None)
    comet.load_from_checkpoint = load_from_checkpoint  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "comet", comet)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    model = comet_model(tmp_path / "wmt22-comet-da")
    hyps, refs = systems["system"], systems["references"]
    report = evaluated(tmp_path, *files(hyps, refs), "--source", str(refs), "--comet", str(model))
    assert report["comet"] == {"score": 0.8123, "model": str(model)}
    assert_one_line_error(
        run_cli("evaluate", *files(hyps, refs), "--comet", str(model)), "--comet reads the source sentences"
    )
    assert calls["path"] == str(model / "checkpoints" / "model.ckpt") and calls["load"]["local_files_only"]
    assert calls["offline"] == ("1", "1") and "HF_HUB_OFFLINE" not in os.environ
    triples = [(s["src"], s["mt"], s["ref"]) for s in calls["samples"]]
    assert triples == list(zip(lines(refs), lines(hyps), lines(refs), strict=True))


def test_a_run_is_compared_with_a_baseline_run_translating_the_same_sentences(
    trained_run: Path, tmp_path: Path
) -> None:
    """--baseline RUN: the baseline translates the system's test set with its own search and checkpoint,
    its hypotheses kept in its own eval/ (the report's file left as it is); the paired test is the one of
    the two hypothesis files."""
    system, baseline = tmp_path / "system", tmp_path / "baseline"
    shutil.copytree(trained_run, system)
    shutil.copytree(trained_run, baseline)
    report = evaluated(tmp_path, str(system), "--beam-size", "1", "--baseline", str(baseline))
    baseline_file = Path(report["baseline"]["hypotheses"])
    assert baseline_file.parent == baseline / "eval" and baseline_file.name.startswith("test.beam")
    references = lines(Path(report["source"]).with_suffix(".tgt"))
    tested = paired_test(lines(Path(report["hypotheses"])), lines(baseline_file), references)
    assert report["baseline"]["metrics"] == {name: found.rounded() for name, found in tested.items()}
    other = tmp_path / "other.txt"
    other.write_text("x\n")
    assert_one_line_error(
        run_cli("evaluate", str(system), "--baseline-hypotheses", str(other)),
        f"--baseline-hypotheses {other} has 1 lines but the test set has {len(references)}",
    )
    valid = Path(report["source"]).with_name("valid.tgt")  # the outputs of another test set, as many lines
    assert_one_line_error(
        run_cli("evaluate", str(system), "--baseline-hypotheses", str(valid)),
        f"--baseline-hypotheses {valid} does not translate the test set line for line",
    )


def test_outputs_of_another_test_set_of_the_same_length_do_not_match(systems: dict[str, Path]) -> None:
    """A poor system's outputs match their references; the same lines a line off, or reordered, do not."""
    references, poor = lines(systems["references"]), lines(systems["baseline"])
    assert matches_references(poor, references)
    assert not matches_references(poor[1:] + poor[:1], references)
    assert not matches_references(poor[::-1], references)
    assert not matches_references([""] * len(references), references)  # no translation at all
    assert matches_references(poor[: MATCH_LINES - 1][::-1], references[: MATCH_LINES - 1])  # too few to tell


def test_a_json_folder_is_refused_before_anything_is_scored(systems: dict[str, Path], tmp_path: Path) -> None:
    result = run_cli("evaluate", *files(systems["system"], systems["references"]), "--json", str(tmp_path))
    assert_one_line_error(result, f"--json {tmp_path} is a folder")
    assert result[1] == ""  # no scores printed: nothing was scored
