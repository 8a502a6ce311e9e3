"""The device check: drive the GPU road first whenever a GPU is available (about 6 minutes on one H100;
docs/design.md, "The device check").

    python -m benchmarks.device_check --data DIR --out OUT [--commit SHA] [--stages NAME,NAME] [--budget 420]
    python -m benchmarks.device_check --debt

DIR holds Multi30k's raw files. A stage fails on a non-zero exit, a time-out or a line saying the GPU road was
left (`OFF_THE_ROAD`); OUT gets summary.md, summary.json and logs.tar.gz; the exit code is 1 if one failed.
`--debt`: the GPU-only code (`GPU_PATHS`) changed since the last commit that passed (.ci/device-check.json).
"""

from __future__ import annotations

import functools
import json
import os
import platform
import re
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from benchmarks.common import ROOT, parser, settings, table

RECORD = ROOT / ".ci" / "device-check.json"
GPU_PATHS = [  # code that only a GPU runs, or that decides what a GPU runs
    *("nmt/device", "nmt/models", "nmt/rules", "nmt/bench", "configs", "tests/test_gpu.py"),
    *(f"nmt/train/{name}.py" for name in ("step", "step_graphs", "token_budget", "update_stream")),
    "nmt/train/distributed.py",
    *(f"nmt/decode/{name}.py" for name in ("search", "step_graphs")),
    *(f"nmt/data/{name}.py" for name in ("batching", "buckets", "loader")),
    *(f"benchmarks/{name}.py" for name in ("device_check", "gpu_profile", "speed_table", "ceiling_bench")),
]
OFF_THE_ROAD = re.compile(
    r"without a CUDA graph|without CUDA graphs|fits no planned static shape|out of GPU memory|Traceback"
)
GPU_CONFIGS = {
    "multi30k-transformer": (1000, 500),
    "multi30k-rnn-bahdanau": (30, 30),
    "multi30k-rnn-luong": (30, 30),
}


@dataclass
class Outcome:
    """What one stage gave: passed, failed or skipped, its seconds, its figures, and why it failed."""

    stage: str
    result: str
    seconds: float = 0.0
    figures: dict = field(default_factory=dict)
    reason: str = ""


class Check:
    """Runs the stages' commands in processes of their own from the repository's root, keeping their output
    in `work`/logs; on `device`, with `scale` times the updates (a rehearsal on a CPU: `--smoke`)."""

    def __init__(self, data: Path, work: Path, device: str = "cuda", scale: float = 1.0) -> None:
        self.data, self.work, self.device, self.scale = data, work, device, scale
        self.logs = work / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
        cache = str(work / "cache")
        self.env = os.environ | {"NMT_CACHE": cache, "PYTHONUNBUFFERED": "1", "PYTHONPATH": path}

    def run(self, log: str, *args: str, limit: float) -> str:
        """Run `args`; returns its standard output. RuntimeError names a failure: its exit code, a time-out
        or the first line off the GPU road."""
        started = time.perf_counter()
        try:
            done = subprocess.run(args, cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=limit)
            out, err, code = done.stdout, done.stderr, done.returncode
        except subprocess.TimeoutExpired as late:
            out, err, code = str(late.stdout or ""), f"{late.stderr or ''}\ntimed out after {limit:.0f} s", -1
        seconds = time.perf_counter() - started
        with (self.logs / f"{log}.log").open("a", encoding="utf-8") as file:
            file.write(f"$ {' '.join(args)}\n# {seconds:.1f} s, exit code {code}\n{err}\n{out[-20000:]}\n")
        said = err + out
        if code != 0:
            raise RuntimeError(f"exit code {code}: {last_line(said)}")
        if off := OFF_THE_ROAD.search(said):
            raise RuntimeError(next(line.strip() for line in said.splitlines() if off.group(0) in line))
        return out

    def python(self, log: str, *args: str, limit: float) -> str:
        """`python ARGS`, this Python."""
        return self.run(log, sys.executable, *args, limit=limit)

    def nmt(self, log: str, *args: str, limit: float, device: str | None = None) -> str:
        """`nmt ARGS --device DEVICE` (the check's device by default)."""
        return self.python(log, "-m", "nmt", *args, "--device", device or self.device, limit=limit)

    def steps(self, updates: int) -> int:
        return max(2, round(updates * self.scale))

    def train(self, log: str, config: str, data: Path, steps: int, *sets: str, limit: float) -> dict:
        """`nmt train` for `steps` updates into work/LOG; returns the figures of its log."""
        flags = settings("train.final_report=false", "train.max_time=0", "train.patience=0", *sets)
        where = ["--data", str(data), "--out", str(self.work / log)]
        self.nmt(log, "train", config, *where, "--max-steps", str(self.steps(steps)), *flags, limit=limit)
        return training_figures((self.logs / f"{log}.log").read_text(encoding="utf-8"))


