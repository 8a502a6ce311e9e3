"""What training shows: log lines without a terminal, an ETA from the limits, train.log, TensorBoard event
files."""

import io
import logging
import re
from pathlib import Path

import pytest
from tqdm import tqdm

from nmt.cli.logs import log_to_stderr
from nmt.config.sections import TrainConfig
from nmt.run.directory import RunDir
from nmt.train.monitor import Monitor, clock, remaining_seconds, run_log
from tests.conftest import run_cli, train_args


def test_eta_follows_the_nearer_limit() -> None:
    assert remaining_seconds(TrainConfig(), step=100, elapsed=10.0) is None
    assert remaining_seconds(TrainConfig(max_steps=300), step=100, elapsed=10.0) == 20.0
    assert remaining_seconds(TrainConfig(max_time=60.0), step=100, elapsed=10.0) == 50.0
    assert remaining_seconds(TrainConfig(max_steps=300, max_time=15.0), step=100, elapsed=10.0) == 5.0
    assert clock(3725.4) == "1:02:05" and clock(None) == "?"


def test_training_without_a_terminal_logs_the_loss(small_corpus: Path, tiny: Path, tmp_path: Path) -> None:
    """CliRunner's stderr is not a terminal, as under nohup or a batch job: every log_every updates give a
    line with loss, learning rate, speed, elapsed time and ETA."""
    sets = ("--set", "train.log_every=3", "--set", "train.final_report=false")
    code, _, err = run_cli(*train_args(tiny, small_corpus, tmp_path / "run", "--max-steps", "9", *sets))
    assert code == 0, err
    lines = [line for line in err.splitlines() if re.match(r"nmt: step \d+/9: loss", line)]
    assert [int(re.search(r"step (\d+)", line).group(1)) for line in lines] == [3, 6, 9]
    assert all(
        re.search(r"lr \S+, \d+ target tok/s, elapsed \d:\d\d:\d\d, ETA \d:\d\d:\d\d", x) for x in lines
    )


def test_tensorboard_event_files(small_corpus: Path, tiny: Path, tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = tmp_path / "tb"
    sets = ("--set", "train.log_every=2", "--set", "train.final_report=false")
    args = train_args(tiny, small_corpus, tmp_path / "run", "--max-steps", "10", "--tensorboard", str(events))
    code, _, err = run_cli(*args, *sets)
    assert code == 0, err
    accumulator = EventAccumulator(str(events))
    accumulator.Reload()
    tags = set(accumulator.Tags()["scalars"])
    assert {"train/loss", "train/lr", "train/target_tokens_per_s", "valid/bleu", "valid/loss"} <= tags
    assert [event.step for event in accumulator.Scalars("train/loss")] == [2, 4, 6, 8, 10]
    assert [event.step for event in accumulator.Scalars("valid/bleu")] == [5, 10]


def test_with_a_progress_bar_the_training_lines_go_to_train_log_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a terminal the bar shows loss and speed, so stderr gets no training line; train.log still does."""
    stderr = io.StringIO()
    monkeypatch.setattr("sys.stderr", stderr)
    logger = logging.getLogger("nmt")  # its handlers and level come back after the test
    monkeypatch.setattr(logger, "handlers", [])
    monkeypatch.setattr(logger, "level", logger.level)
    log_to_stderr(logging.INFO)
    run_dir = RunDir(tmp_path)
    monitor = Monitor(TrainConfig(max_steps=10), run_dir, is_main=True, step=0)
    monitor.bar = tqdm(total=10, file=io.StringIO())  # drawn, as on a terminal
    record = {"loss": 2.5, "lr": 1.0e-3, "target_tokens_per_s": 1000.0, "elapsed": 1.0}
    with run_log(run_dir.train_log):
        monitor.train(4, 0, record)
        logging.getLogger("nmt.train").info("step 4: valid loss 2.000, BLEU 1.00")
    monitor.close()
    assert "step 4/10: loss 2.500" in run_dir.train_log.read_text()
    assert "loss 2.500" not in stderr.getvalue() and "valid loss 2.000" in stderr.getvalue()
