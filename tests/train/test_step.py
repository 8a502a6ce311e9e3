"""The update's guards, through `nmt train`: a batch out of memory or with a non-finite loss is skipped, too
many in a row end the run with one line, and what was trained is kept."""

import re
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from nmt.models.transformer import TransformerSeq2Seq
from nmt.run.checkpoint_io import load_checkpoint
from tests.conftest import (
    NO_REPORT,
    assert_error_line_last,
    finite_weights,
    run_cli,
    train_args,
    train_losses,
)


def _fail_training_forward(
    monkeypatch: pytest.MonkeyPatch, failing: Callable[[int], bool], fail: Callable[[object], object]
) -> None:
    """Make the k-th training forward pass (from 1) fail where `failing(k)`; `fail(output)` does it."""
    original, calls = TransformerSeq2Seq.forward, iter(range(1, 10**6))

    def forward(self: TransformerSeq2Seq, *args: object, **kwargs: object) -> object:
        output = original(self, *args, **kwargs)
        if torch.is_grad_enabled() and failing(next(calls)):
            return fail(output)
        return output

    monkeypatch.setattr(TransformerSeq2Seq, "forward", forward)


def _out_of_memory(_: object) -> object:
    raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")


def _nan(output: object) -> object:
    output.logits = output.logits * float("nan")  # type: ignore[attr-defined]
    return output


def test_out_of_memory_in_training_skips_the_batch(
    small_corpus: Path, tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fail_training_forward(monkeypatch, lambda k: k == 3, _out_of_memory)
    code, _, err = run_cli(*train_args(tiny, small_corpus, tmp_path / "run", "--max-steps", "6", *NO_REPORT))
    assert code == 0, err
    assert re.search(r"step 2: out of GPU memory on a batch of \d+ sentences, source length \d+", err)
    assert [step for step, _ in train_losses(tmp_path / "run")] == [1, 2, 3, 4, 5, 6]


def test_out_of_memory_on_every_batch_aborts(
    small_corpus: Path, tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fail_training_forward(monkeypatch, lambda k: True, _out_of_memory)
    sets = ["--set", "train.max_bad_steps=4", "--max-steps", "6"]
    result = run_cli("-q", *train_args(tiny, small_corpus, tmp_path / "run", *sets))
    assert_error_line_last(result, "out of GPU memory on 4 batches in a row", "lower train.batch_tokens")


def test_repeated_nan_loss_aborts_and_keeps_the_last_good_checkpoint(
    small_corpus: Path, tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "run"
    _fail_training_forward(monkeypatch, lambda k: k > 6, _nan)
    sets = ["--set", "train.max_bad_steps=3", "--set", "train.eval_every=2", "--max-steps", "20"]
    result = run_cli("-q", *train_args(tiny, small_corpus, run, *sets))
    assert_error_line_last(
        result, "loss became NaN/inf in 3 consecutive steps", f"last good checkpoint: {run / 'last.pt'}"
    )
    assert finite_weights(run / "last.pt") and finite_weights(run / "best.pt")
    last = load_checkpoint(run / "last.pt")
    assert last["progress"]["step"] == 8  # saved by the validation at step 8, with step 6's weights
    assert int(last["optimizer"]["state"][0]["step"]) == 6  # the skipped updates left Adam alone
    assert [step for step, _ in train_losses(run)] == list(range(1, 9))


def test_a_run_that_fails_before_its_first_checkpoint_keeps_its_log(
    small_corpus: Path, tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only a run refused before training starts leaves nothing behind: one that trained and failed keeps
    train.log with its error, its training records and its tokenizer."""
    run = tmp_path / "run"
    _fail_training_forward(monkeypatch, lambda k: k > 2, _nan)
    sets = ["--set", "train.max_bad_steps=2", "--set", "train.log_every=1", "--max-steps", "20"]
    result = run_cli("-q", *train_args(tiny, small_corpus, run, *sets))
    assert_error_line_last(result, "loss became NaN/inf in 2 consecutive steps")
    assert not (run / "last.pt").exists()
    assert "loss became NaN/inf in 2 consecutive steps" in (run / "train.log").read_text()
    assert [step for step, _ in train_losses(run)] == [1, 2, 3]  # step 3 skipped, step 4 ended it
    assert (run / "spm.model").exists()


def test_a_single_nan_step_is_skipped(
    small_corpus: Path, tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "run"
    _fail_training_forward(monkeypatch, lambda k: k == 3, _nan)
    code, _, err = run_cli("-q", *train_args(tiny, small_corpus, run, "--max-steps", "6", *NO_REPORT))
    assert code == 0, err
    assert "step 3: 1 updates skipped for non-finite loss/gradients" in err
    assert finite_weights(run / "last.pt")
    assert int(load_checkpoint(run / "last.pt")["optimizer"]["state"][0]["step"]) == 5


def test_clip_norm_zero_means_no_clipping(small_corpus: Path, tiny: Path, tmp_path: Path) -> None:
    """train.clip_norm: 0 leaves the gradients as they are (as a limit none reaches), not scaled to zero."""
    weights = {}
    for clip in ("0", "1.0e+9"):
        run = tmp_path / clip
        args = train_args(
            tiny, small_corpus, run, "--max-steps", "3", "--set", f"train.clip_norm={clip}", *NO_REPORT
        )
        code, _, err = run_cli("-q", *args)
        assert code == 0, err
        weights[clip] = load_checkpoint(run / "last.pt")["model"]
    assert weights["0"].keys() == weights["1.0e+9"].keys()
    assert all(torch.equal(weights["0"][name], weights["1.0e+9"][name]) for name in weights["0"])