def last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def training_figures(log: str) -> dict:
    """What a training log reports: training steps captured, capture seconds, target tok/s, the last
    validation's loss, BLEU and AER, an `auto` token budget."""
    figures: dict = {"train_captures": len(re.findall(r"capturing the training step", log))}
    if capture := re.findall(r"\(([\d.]+) s of CUDA graph capture so far\)", log):
        figures["capture_s"] = float(capture[-1])
    if speed := re.findall(r"([\d,]+) target tok/s", log):
        figures["target_tok_per_s"] = speed[-1]
    if valid := re.findall(r"valid loss ([\d.]+), (?:mean )?BLEU ([\d.]+)(?:, AER ([\d.]+))?", log):
        loss, bleu, aer = valid[-1]
        figures |= {"valid_loss": float(loss), "valid_bleu": float(bleu)} | (
            {"aer": float(aer)} if aer else {}
        )
    if budget := re.findall(r"auto chose (\d+) tokens per batch", log):
        figures["batch_tokens"] = int(budget[0])
    return figures


# --- stages ----------------------------------------------------------------------------------------------


def gpu_tests(check: Check) -> dict:
    tests = ["-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfEs", "tests/test_gpu.py"]
    out = check.python("gpu-tests", *tests, limit=300)
    return {kind: int(n) for n, kind in re.findall(r"(\d+) (passed|failed|skipped|errors?)", out)}


def gpu_config(check: Check, name: str) -> dict:
    """Train the shipped GPU config `name` for its updates in GPU_CONFIGS, validating at its interval."""
    steps, every = GPU_CONFIGS[name]
    sets = ["train.keep_checkpoints=0", "train.average_checkpoints=0"]
    sets.append(f"train.eval_every={check.steps(every)}")
    return check.train(name, f"configs/{name}.yaml", check.data, steps, *sets, limit=240)


def reordering(check: Check) -> Path:
    """The synthetic reordering task with its true links (the valid split's as the gold set), made once."""
    from nmt.data.synthetic import write_reordering_corpus
    from tests.synthetic import write_reordering_links

    out = check.work / "reordering"
    if not (out / "valid.links").is_file():
        write_reordering_corpus(out)
        for split in ("train", "valid"):
            write_reordering_links(out / f"{split}.src", out / f"{split}.links")
    return out


def guided(check: Check) -> dict:
    data = reordering(check)
    files = {"links": "train.links", "gold_src": "valid.src", "gold_tgt": "valid.tgt"}
    files["gold_links"] = "valid.links"
    sets = [f"train.alignment.{key}={data / name}" for key, name in files.items()]
    sets += ["train.alignment.full_context=true", "train.batch_tokens=auto", "train.cuda_graphs=true"]
    sets += ["train.amp=true", "search.cuda_graphs=true", f"train.eval_every={check.steps(200)}"]
    return check.train("guided", "configs/tiny-transformer.yaml", data, 400, *sets, limit=180)


MULTILINGUAL = """\
data: {max_len: 64, multilingual: {directions: [xa-xb, xb-xa, xa-xc, xc-xa], tags: decoder,
       weights: {xa-xc: 2.0}, temperature: 2.0}}
tokenizer: {vocab_size: 300}
model: {encoder_layers: 2, decoder_layers: 2, dropout: 0.1, transformer: {d_model: 64, heads: 4, ff_dim: 128}}
train: {batch_tokens: 2000, lr: 3.0e-3, warmup_steps: 100, eval_every: 200, eval_max_sentences: 50,
        cuda_graphs: true, amp: true}
search: {beam_size: 1, batch_tokens: 4096, cuda_graphs: true}
"""


def multilingual(check: Check) -> dict:
    from tests.synthetic import write_multilingual_corpus

    data = write_multilingual_corpus(check.work / "three-languages")
    config = check.work / "multilingual.yaml"
    config.write_text(MULTILINGUAL)
    return check.train("multilingual", str(config), data, 400, limit=180)


SEARCHES = {
    "greedy": ["--beam-size", "1"],
    "beam5": ["--beam-size", "5"],
    "sampling": ["--sampling", "--seed", "3", "--top-k", "10"],
    "alignments": ["--beam-size", "1", "--alignments"],
}


