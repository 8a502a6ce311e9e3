"""report.json has one shape for every run: each split's scores per checkpoint hold the means, the search and
a `directions` map (a bilingual run's: its one direction); a report written before that is read the same."""

import json
from pathlib import Path

from nmt.run.directory import RunDir
from nmt.run.report import read_report, with_directions

SEARCH = {"beam_size": 5, "length_penalty": 1.0, "checkpoint": "best"}
OLD_SCORES = {"bleu": 21.08, "chrf": 38.78, "sentences": 2, "hypotheses": "/runs/x/eval/test.beam5.hyp"}


def old_report() -> dict:
    """A bilingual run's report.json as nmt wrote it before the `directions` map (its scores flat)."""
    return {
        "checkpoint": "best",
        "valid": {"best": OLD_SCORES | SEARCH},
        "test": {"best": OLD_SCORES | SEARCH},
        "config": {"data": {"src_lang": "de", "tgt_lang": "en", "multilingual": None}},
    }


def test_a_bilingual_split_is_its_one_direction_under_directions() -> None:
    found = with_directions(OLD_SCORES | SEARCH, "de-en")
    assert found == {
        "bleu": 21.08,
        "chrf": 38.78,
        "off_target": None,
        **SEARCH,
        "directions": {"de-en": OLD_SCORES | {"off_target": None}},
    }


def test_an_old_report_is_read_in_today_s_shape(tmp_path: Path) -> None:
    (tmp_path / "report.json").write_text(json.dumps(old_report()))
    report = read_report(tmp_path / "report.json")
    for split in ("valid", "test"):
        assert report[split]["best"] == with_directions(OLD_SCORES | SEARCH, "de-en")
    assert report["test"]["best"]["bleu"] == 21.08  # what the server's /v1/models and the benchmarks read
    (tmp_path / "best.pt").write_bytes(b"")
    assert RunDir(tmp_path).chosen_checkpoint() == "best"


def test_a_report_in_today_s_shape_is_read_as_written(tmp_path: Path) -> None:
    today = old_report() | {"test": {"best": with_directions(OLD_SCORES | SEARCH, "de-en")}}
    today["valid"] = {"best": with_directions(OLD_SCORES | SEARCH, "de-en")}
    (tmp_path / "report.json").write_text(json.dumps(today))
    assert read_report(tmp_path / "report.json") == today
