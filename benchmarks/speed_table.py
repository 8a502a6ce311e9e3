"""Speed of nmt beside the plain-PyTorch ceiling, measured in one run on one machine, as a Markdown table.

    python -m benchmarks.speed_table --data DIR --out bench/ \
        configs/multi30k-transformer.yaml configs/multi30k-rnn-bahdanau.yaml configs/multi30k-rnn-luong.yaml

runs benchmarks/ceiling_bench.py, then `nmt benchmark` for each config (options after `--` go to each), keeps
every JSON in --out (`--table-only` rereads them) and prints each model's training speed as a fraction of the
ceiling's compiled figure. A config may be a variant, `NAME=CONFIG+KEY=VALUE+…`: the column NAME, CONFIG with
those `--set`s, e.g. `graphs=configs/multi30k-transformer.yaml+train.cuda_graphs=true`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from benchmarks.common import parser, settings, split_at_dashes
from benchmarks.common import table as markdown

ROWS = [  # (key in nmt benchmark's JSON, row label, format)
    ("train_target_tokens_per_s", "training target tok/s", "{:,.0f}"),
    ("ms_per_step", "ms per update", "{:.1f}"),
    ("peak_memory_allocated_gib", "peak memory allocated (GiB)", "{:.2f}"),
    ("seconds_to_bleu", "seconds to validation BLEU target", "{:.1f}"),
    ("beam1_sent_per_s", "greedy decoding sent/s", "{:,.0f}"),
    ("beam5_sent_per_s", "beam-5 decoding sent/s", "{:,.0f}"),
    ("beam1_sent_per_s_graphs", "greedy decoding sent/s, CUDA graphs", "{:,.0f}"),
    ("beam5_sent_per_s_graphs", "beam-5 decoding sent/s, CUDA graphs", "{:,.0f}"),
    ("kernel_launches_per_update", "kernel launches per update", "{:,.0f}"),
    ("host_syncs_per_update", "host syncs per update", "{:.1f}"),
    ("gpu_busy_fraction", "GPU busy (kernel time ÷ wall time)", "{:.0%}"),
    ("shapes_captured_or_compiled", "step shapes captured / compiled", "{}"),
    ("capture_or_compile_seconds", "capture / compile seconds", "{:.1f}"),
]


def parse_variant(text: str) -> tuple[str, Path, list[str]]:
    """`NAME=CONFIG+KEY=VALUE+…` (or a bare CONFIG, named by its stem) → name, config path, overrides."""
    name, _, rest = text.partition("=") if "=" in text.split("+")[0] else ("", "", text)
    config, *overrides = rest.split("+")
    return name or Path(config).stem, Path(config), overrides


def table(results: dict[str, dict], ceiling: dict) -> str:
    """Markdown: one column per benchmarked config, then the ceiling's eager and compiled target tok/s at its
    first batch shape without a source mask; a last row of ratios to its compiled training speed."""
    runs = ceiling.get("train", [])
    shape = [(r["B"], r["S"], r["T"]) for r in runs[:1]]
    unmasked = [r for r in runs if [(r["B"], r["S"], r["T"])] == shape and not r["src_pad_mask"]]
    limits = {"compiled" if r["compiled"] else "eager": r["tgt_tok_per_s"] for r in reversed(unmasked)}
    shown = {"eager": "—", "compiled": "—"} | {k: f"{v:,.0f}" for k, v in limits.items()}
    greedy = ceiling.get("decode", {}).get("greedy_kvcache", {}).get("sent_per_s")
    ceiling_cells = {
        "train_target_tokens_per_s": f"eager {shown['eager']} / compiled {shown['compiled']}",
        "beam1_sent_per_s": "—" if greedy is None else f"{greedy:,.0f}",
    }
    batch = f"fixed {'×'.join(map(str, shape[0]))} batch" if shape else "no training run"
    rows = []
    for key, label, fmt in ROWS:
        found = [fmt.format(r[key]) if r.get(key) is not None else "—" for r in results.values()]
        rows.append([label, *found, ceiling_cells.get(key, "—")])
    if "compiled" in limits:
        ratios = [f"{r['train_target_tokens_per_s'] / limits['compiled']:.2f}×" for r in results.values()]
        rows.append(["training tok/s ÷ compiled ceiling", *ratios, "1.00×"])
    first = next(iter(results.values()), {})
    device = f"device: {first.get('device', '?')}, torch {first.get('torch', '?')}, {first.get('dtype', '?')}"
    return f"{markdown(['figure', *results, f'ceiling ({batch})'], rows)}\n\n{device}"


def main() -> None:
    parse = parser(__doc__)
    parse.add_argument("configs", nargs="+", help="CONFIG or NAME=CONFIG+KEY=VALUE+…")
    parse.add_argument("--ceiling-budget", type=float, default=120.0, help="seconds for ceiling_bench.py")
    parse.add_argument("--smoke", action="store_true", help="ceiling_bench.py at its tiny CPU sizes")
    parse.add_argument("--data", type=Path, help="corpus directory (default: nmt benchmark's synthetic one)")
    parse.add_argument("--out", type=Path, default=Path("bench"))
    parse.add_argument("--table-only", action="store_true")
    ours, benchmark_options = split_at_dashes(sys.argv[1:])
    args = parse.parse_args(ours)
    args.out.mkdir(parents=True, exist_ok=True)
    ceiling_json = args.out / "ceiling.json"
    if not args.table_only:
        ceiling = ["-m", "benchmarks.ceiling_bench", "--json", str(ceiling_json)]
        smoke = ["--smoke"] if args.smoke else []
        run([sys.executable, *ceiling, "--time-budget", str(args.ceiling_budget), *smoke])
        data = ["--data", str(args.data)] if args.data else []
        for name, config, overrides in map(parse_variant, args.configs):
            benchmark = [sys.executable, "-m", "nmt", "benchmark", str(config), *data, *benchmark_options]
            run([*benchmark, *settings(*overrides), "--json", str(args.out / f"{name}.json")], fatal=False)
    found = {name: args.out / f"{name}.json" for name, _, _ in map(parse_variant, args.configs)}
    results = {name: json.loads(path.read_text()) for name, path in found.items() if path.exists()}
    print(table(results, json.loads(ceiling_json.read_text())))


def run(command: list[str], fatal: bool = True) -> None:
    """Run `command`; a failure ends the script when `fatal`, else it is reported and the table goes on."""
    print("$", " ".join(command), flush=True)
    if subprocess.run(command).returncode:
        if fatal:
            sys.exit(f"failed: {' '.join(command)}")
        print(f"failed (left out of the table): {' '.join(command)}", flush=True)


if __name__ == "__main__":
    main()
