"""benchmarks/multilingual_seeds.py without training anything: the mean ± standard deviation tables read from
results.json, seeds not yet scored left out."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from benchmarks import multilingual_bench, multilingual_seeds
from tests.conftest import ROOT

PUBLISHED = (ROOT / "docs" / "multilingual.md").read_text(encoding="utf-8").splitlines()


def bench(
    work: Path, seeds: list[int], parents: str | None = None, **results: object
) -> multilingual_bench.Bench:
    args = argparse.Namespace(work=work, data=None, seeds=seeds, parents=parents)
    work.mkdir(parents=True, exist_ok=True)
    (work / "results.json").write_text(json.dumps(results))
    return multilingual_bench.Bench(args)


def trained_scores(bleu: float) -> dict:
    per_direction = {d: {"bleu": bleu, "chrf": 40.0, "off_target": 0.0} for d in multilingual_bench.TRAINED}
    return {"bleu": bleu, "chrf": 40.0, "off_target": 0.1} | per_direction


def test_the_tables_give_mean_and_spread_over_the_seeds(tmp_path: Path) -> None:
    trained = {
        f"{multilingual_seeds.run_name(tags, seed)}/{search}": trained_scores(20 + seed + (tags == "decoder"))
        for tags in multilingual_seeds.PLACEMENTS
        for seed in (1, 2)
        for search in multilingual_seeds.TRAINED_SEARCHES
    }
    zero_shot = {
        f"multi-decoder-s{seed}/{d}/zero-shot vocabulary": {"bleu": 2, "chrf": 20, "off_target": 2.0 * seed}
        for seed in (1, 2, 3)  # seed 3 is not a seed of this bench: left out
        for d in multilingual_bench.ZERO_SHOT
    }
    work = bench(tmp_path / "work", [1, 2], **{"trained scores": trained, "scores": zero_shot})
    table = multilingual_seeds.trained_table(work).splitlines()
    assert table[2].startswith("| encoder | plain | 21.50 ± 0.71 |")  # 21 and 22
    assert table[4].endswith("| 22.50 ± 0.71 | 40.00 ± 0.00 | 0.10 ± 0.00 |")  # decoder tags: 22 and 23
    rows = multilingual_seeds.zero_shot_table(work).splitlines()
    assert rows[4] == (
        "| decoder | zero-shot vocabulary | 2.00 ± 0.00 | 20.00 ± 0.00 | 3.00 ± 1.41 "
        "| 2.00 ± 0.00 | 20.00 ± 0.00 | 3.00 ± 1.41 |"
    )
    assert rows[2] == "| encoder | zero-shot vocabulary | — | — | — | — | — | — |"  # not measured
    assert table[0] in PUBLISHED and rows[0] in PUBLISHED  # the tables of docs/multilingual.md


def test_back_translation_s_tables_give_each_arm_its_mean_spread_and_speed(tmp_path: Path) -> None:
    """With --parents (each seed's run continued, without and with back-translation): the zero-shot table by
    arm and search, the control's pivot through English last; the trained table ends in updates/s."""
    arms = {"control": 1.0, "robt": 2.0}
    trained = {f"{arm}-s{seed}": trained_scores(20 + seed) for arm in arms for seed in (1, 2)}
    speeds = {f"{arm}-s{seed}": {"updates_per_s": arms[arm] + seed} for arm in arms for seed in (1, 2)}
    zero_shot = {
        f"{arm}-s{seed}/{d}/{search}": {"bleu": bleu * seed, "chrf": 20, "off_target": 0.0}
        for arm, bleu in arms.items()
        for seed in (1, 2)
        for d in multilingual_bench.ZERO_SHOT
        for search in ("zero-shot vocabulary", "pivot")
    }
    work = bench(tmp_path / "work", [1, 2], "runs/multi-decoder-s{seed}", trained=speeds)
    work.results |= {"trained scores": trained, "scores": zero_shot}
    rows = multilingual_seeds.zero_shot_table(work).splitlines()
    assert rows[0].startswith("| continued | search | de→fr BLEU |")
    assert rows[4].startswith("| robt | zero-shot vocabulary | 3.00 ± 1.41 | 20.00 ± 0.00 | 0.00 ± 0.00 |")
    assert rows[-1].startswith("| control | through English (`--pivot en`) | 1.50 ± 0.71 |")
    assert rows[3] == "| control | no vocabulary | — | — | — | — | — | — |"  # not measured
    table = multilingual_seeds.trained_table(work).splitlines()
    assert table[0].endswith("| mean BLEU | mean chrF | off-target % | updates/s |")
    assert table[1] == "|---|" + "---:|" * 10
    assert table[3].startswith("| robt | 21.50 ± 0.71 |") and table[3].endswith("| 3.50 ± 0.71 |")
    assert rows[0] in PUBLISHED and table[0].removesuffix(" updates/s |") in PUBLISHED  # speeds: in the text