def translate(check: Check) -> dict:
    """The Multi30k Transformer's translations of 200 test sentences on the GPU and on the CPU: identical
    lines of each search (sampling draws from each device's own generator: its lines may differ)."""
    run, source = check.work / "multi30k-transformer", check.work / "test200.de"
    source.write_text("".join((check.data / "test2016.de").read_text().splitlines(keepends=True)[:200]))
    figures = {}
    for name, flags in SEARCHES.items():
        args = ["-q", "translate", str(run), "-i", str(source), *flags]
        gpu, cpu = (check.nmt("translate", *args, limit=150, device=d) for d in (check.device, "cpu"))
        figures[f"{name} identical"] = identical(gpu, cpu)
    return figures


def identical(gpu: str, cpu: str) -> str:
    """How many lines of the GPU's output equal the CPU's, of how many."""
    pairs = list(zip(gpu.splitlines(), cpu.splitlines(), strict=True))
    return f"{sum(g == c for g, c in pairs)}/{len(pairs)}"


def align(check: Check) -> dict:
    """`nmt align` of the guided run on its gold pairs on the GPU and on the CPU: the same links (float32
    without TF32 on both), and each one's AER."""
    data, figures, links = reordering(check), {}, {}
    run, gold = str(check.work / "guided"), str(data / "valid.links")
    pairs = ["--src", str(data / "valid.src"), "--tgt", str(data / "valid.tgt")]
    for device in dict.fromkeys((check.device, "cpu")):
        links[device] = check.nmt("align", "-q", "align", run, *pairs, limit=90, device=device)
        found = check.work / f"links.{device}"
        found.write_text(links[device])
        score = check.python("align", "-m", "nmt", "score-alignments", str(found), gold, limit=60)
        figures[f"AER {device}"] = float(re.findall(r"AER ([\d.]+)", score)[0])
    figures["identical lines"] = same = identical(links[check.device], links["cpu"])
    if links[check.device] != links["cpu"]:
        raise RuntimeError(f"the GPU's links differ from the CPU's ({same} lines alike)")
    return figures


def benchmark(check: Check) -> dict:
    result = check.work / "benchmark.json"
    args = ["benchmark", "configs/multi30k-transformer.yaml", "--data", str(check.data), "--steps", "200"]
    args += ["--bleu-budget", "0", "--decode-sentences", "0", "--json", str(result)]
    check.nmt("benchmark", *args, limit=180)
    found = json.loads(result.read_text())
    keys = ["train_target_tokens_per_s", "ms_per_step", "peak_memory_allocated_gib", "host_syncs_per_update"]
    return {key: found[key] for key in keys if key in found}


def profile(check: Check) -> dict:
    args = ["configs/multi30k-transformer.yaml", "--data", str(check.data), "--train-seconds", "20"]
    out = check.python("profile", "-m", "benchmarks.gpu_profile", *args, "--updates", "10", limit=180)
    found = re.findall(r"## beam (\d), ([\w ]+): ([\d,]+)", out)
    return {f"beam {b}, {how} sent/s": speed for b, how, speed in found}


def ceiling(check: Check) -> dict:
    result = check.work / "ceiling.json"
    args = ["-m", "benchmarks.ceiling_bench", "--time-budget", "40", "--json", str(result)]
    check.python("ceiling", *args, limit=150)
    found = json.loads(result.read_text())
    figures = {}
    for r in found["train"]:
        kind = ("compiled" if r["compiled"] else "eager") + (", masked" if r["src_pad_mask"] else "")
        figures[f"{r['B']}x{r['S']}x{r['T']} {kind} target tok/s"] = round(r["tgt_tok_per_s"])
    return figures | {"greedy sent/s": round(found["decode"]["greedy_kvcache"]["sent_per_s"])}


STAGES: dict[str, tuple[Callable[[Check], dict], float]] = {  # each stage and the seconds it needs at least
    "gpu-tests": (gpu_tests, 60),
    **{name: (functools.partial(gpu_config, name=name), 20) for name in GPU_CONFIGS},
    "guided": (guided, 20),
    "multilingual": (multilingual, 20),
    "translate": (translate, 30),
    "align": (align, 10),
    "benchmark": (benchmark, 40),
    "profile": (profile, 40),
    "ceiling": (ceiling, 40),
}
NEEDS = {"translate": "multi30k-transformer", "align": "guided"}  # the run a stage uses


def environment(commit: str) -> dict:
    """The commit, the date, the GPU and the versions the summary names."""
    import torch

    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA GPU"
    date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    versions = {"torch": torch.__version__, "cuda": torch.version.cuda, "python": platform.python_version()}
    return {"commit": commit, "date": date, "device": gpu} | versions


