"""Data-parallel training on CPU: two processes under torchrun (gloo) train like one process with the same
effective batch, write one run directory between them, resume, and fail as one job."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from nmt.config.schema import Config, replace
from nmt.config.yaml_file import load_config, save_config
from nmt.data.batching import EncodedCorpus
from nmt.data.special_tokens import PAD
from nmt.decode.trained_run import load_run
from nmt.run.checkpoint_io import load_checkpoint
from nmt.train.command import train
from nmt.train.distributed import World
from tests.conftest import ROOT
from tests.train.test_train import losses, tiny_config

pytestmark = pytest.mark.skipif(
    not (dist.is_available() and dist.is_gloo_available()), reason="needs torch.distributed with gloo"
)

RUN_FILES = {".lock", "config.yaml", "spm.model", "best.pt", "last.pt", "metrics.jsonl", "train.log"}


def fast(cfg: Config, **train_fields: object) -> Config:
    """Validation on 10 sentences only: the processes start slowly enough on 2 CPU cores."""
    return replace(cfg, train={"eval_max_sentences": 10, **train_fields})


def write_config(cfg: Config, path: Path) -> Path:
    save_config(cfg, path)
    return path


def nmt_train(
    *args: str, torchrun: bool = True, program: tuple[str, ...] = ("-m", "nmt"), site: Path | None = None
) -> subprocess.CompletedProcess:
    """`torchrun --nproc_per_node 2 -m nmt train ARGS` (or `python -m nmt train ARGS`) in 2 CPU processes;
    `program` replaces `-m nmt` by a script that runs the CLI; `site` is a directory searched first for
    modules (a sitecustomize.py there runs in every process)."""
    launcher = ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"] if torchrun else []
    paths = [*([str(site)] if site else []), str(ROOT), os.environ.get("PYTHONPATH", "")]
    env = os.environ | {"PYTHONPATH": os.pathsep.join(paths)}
    command = [sys.executable, *launcher, *program, "train", *args, "--device", "cpu"]
    return subprocess.run(command, capture_output=True, text=True, timeout=150, env=env)


@pytest.fixture(scope="module")
def two_process_run(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """12 updates of the tiny Transformer in 2 processes, each taking half of every batch."""
    tmp = tmp_path_factory.mktemp("ddp")
    config = write_config(fast(tiny_config(corpus), max_steps=12), tmp / "tiny.yaml")
    result = nmt_train(str(config), "--out", str(tmp / "run"))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [str(tmp / "run" / "best.pt")]  # printed once, by rank 0
    return tmp / "run"


def test_shares_make_up_each_update() -> None:
    """Whole batches when they divide among the processes, else every batch split by sentences; together the
    processes use exactly the update's sentences, and one left without any runs a stand-in with no targets."""
    update = [[0, 1, 2], [3, 4], [5], [6, 7]]
    assert World(1, 2).share(update) == [[3, 4], [6, 7]]
    assert World(2, 3).share(update) == [[2], [], [], []]
    for size in (2, 3, 4):
        for cut in (update, update[:3], update[:1]):
            shares = [World(rank, size).share(cut) for rank in range(size)]
            assert sorted(i for share in shares for group in share for i in group) == sorted(
                i for group in cut for i in group
            )
    corpus = EncodedCorpus.from_ids([[5, 6]] * 8, [[7, 8, 9]] * 8)
    batches = list(World(2, 3).batches(corpus, [update], multiple=1))
    assert len(batches) == 4 and batches[0].target_tokens() == 4
    assert batches[1].index.tolist() == [0] and batches[1].tgt_out.eq(PAD).all()  # stand-in


