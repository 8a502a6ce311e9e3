"""Where an evaluation keeps its hypotheses: a file name that states the source, checkpoint and whole search,
and never a file the run's report points to (nmt/evaluate/hypotheses.py); through `nmt evaluate` too."""

import json
import shutil
from pathlib import Path

from nmt.config.sections import SearchConfig
from nmt.evaluate.hypotheses import HypothesisFiles, search_label, search_record
from tests.conftest import run_cli


def test_the_search_label_states_every_setting_the_search_reads_off_its_default() -> None:
    assert search_label(SearchConfig()) == "beam5"
    assert search_label(SearchConfig(beam_size=1)) == "beam1"
    assert (
        search_label(SearchConfig(length_penalty=0.6, max_len_b=20))
        == "beam5.length_penalty=0.6.max_len_b=20"
    )
    assert search_label(SearchConfig(sampling=True, top_k=10, beam_size=1)) == "sampling.top_k=10"
    diverse = SearchConfig(beam_size=3, diverse_groups=3, no_repeat_ngram_size=2)
    assert search_label(diverse) == "beam3.diverse_groups=3.no_repeat_ngram_size=2"
    assert search_label(SearchConfig(nbest=3, batch_tokens=8)) == "beam5"  # the best hypothesis is the same
    assert search_record(SearchConfig(sampling=True, beam_size=1)) == {"rule": "sampling", "sampling": True}


def test_a_file_the_report_points_to_is_never_rewritten(tmp_path: Path) -> None:
    files = HypothesisFiles(tmp_path, "best", SearchConfig(), protected=frozenset({"test.beam5.hyp"}))
    reported = tmp_path / "test.beam5.hyp"
    reported.write_text("a\nb\n")
    before = reported.stat()
    assert files.keep("test", ["a", "b"]) == reported  # the same lines: the report's file is the answer
    assert files.keep("test", ["a", "c"]) == tmp_path / "test.beam5.evaluate.hyp"
    assert reported.read_text() == "a\nb\n" and reported.stat().st_mtime_ns == before.st_mtime_ns
    assert (tmp_path / "test.beam5.evaluate.hyp").read_text() == "a\nc\n"
    assert files.keep("valid", ["x"]) == tmp_path / "valid.beam5.hyp"  # not the report's: written


def test_evaluate_states_its_search_and_leaves_the_report_s_hypotheses(
    trained_run: Path, corpus: Path, tmp_path: Path
) -> None:
    """Any search: its own file, named by it, and the printed line states it; the report's file keeps its
    bytes and is never replaced; two --src files of one name in two folders keep apart."""
    run = tmp_path / "run"
    shutil.copytree(trained_run, run)
    beam = json.loads((run / "report.json").read_text())["config"]["search"]["beam_size"]
    (tested,) = json.loads((run / "report.json").read_text())["test"]["best"]["directions"].values()
    reported = run / "eval" / Path(tested["hypotheses"]).name
    before = (reported.read_bytes(), reported.stat().st_ino, reported.stat().st_mtime_ns)
    asked = {
        ("--length-penalty", "0.6"): (
            f"--beam-size {beam} --length-penalty 0.6",
            f"beam{beam}.length_penalty=0.6",
        ),
        ("--sampling", "--top-k", "5"): ("--sampling --top-k 5", "sampling.top_k=5"),
        (): (f"--beam-size {beam}", f"beam{beam}"),
    }
    for flags, (stated, label) in asked.items():
        code, out, err = run_cli("evaluate", str(run), "--split", "test", *flags)
        assert code == 0, err
        assert out.splitlines()[0] == f"checkpoint: best.pt (the run's choice), search: {stated}"
        written = Path(out.splitlines()[-1].removeprefix("hypotheses: "))
        assert written.name in (f"test.{label}.hyp", f"test.{label}.evaluate.hyp")
        assert (reported.read_bytes(), reported.stat().st_ino, reported.stat().st_mtime_ns) == before
    sources = (corpus / "test.src").read_text().splitlines()
    references = (corpus / "test.tgt").read_text().splitlines()
    found = []
    for folder, lines in (("a", slice(0, 10)), ("b", slice(10, 15))):
        (tmp_path / folder).mkdir()
        src, ref = tmp_path / folder / "test.src", tmp_path / folder / "test.tgt"
        src.write_text("".join(line + "\n" for line in sources[lines]))
        ref.write_text("".join(line + "\n" for line in references[lines]))
        code, out, err = run_cli("evaluate", str(run), "--src", str(src), "--ref", str(ref))
        assert code == 0, err
        found.append(Path(out.splitlines()[-1].removeprefix("hypotheses: ")))
    assert found[0] != found[1] and [len(p.read_text().splitlines()) for p in found] == [10, 5]
