"""Device names: a GPU asked for on a machine without one is a one-line error naming the fix."""

from pathlib import Path

import pytest
import torch

from tests.conftest import assert_one_line_error, run_cli, train_args


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")
@pytest.mark.parametrize("command", ["train", "translate", "evaluate", "plot-attention"])
def test_device_cuda_without_a_gpu(
    command: str, trained_run: Path, corpus: Path, tiny: Path, tmp_path: Path
) -> None:
    args = {
        "train": train_args(tiny, corpus, tmp_path / "run"),
        "translate": ["translate", str(trained_run)],
        "evaluate": ["evaluate", str(trained_run)],
        "plot-attention": [
            "plot-attention",
            str(trained_run),
            "--text",
            "kalo",
            "--out",
            str(tmp_path / "a.png"),
        ],
    }[command]
    assert_one_line_error(run_cli(*args, "--device", "cuda", input="kalo\n"), "no CUDA GPU", "--device cpu")