@pytest.mark.slow  # starts torchrun
def test_two_processes_write_one_run_directory(two_process_run: Path) -> None:
    assert {p.name for p in two_process_run.iterdir()} == RUN_FILES
    records = [json.loads(line) for line in (two_process_run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if r["kind"] == "train"] == list(range(1, 13))
    assert [r["step"] for r in records if r["kind"] == "valid"] == [12]
    checkpoint = load_checkpoint(two_process_run / "last.pt")
    assert len(checkpoint["rng_ranks"]) == 2
    assert not torch.equal(checkpoint["rng_ranks"][0]["torch"], checkpoint["rng_ranks"][1]["torch"])
    load_run(two_process_run, torch.device("cpu"))  # plain state_dict keys, no DDP 'module.' prefix


@pytest.mark.slow  # starts torchrun
def test_two_processes_train_like_one(two_process_run: Path, corpus: Path, tmp_path: Path) -> None:
    train(fast(tiny_config(corpus), max_steps=12), tmp_path / "single")
    torch.testing.assert_close(losses(two_process_run), losses(tmp_path / "single"), rtol=1e-4, atol=0.0)


@pytest.mark.slow  # starts torchrun
def test_distributed_run_resumes(two_process_run: Path, corpus: Path, tmp_path: Path) -> None:
    """6 updates, then --resume to 12, in 2 processes: the same losses and weights as 12 at once."""
    config = write_config(fast(tiny_config(corpus), max_steps=12), tmp_path / "tiny.yaml")
    first = nmt_train(str(config), "--out", str(tmp_path / "run"), "--max-steps", "6")
    assert first.returncode == 0, first.stderr
    second = nmt_train(str(config), "--out", str(tmp_path / "run"), "--resume")
    assert second.returncode == 0, second.stderr
    assert losses(tmp_path / "run") == losses(two_process_run)
    straight, resumed = (
        load_checkpoint(two_process_run / "last.pt"),
        load_checkpoint(tmp_path / "run" / "last.pt"),
    )
    assert resumed["progress"]["step"] == 12
    for name, tensor in straight["model"].items():
        assert torch.equal(tensor, resumed["model"][name]), name


@pytest.mark.slow  # starts torchrun
def test_rnn_trains_with_nproc(corpus: Path, tmp_path: Path) -> None:
    """`nmt train --nproc 2` on a Luong RNN, each process taking whole batches of a 2-batch update."""
    cfg = load_config(ROOT / "configs" / "tiny-rnn-luong.yaml", [f"data.dir={corpus}"])
    cfg = replace(
        cfg,
        model={"rnn": {"embedding_size": 32, "hidden_size": 32}},
        tokenizer={"vocab_size": 200},
        train={"device": "cpu", "max_time": 0.0, "log_every": 1, "batch_tokens": 600, "accumulate": 2},
        search={"batch_tokens": 2000},
    )
    config = write_config(fast(cfg), tmp_path / "rnn.yaml")
    result = nmt_train(
        str(config), "--out", str(tmp_path / "ddp"), "--max-steps", "6", "--nproc", "2", torchrun=False
    )
    assert result.returncode == 0, result.stderr
    train(fast(cfg, max_steps=6), tmp_path / "single")
    torch.testing.assert_close(losses(tmp_path / "ddp"), losses(tmp_path / "single"), rtol=1e-4, atol=0.0)


@pytest.mark.slow  # starts torchrun
def test_failure_in_one_process_ends_the_job(corpus: Path, tmp_path: Path) -> None:
    """Rank 0 refuses --resume without a checkpoint: one clear line, exit code 2, no traceback, no hang."""
    config = write_config(fast(tiny_config(corpus)), tmp_path / "tiny.yaml")
    result = nmt_train(
        str(config), "--out", str(tmp_path / "run"), "--resume", "--nproc", "2", torchrun=False
    )
    assert result.returncode == 2
    assert result.stderr.startswith("nmt: error: --resume:"), result.stderr
    assert len(result.stderr.splitlines()) == 1, result.stderr  # torchrun's lines are silenced


@pytest.mark.slow  # starts torchrun
def test_a_data_error_every_process_meets_is_one_line(corpus: Path, tmp_path: Path) -> None:
    """Issue 14, class 9: `--nproc 2 --tgt-lang xx` printed the error twice, plus torchrun's own line."""
    config = write_config(fast(tiny_config(corpus)), tmp_path / "tiny.yaml")
    result = nmt_train(
        str(config), "--out", str(tmp_path / "run"), "--tgt-lang", "xx", "--nproc", "2", torchrun=False
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [
        f"nmt: error: {corpus / 'train.xx'} does not exist (--data {corpus}); check the path and --tgt-lang"
    ]


@pytest.mark.slow  # starts torchrun
def test_an_error_in_process_1_only_is_one_line(corpus: Path, tmp_path: Path) -> None:
    """Only the process of rank 1 fails (after the main one prepared the data): its line reaches the user,
    the main one (stopped by torchrun or by the lost connection) adds none."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import os\n"
        "if os.environ.get('RANK') == '1':\n"
        "    from nmt.train.loop import Trainer\n"
        "    from nmt.errors import UserError\n"
        "    def failing(self):\n"
        "        raise UserError('only rank 1 fails')\n"
        "    Trainer.fit_batch_tokens = failing\n"
    )
    config = write_config(fast(tiny_config(corpus)), tmp_path / "tiny.yaml")
    result = nmt_train(str(config), "--out", str(tmp_path / "run"), "--nproc", "2", torchrun=False, site=site)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.splitlines()  # log lines of the main process, then the error
    assert lines[-1] == "nmt: error (rank 1): only rank 1 fails", result.stderr
    assert all(line.startswith("nmt: ") and "error" not in line for line in lines[:-1]), result.stderr


@pytest.mark.slow  # starts torchrun
def test_out_of_memory_in_one_process_ends_the_job(corpus: Path, tmp_path: Path) -> None:
    """Process 1 runs out of GPU memory (simulated) at step 3: the others cannot go on without it, so the job
    ends with one line naming the process and the fix, keeping the checkpoint of the last validation."""
    script = tmp_path / "oom.py"
    script.write_text(
        "import sys, torch\n"
        "from nmt.train import step as update\n"
        "from nmt.__main__ import main\n"
        "backward = update.Update._backward\n"
        "def failing(self, *args):\n"
        "    if self.world.rank == 1 and self.scheduler.last_epoch == 3:  # the update after step 3\n"
        "        raise torch.cuda.OutOfMemoryError('CUDA out of memory.')\n"
        "    return backward(self, *args)\n"
        "update.Update._backward = failing\n"
        "main()\n"
    )
    config = write_config(fast(tiny_config(corpus), max_steps=12, eval_every=2), tmp_path / "tiny.yaml")
    result = nmt_train(str(config), "--out", str(tmp_path / "run"), program=(str(script),))
    assert result.returncode != 0
    errors = [line for line in result.stderr.splitlines() if line.startswith("nmt: error")]
    assert len(errors) == 1, result.stderr  # rank 0, stopped by the lost connection, adds none
    assert errors[0].startswith("nmt: error (rank 1): out of GPU memory at step 3 on a batch of ")
    assert "lower train.batch_tokens (now 600) and --resume" in errors[0]
    assert "[rank0]: Traceback" not in result.stderr
    assert load_checkpoint(tmp_path / "run" / "last.pt")["progress"]["step"] == 2


@pytest.mark.slow  # starts torchrun
def test_online_back_translation_runs_in_every_process(three_languages: Path, tmp_path: Path) -> None:
    """Each process re-sources its own part of every update (drawn from its rank); the training records count
    the pairs of both processes."""
    sets = ["data.multilingual.back_translation.share=0.5", "train.log_every=2", "train.eval_every=4"]
    sets += ["train.eval_max_sentences=4", "train.final_report=false"]
    data, run = three_languages / "data", tmp_path / "run"
    flags = [a for s in sets for a in ("--set", s)]
    where = ["--data", str(data), "--out", str(run), "--max-steps", "4"]
    result = nmt_train(str(three_languages / "config.yaml"), *where, *flags)
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    made = [r["back_translated"] for r in records if r["kind"] == "train"]
    assert len(made) == 2 and all(count > 0 for count in made)
    assert "back-translated " in (run / "train.log").read_text()
