"""Training: the loss falls, the schedule warms up and decays, and a resumed run continues bit for bit, also
after a signal or a kill -9 at any moment."""

import json
import re
import shutil
import signal
import time
from pathlib import Path

import pytest
import torch

from nmt.config.schema import Config, replace
from nmt.config.sections import TrainConfig
from nmt.config.yaml_file import load_config
from nmt.run.checkpoint import portable_optimizer_state
from nmt.run.checkpoint_io import load_checkpoint
from nmt.run.directory import RunDir
from nmt.run.metrics import read_metrics
from nmt.train.command import train
from nmt.train.loss import sequence_loss
from nmt.train.step import learning_rate_factor
from tests.conftest import (
    ROOT,
    assert_interrupted,
    finite_weights,
    run_cli,
    start_nmt,
    train_args,
    train_losses,
    wait_until,
)


def tiny_config(corpus: Path, **train_fields: object) -> Config:
    cfg = load_config(ROOT / "configs" / "tiny-transformer.yaml", [f"data.dir={corpus}"])
    fields = {
        "device": "cpu",
        "max_time": 0.0,
        "eval_every": 1000,
        "log_every": 1,
        "batch_tokens": 600,
        "final_report": False,
    } | train_fields
    return replace(
        cfg,
        model={
            "encoder_layers": 1,
            "decoder_layers": 1,
            "transformer": {"d_model": 32, "heads": 2, "ff_dim": 64},
        },
        tokenizer={"vocab_size": 200},
        train=fields,
        search={"batch_tokens": 2000},
    )


def losses(run_dir: Path) -> list[float]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [r["loss"] for r in map(json.loads, lines) if r["kind"] == "train"]


def test_sequence_loss_ignores_padding() -> None:
    logits = torch.randn(1, 3, 5)
    targets = torch.tensor([[4, 2, 0]])
    assert sequence_loss(logits, targets, 0.0) == sequence_loss(logits[:, :2], targets[:, :2], 0.0)


def test_schedule_warms_up_then_decays() -> None:
    cfg = TrainConfig(warmup_steps=10)
    factors = [learning_rate_factor(step, cfg) for step in range(40)]
    assert factors[0] == 0.1 and factors[9] == 1.0
    assert factors[39] == (10 / 40) ** 0.5


def test_loss_falls(corpus: Path, tmp_path: Path) -> None:
    train(tiny_config(corpus, max_steps=60, lr=3.0e-3, warmup_steps=20), tmp_path / "run")
    curve = losses(tmp_path / "run")
    assert sum(curve[-5:]) / 5 < 0.7 * sum(curve[:5]) / 5


def test_resume_continues_bit_for_bit(corpus: Path, tmp_path: Path) -> None:
    """Stopping at step 7 and resuming to step 14 gives the same losses and weights as one 14-step run."""
    train(tiny_config(corpus, max_steps=14, accumulate=2), tmp_path / "straight")
    train(tiny_config(corpus, max_steps=7, accumulate=2), tmp_path / "resumed")
    train(tiny_config(corpus, max_steps=14, accumulate=2), tmp_path / "resumed", resume=True)
    assert losses(tmp_path / "straight") == losses(tmp_path / "resumed")
    straight = load_checkpoint(tmp_path / "straight" / "last.pt")
    resumed = load_checkpoint(tmp_path / "resumed" / "last.pt")
    assert straight["progress"]["step"] == resumed["progress"]["step"] == 14
    for name, tensor in straight["model"].items():
        assert torch.equal(tensor, resumed["model"][name]), name