def run_stages(
    check: Check, names: list[str], budget: float, write: Callable[[list[Outcome]], None]
) -> list[Outcome]:
    """Each named stage in order, unless the budget is spent or the run it needs did not pass; the summary is
    written after each."""
    started, outcomes = time.perf_counter(), []
    for name in names:
        stage, least = STAGES[name]
        spent = time.perf_counter() - started
        passed = {o.stage for o in outcomes if o.result == "passed"}
        if spent + least > budget:
            outcomes.append(Outcome(name, "skipped", reason=f"the budget of {budget:.0f} s was spent"))
        elif name in NEEDS and NEEDS[name] not in passed:
            outcomes.append(Outcome(name, "skipped", reason=f"needs the {NEEDS[name]} stage's run"))
        else:
            began = time.perf_counter()
            try:
                outcomes.append(Outcome(name, "passed", figures=stage(check)))
            except Exception as err:  # a stage's failure is its row of the summary; the next stage runs
                outcomes.append(Outcome(name, "failed", reason=str(err)))
            outcomes[-1].seconds = time.perf_counter() - began
        last = outcomes[-1]
        print(f"{name}: {last.result} ({last.seconds:.0f} s) {last.reason}", flush=True)
        write(outcomes)
    return outcomes


def summary(env: dict, outcomes: list[Outcome]) -> str:
    """The Markdown summary: the environment, then a row per stage."""
    ran = [o for o in outcomes if o.result != "skipped"]
    verdict = "passed" if ran and all(o.result == "passed" for o in ran) else "failed"
    listed = "".join(f"- {key}: {value}\n" for key, value in env.items())
    shown = [o.reason or "; ".join(f"{k} {v}" for k, v in o.figures.items()) for o in outcomes]
    rows = [[o.stage, o.result, f"{o.seconds:.0f}", why] for o, why in zip(outcomes, shown, strict=True)]
    head = ["stage", "result", "s", "figures / reason"]
    return f"# Device check: {verdict}\n\n{listed}\n{table(head, rows, left=2)}\n"


def debt() -> str:
    """How much GPU-only code changed since the last commit that passed the device check."""
    if not RECORD.is_file():
        return "device check: no commit has passed it yet (.ci/device-check.json)"
    record = json.loads(RECORD.read_text())
    passed = f"device check: last passed at {record['commit'][:12]} on {record['device']} ({record['date']})"
    command = ["git", "diff", "-M", "--stat", record["commit"], "--", *GPU_PATHS]
    try:
        diff = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    except FileNotFoundError:  # no git
        return f"{passed}; no git here to compare"
    if diff.returncode != 0:
        return f"{passed}, not in this clone's history"
    return f"{passed}; GPU-only code changed since:\n{diff.stdout.strip() or 'nothing'}"


def main() -> None:
    parse = parser(__doc__)
    parse.add_argument("--data", type=Path, help="Multi30k's raw files (train/val/test2016 .de, .en)")
    parse.add_argument("--out", type=Path, help="where summary.md, summary.json and logs.tar.gz go")
    parse.add_argument("--commit", default="unknown", help="the commit checked (the device has no .git)")
    parse.add_argument("--stages", default=",".join(STAGES), help=f"comma-separated, of {', '.join(STAGES)}")
    parse.add_argument("--budget", type=float, default=420.0, help="seconds after which no stage starts")
    parse.add_argument("--device", default="cuda", help="cpu: rehearse the script (no GPU road is driven)")
    parse.add_argument("--smoke", action="store_true", help="a twentieth of the updates (a rehearsal)")
    parse.add_argument("--debt", action="store_true", help="print the GPU-only changes since the last pass")
    args = parse.parse_args()
    if args.debt:
        print(debt())
        return
    if args.data is None or args.out is None:
        parse.error("--data and --out are needed (or --debt)")
    names = args.stages.split(",")
    if unknown := set(names) - set(STAGES):
        parse.error(f"unknown stages {sorted(unknown)}; known: {', '.join(STAGES)}")
    args.out.mkdir(parents=True, exist_ok=True)
    env = environment(args.commit)
    with tempfile.TemporaryDirectory(prefix="nmt-device-check-") as tmp:
        check = Check(args.data.resolve(), Path(tmp), args.device, 0.05 if args.smoke else 1.0)

        def write(outcomes: list[Outcome]) -> None:
            (args.out / "summary.md").write_text(summary(env, outcomes))
            found = env | {"stages": [asdict(o) for o in outcomes]}
            (args.out / "summary.json").write_text(json.dumps(found, indent=1) + "\n")
            with tarfile.open(args.out / "logs.tar.gz", "w:gz") as tar:
                tar.add(check.logs, arcname="logs")

        outcomes = run_stages(check, names, args.budget, write)
    print(summary(env, outcomes))
    sys.exit(0 if all(o.result != "failed" for o in outcomes) else 1)


if __name__ == "__main__":
    main()
