"""benchmarks/multilingual_seeds.py without training anything: the mean ± standard deviation tables read from
results.json, seeds not yet scored left out."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from benchmarks import multilingual_bench, multilingual_seeds


def bench(work: Path, seeds: list[int], **results: object) -> multilingual_bench.Bench:
    args = argparse.Namespace(work=work, data=None, threads=1, seeds=seeds, eval_device="cpu")
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