@pytest.mark.slow  # trains 30 steps and draws every picture: 5 s
def test_final_report_with_checkpoint_averaging(corpus: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    cfg = tiny_config(
        corpus,
        max_steps=30,
        eval_every=10,
        keep_checkpoints=2,
        average_checkpoints=2,
        final_report=True,
        lr=3.0e-3,
        warmup_steps=10,
    )
    train(cfg, run_dir)
    assert [p.name for p in RunDir(run_dir).snapshots()] == ["step20.pt", "step30.pt"]
    first, second = (load_checkpoint(p)["model"] for p in RunDir(run_dir).snapshots())
    averaged = load_checkpoint(run_dir / "averaged.pt")
    assert averaged["averaged_steps"] == [20, 30]
    for name, tensor in averaged["model"].items():
        torch.testing.assert_close(tensor, (first[name] + second[name]) / 2)
    report = json.loads((run_dir / "report.json").read_text())
    assert set(report["valid"]) == {"best", "averaged"} and report["checkpoint"] in report["valid"]
    (direction,) = report["test"][report["checkpoint"]]["directions"].values()  # a bilingual run's one
    tested = direction["metrics"]
    assert list(tested) == ["BLEU", "chrF2", "chrF2++", "TER"]
    assert tested["BLEU"]["signature"].startswith("nrefs:1|bs:1000|seed:12345|case:mixed|eff:no|tok:13a")
    assert report["steps"] == 30 and report["best_step"] in (10, 20, 30) and report["seed"] == cfg.train.seed
    for name in ("curves.png", "attention/valid-0.png", "attention/valid-2.png"):
        assert (run_dir / name).stat().st_size > 1000, name


def test_checkpoints_keep_float_learning_rates_whatever_the_optimizer_holds() -> None:
    """CUDA graphs turn the learning rates into device tensors and the optimizer capturable; last.pt is
    written as without them, so it resumes either way."""
    param = torch.nn.Parameter(torch.ones(3))
    optimizer = torch.optim.AdamW([param], lr=torch.tensor(1.0e-3), fused=True)
    param.grad = torch.ones(3)
    optimizer.step()
    optimizer.param_groups[0]["capturable"] = True  # as TrainGraphs sets it (stepping it needs a GPU)
    state = portable_optimizer_state(optimizer)
    assert (
        state["param_groups"][0]["lr"] == pytest.approx(1.0e-3)
        and type(state["param_groups"][0]["lr"]) is float
    )
    assert state["param_groups"][0]["capturable"] is False
    eager = torch.optim.AdamW([torch.nn.Parameter(torch.ones(3))], lr=1.0)
    eager.load_state_dict(state)
    assert eager.param_groups[0]["lr"] == pytest.approx(1.0e-3)


def test_resuming_a_finished_run_validates_no_step_twice(corpus: Path, tmp_path: Path) -> None:
    run = RunDir(tmp_path / "run")
    train(tiny_config(corpus, max_steps=4), run.path)
    validated = [r["step"] for r in read_metrics(run) if r["kind"] == "valid"]
    progress = load_checkpoint(run.checkpoint("last"))["progress"]
    train(tiny_config(corpus, max_steps=4), run.path, resume=True)  # nothing left to do
    assert validated and [r["step"] for r in read_metrics(run) if r["kind"] == "valid"] == validated
    assert load_checkpoint(run.checkpoint("last"))["progress"]["bad_evals"] == progress["bad_evals"]


# --- interrupted (signals, kill -9) and resumed ---------------------------------------------------------


@pytest.fixture(scope="module")
def straight_run(small_corpus: Path, tiny: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """30 uninterrupted steps of the tiny config: the reference for resumed runs."""
    run = tmp_path_factory.mktemp("straight") / "run"
    code, _, err = run_cli(*train_args(tiny, small_corpus, run, "--max-steps", "30"))
    assert code == 0, err
    return run


def _assert_same_run(resumed: Path, straight: Path) -> None:
    assert train_losses(resumed) == train_losses(straight)
    a, b = load_checkpoint(resumed / "last.pt"), load_checkpoint(straight / "last.pt")
    assert a["progress"]["step"] == b["progress"]["step"] == 30
    for name, tensor in b["model"].items():
        assert torch.equal(a["model"][name], tensor), name


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signal_saves_and_resume_continues_bit_for_bit(
    signum: int, straight_run: Path, small_corpus: Path, tiny: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    process = start_nmt(*train_args(tiny, small_corpus, run, "--max-steps", "30"))
    wait_until(lambda: (run / "last.pt").exists(), process)
    process.send_signal(signum)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    saved = re.escape(f"{run / 'last.pt'} saved, continue with --resume")
    stopped = re.fullmatch(rf"nmt: training interrupted at step (\d+); {saved}", err.strip().splitlines()[-1])
    assert stopped and "Traceback" not in err, err
    assert load_checkpoint(run / "last.pt")["progress"]["step"] == int(stopped.group(1)) < 30
    assert load_checkpoint(run / "last.pt")["progress"]["stop_reason"] == "signal"
    assert "signal (Ctrl-C or SIGTERM)" in (run / "train.log").read_text()
    code, _, err = run_cli(*train_args(tiny, small_corpus, run, "--max-steps", "30", "--resume"))
    assert code == 0, err
    _assert_same_run(run, straight_run)


def _temporary_files(run: Path) -> set[str]:
    return {path.name for path in run.glob(".*.tmp")}


def _kill(run: Path, args: list[str], moment: str, since: int) -> int:
    """Start training and SIGKILL it once it wrote a checkpoint newer than `since` (an mtime), then either
    as soon as it starts writing the next one ('writing') or 50 ms later ('between'); returns last.pt's mtime.
    """
    process = start_nmt(*args)

    def modified() -> int:
        return (run / "last.pt").stat().st_mtime_ns if (run / "last.pt").exists() else 0

    wait_until(lambda: modified() > since, process)
    if moment == "writing":
        stale = _temporary_files(run)  # left by an earlier kill: removed at start, so only before this
        wait_until(lambda: bool(_temporary_files(run) - stale), process, poll=0.0005)
    else:
        time.sleep(0.05)
    process.kill()
    process.wait(timeout=60)
    return modified()


@pytest.mark.slow
def test_kill_9_at_any_moment_leaves_loadable_checkpoints(
    straight_run: Path, small_corpus: Path, tiny: Path, tmp_path: Path
) -> None:
    """Killed while writing a checkpoint (one after every step) and between writes, each time resumed:
    every checkpoint still loads, and the resumed run matches an uninterrupted one."""
    run, since, steps = tmp_path / "run", 0, []
    args = train_args(tiny, small_corpus, run, "--max-steps", "30", "--set", "train.eval_every=1")
    for attempt, moment in enumerate(["writing", "between", "writing"]):
        since = _kill(run, args + (["--resume"] if attempt else []), moment, since)
        for name in ("last.pt", "best.pt"):
            assert finite_weights(run / name), name
        steps.append(load_checkpoint(run / "last.pt")["progress"]["step"])
    assert steps == sorted(steps) and steps[-1] < 28
    code, _, err = run_cli(*args, "--resume", "--max-steps", str(steps[-1] + 2))
    assert code == 0, err
    assert not _temporary_files(run)
    assert [step for step, _ in train_losses(run)] == list(range(1, steps[-1] + 3))
    assert train_losses(run) == train_losses(straight_run)[: steps[-1] + 2]


@pytest.mark.slow
def test_a_log_window_survives_a_resume(tiny: Path, small_corpus: Path, tmp_path: Path) -> None:
    """With a record every 7 updates, the records of a run stopped by SIGTERM and resumed equal those of a
    run never stopped (the checkpoint carries the window's partial sums)."""
    straight, run = tmp_path / "straight", tmp_path / "run"
    args = ("--max-steps", "30", "--set", "train.log_every=7")
    assert run_cli(*train_args(tiny, small_corpus, straight, *args))[0] == 0
    process = start_nmt(*train_args(tiny, small_corpus, run, *args))
    wait_until(lambda: (run / "last.pt").exists(), process)
    process.send_signal(signal.SIGTERM)
    assert_interrupted(process)
    code, _, err = run_cli(*train_args(tiny, small_corpus, run, *args, "--resume"))
    assert code == 0, err
    assert train_losses(run) == train_losses(straight) and len(train_losses(run)) == 4


def test_a_validation_pair_longer_than_the_positions_leaves_the_loss_not_the_run(
    tiny: Path, small_corpus: Path, tmp_path: Path
) -> None:
    """A validation pair the model's positions cannot hold (a fine-tuned published model's are few) is left
    out of the validation loss, with a warning; BLEU still translates it, cut."""
    data = Path(shutil.copytree(small_corpus, tmp_path / "data"))
    for name in ("valid.src", "valid.tgt"):
        with (data / name).open("a") as handle:
            handle.write(" ".join(["w1"] * 100) + "\n")
    run = tmp_path / "run"
    sets = ("--set", "model.transformer.max_positions=72", "--set", "train.final_report=false")
    code, _, err = run_cli(*train_args(tiny, data, run, "--max-steps", "5", *sets))
    assert code == 0, err
    assert "validation loss leaves out 1 of 101 pairs" in (run / "train.log").read_text()
    validation = [r for r in read_metrics(RunDir(run)) if r["kind"] == "valid"]
    assert len(validation) == 1 and 0 < validation[0]["loss"] < 100
