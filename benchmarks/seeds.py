"""Train one config with several seeds and print their test scores with the mean, as a Markdown table.

    python -m benchmarks.seeds configs/multi30k-transformer.yaml --data DIR --out runs/seeds --seeds 1 2 3 \
        [--parallel] [-- --max-steps 3000 --set train.lr=1e-3 …]

Each seed trains into OUT/seed-S through `nmt train` (options after `--` go to every run), whose report.json
the table reads. `--parallel` trains the seeds at once; `--table-only` rereads OUT.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from benchmarks.common import NMT_COMMAND, parser, settings, split_at_dashes, spread
from benchmarks.common import table as markdown
from nmt.run.report import read_report


def row(seed: int, report: dict) -> dict[str, float | int | str]:
    """One seed's figures from its report.json."""
    chosen = report["checkpoint"]
    test = (report.get("test") or {}).get(chosen, {})
    return {
        "seed": seed,
        "steps": report["steps"],
        "best step": report["best_step"],
        "checkpoint": chosen,
        "valid BLEU": report["valid"][chosen]["bleu"],
        "test BLEU": test.get("bleu", float("nan")),
        "test chrF": test.get("chrf", float("nan")),
        "training s": report["training_seconds"],
    }


def table(rows: list[dict]) -> str:
    """Markdown, one line per seed and a last line of means (± standard deviation where there are two)."""
    keys = list(rows[0])
    found = [[f"{r[k]:.2f}" if isinstance(r[k], float) else r[k] for k in keys] for r in rows]
    numbers = [all(isinstance(r[k], (int, float)) for r in rows) for k in keys]
    means = [spread([r[k] for r in rows], bold=True) if n else "" for k, n in zip(keys, numbers, strict=True)]
    return markdown(keys, [*found, ["mean", *means[1:]]], left=0)


def main() -> None:
    parse = parser(__doc__)
    parse.add_argument("config", type=Path)
    parse.add_argument("--data", type=Path, required=True)
    parse.add_argument("--out", type=Path, required=True)
    parse.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parse.add_argument("--parallel", action="store_true", help="train the seeds at once")
    parse.add_argument("--table-only", action="store_true")
    ours, extra = split_at_dashes(sys.argv[1:])
    args = parse.parse_args(ours)
    run_dirs = {seed: args.out / f"seed-{seed}" for seed in args.seeds}
    if not args.table_only:
        args.out.mkdir(parents=True, exist_ok=True)
        train = [*NMT_COMMAND, "train", str(args.config), "--data", str(args.data)]
        commands = [
            [*train, "--out", str(d), *settings(f"train.seed={s}"), *extra] for s, d in run_dirs.items()
        ]
        for command in commands:
            print("$", " ".join(command), flush=True)
        if args.parallel:
            processes = [subprocess.Popen(c) for c in commands]
            codes = [p.wait() for p in processes]
        else:
            codes = [subprocess.run(c).returncode for c in commands]
        if any(codes):
            print(f"exit codes {codes}: failed runs are left out of the table", flush=True)
    reports = {s: d / "report.json" for s, d in run_dirs.items() if (d / "report.json").exists()}
    if not reports:
        sys.exit("no run wrote a report.json")
    print(table([row(s, read_report(path)) for s, path in reports.items()]))


if __name__ == "__main__":
    main()
