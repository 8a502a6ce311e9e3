"""sentencepiece tokenizers: special ids, round trips, vocabulary shrinking, joint/separate models."""

from __future__ import annotations

import logging
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import sentencepiece as spm

from nmt.config.sections import TokenizerConfig
from nmt.data import tokenizer_training
from nmt.data.special_tokens import BOS, EOS, PAD, UNK
from nmt.data.synthetic import reordering_pairs, write_reordering_corpus
from nmt.data.tokenizer import Tokenizer, Tokenizers, load_tokenizers
from nmt.data.tokenizer_training import train_sentencepiece, train_tokenizers
from nmt.errors import UserError
from tests.conftest import (
    FAST,
    ROOT,
    assert_interrupted,
    assert_one_line_error,
    run_cli,
    start_nmt,
    train_args,
    wait_until,
)

SMALL = TokenizerConfig(vocab_size=120, model_type="bpe")


@pytest.fixture(scope="module")
def pairs() -> tuple[list[str], list[str]]:
    """Lower-case source words; the target is upper case, reversed and in reverse order."""
    return reordering_pairs(300, 40, 2, 8, seed=1)


@pytest.fixture(scope="module")
def joint(pairs: tuple[list[str], list[str]], tmp_path_factory: pytest.TempPathFactory) -> Tokenizers:
    return train_tokenizers(SMALL, *pairs, tmp_path_factory.mktemp("joint"))


def test_special_ids_are_pad_unk_bos_eos(joint: Tokenizers) -> None:
    assert (PAD, UNK, BOS, EOS) == (0, 1, 2, 3)
    sp = joint.src.sp
    assert (sp.pad_id(), sp.unk_id(), sp.bos_id(), sp.eos_id()) == (0, 1, 2, 3)
    assert joint.src.pieces([0, 1, 2, 3]) == ["<pad>", "<unk>", "<s>", "</s>"]
    assert len(joint.src) == SMALL.vocab_size


def test_encode_decode_round_trip(joint: Tokenizers) -> None:
    src, tgt = reordering_pairs(20, 40, 1, 10, seed=99)  # unseen sentences over the same words
    ids = joint.src.encode(src + tgt)
    assert all(i > EOS for seq in ids for i in seq)  # no unknowns, no specials inside a sentence
    assert joint.tgt.decode(ids) == src + tgt


def test_decode_skips_special_ids(joint: Tokenizers, pairs: tuple[list[str], list[str]]) -> None:
    sentence = pairs[0][0]
    (ids,) = joint.src.encode([sentence])
    assert joint.src.decode([[BOS, *ids, EOS, PAD, PAD]]) == [sentence]
    assert joint.src.decode([[UNK, *ids]])[0].split() == ["⁇", *sentence.split()]  # unknowns stay visible


def test_joint_vocabulary_is_one_model(joint: Tokenizers) -> None:
    assert joint.joint and joint.src is joint.tgt
    assert joint.src.path.name == "spm.model"
    assert load_tokenizers(joint.src.path.parent, joint=True).src.fingerprint == joint.src.fingerprint


def test_separate_vocabularies_are_two_models(pairs: tuple[list[str], list[str]], tmp_path: Path) -> None:
    tokenizers = train_tokenizers(TokenizerConfig(vocab_size=80, joint=False), *pairs, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spm.src.model", "spm.tgt.model"]
    assert not tokenizers.joint and tokenizers.src.fingerprint != tokenizers.tgt.fingerprint
    src_text, tgt_text = pairs[0][0], pairs[1][0]
    assert UNK not in tokenizers.src.encode([src_text])[0]
    assert UNK in tokenizers.src.encode([tgt_text])[0]  # upper case: never seen by the source model
    assert tokenizers.tgt.decode(tokenizers.tgt.encode([tgt_text])) == [tgt_text]
    reloaded = load_tokenizers(tmp_path, joint=False)
    assert (reloaded.src.fingerprint, reloaded.tgt.fingerprint) == (
        tokenizers.src.fingerprint,
        tokenizers.tgt.fingerprint,
    )


def test_oversized_vocabulary_shrinks_with_a_warning(
    pairs: tuple[list[str], list[str]], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="nmt.data.tokenizer_training"):
        train_sentencepiece(TokenizerConfig(vocab_size=5000), pairs[0], tmp_path / "spm.model")
    match = re.search(r"tokenizer\.vocab_size=5000 is too large for this corpus; using (\d+)", caplog.text)
    assert match, caplog.text
    assert len(Tokenizer(tmp_path / "spm.model")) == int(match.group(1)) < 5000


@pytest.mark.parametrize(
    ("size", "pattern"),
    [
        (5000, r"tokenizer\.vocab_size=5000 is too large.*auto_shrink"),
        (10, r"vocab_size=10 is smaller than.*raise it"),
    ],
)
def test_a_vocabulary_size_that_does_not_fit_the_corpus_is_an_error(
    pairs: tuple[list[str], list[str]], tmp_path: Path, size: int, pattern: str
) -> None:
    with pytest.raises(UserError, match=pattern):
        train_sentencepiece(
            TokenizerConfig(vocab_size=size, auto_shrink=False), pairs[0], tmp_path / "spm.model"
        )
    assert not (tmp_path / "spm.model").exists()


def test_fingerprint_tells_models_apart(
    joint: Tokenizers, pairs: tuple[list[str], list[str]], tmp_path: Path
) -> None:
    train_sentencepiece(TokenizerConfig(vocab_size=100), pairs[0] + pairs[1], tmp_path / "other.model")
    other = Tokenizer(tmp_path / "other.model")
    assert re.fullmatch(r"[0-9a-f]{64}", other.fingerprint)
    assert other.fingerprint != joint.src.fingerprint
    assert Tokenizer(joint.src.path).fingerprint == joint.src.fingerprint


def test_models_trained_alike_have_one_fingerprint(
    pairs: tuple[list[str], list[str]], tmp_path: Path
) -> None:
    """Training the same sentences again gives the same pieces, hence the same fingerprint: a checkpoint is
    not refused with the other's vocabulary (the model file used to record a random temporary path)."""
    first = train_tokenizers(SMALL, *pairs, tmp_path / "a")
    second = train_tokenizers(SMALL, *pairs, tmp_path / "b")
    assert first.src.fingerprint == second.src.fingerprint
    assert first.src.path.read_bytes() == second.src.path.read_bytes()  # no temporary path recorded


def zipf_sentences(count: int, seed: int = 0) -> list[str]:
    """Sentences of 5-30 words drawn by Zipf's law from 2,000 made-up words: text on which sentencepiece's
    unigram trainer gives other pieces with another thread count."""
    rng = random.Random(seed)
    syllables = [c + v for c in "bdgkmprst" for v in "aeiou"]
    words = ["".join(rng.choices(syllables, k=rng.randint(1, 4))) for _ in range(2000)]
    weights = [1 / rank for rank in range(1, len(words) + 1)]
    return [" ".join(rng.choices(words, weights, k=rng.randint(5, 30))) for _ in range(count)]


@pytest.mark.parametrize("model_type", ["bpe", "unigram"])
def test_trained_pieces_do_not_depend_on_the_machine(
    model_type: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """BPE trains on every core; unigram, whose pieces change with the thread count, on a fixed 4 threads: a
    machine with 1 core and one with 3 train the same tokenizer."""
    cfg = TokenizerConfig(vocab_size=500, model_type=model_type)  # type: ignore[arg-type]
    sentences = zipf_sentences(3000)
    fingerprints = []
    for cores in ({0}, {0, 1, 2}):
        monkeypatch.setattr("os.sched_getaffinity", lambda _pid, cores=cores: cores)
        path = tmp_path / f"{len(cores)}.model"
        train_sentencepiece(cfg, sentences, path)
        fingerprints.append(Tokenizer(path).fingerprint)
    assert fingerprints[0] == fingerprints[1]


@pytest.mark.slow  # a fresh process: 5 s
def test_training_after_torch_ran_openmp_work_finishes(tmp_path: Path) -> None:
    """sentencepiece's trainer runs OpenMP, whose runtime torch shares: after torch has run OpenMP work in the
    process (two threads), training a unigram model still finishes (in a forked child it hung). Run in a
    process of its own with a timeout, so that a hang fails the test; the sentences come in a file (importing
    this module there would import the whole CLI through tests/conftest.py, most of the test's time)."""
    script = (
        "import sys, torch\n"
        "from pathlib import Path\n"
        "from nmt.config.schema import TokenizerConfig\n"
        "from nmt.data.tokenizer import Tokenizer\n"
        "from nmt.data.tokenizer_training import train_sentencepiece\n"
        "torch.set_num_threads(2)\n"
        "assert torch.rand(4_000_000).exp().sum() > 0\n"
        "path, text = Path(sys.argv[1]), Path(sys.argv[2])\n"
        "cfg = TokenizerConfig(vocab_size=500, model_type='unigram')\n"
        "train_sentencepiece(cfg, text.read_text(encoding='utf-8').splitlines(), path)\n"
        "print(len(Tokenizer(path)))\n"
    )
    text = tmp_path / "sentences.txt"
    text.write_text("".join(line + "\n" for line in zipf_sentences(3000)), encoding="utf-8")
    command = [sys.executable, "-c", script, str(tmp_path / "spm.model"), str(text)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["500"]


def test_training_child_ends_quietly_without_its_task() -> None:
    """The parent ended before it sent the task: the child exits without a traceback."""
    command = [
        sys.executable,
        "-c",
        f"from nmt.data.tokenizer_training import child_main; child_main({os.getpid()})",
    ]
    done = subprocess.run(command, cwd=ROOT, input=b"", capture_output=True, timeout=60)
    assert done.returncode == 1 and done.stderr == b"", done.stderr[-2000:]


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX parent processes")
def test_training_child_ends_with_its_parent() -> None:
    """A parent killed at once cannot kill its training child; the child notices and exits by itself, also
    when the parent ended before the child started (as here). Its standard input stays open (held by the
    test), so only the parent's end can stop it."""
    read_end, write_end = os.pipe()
    parent = (
        "import os, subprocess, sys\n"
        "child = subprocess.Popen([sys.executable, '-c', 'from nmt.data.tokenizer_training "
        "import child_main; child_main(%d)' % os.getpid()], stdin=int(sys.argv[1]), "
        "pass_fds=(int(sys.argv[1]),))\n"
        "print(child.pid, flush=True)\n"
        "os._exit(0)\n"
    )
    try:
        done = subprocess.run(
            [sys.executable, "-c", parent, str(read_end)],
            cwd=ROOT,
            pass_fds=(read_end,),
            capture_output=True,
            text=True,
            timeout=60,
        )
        child = int(done.stdout)
        deadline = time.monotonic() + 10
        while _running(child) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _running(child)
    finally:
        os.close(read_end)
        os.close(write_end)


def _running(pid: int) -> bool:
    """Whether `pid` is a live process (an exited orphan is reaped by init at once)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/stat")
    return not status.exists() or status.read_text().split(")")[-1].split()[0] != "Z"


def test_missing_model_file_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"spm\.model is missing"):
        Tokenizer(tmp_path / "spm.model")


def test_model_with_other_special_ids_is_refused(pairs: tuple[list[str], list[str]], tmp_path: Path) -> None:
    text = tmp_path / "text.txt"
    text.write_text("\n".join(pairs[0]) + "\n", encoding="utf-8")
    spm.SentencePieceTrainer.train(  # sentencepiece defaults: unk=0, bos=1, eos=2, no pad
        input=str(text), model_prefix=str(tmp_path / "foreign"), vocab_size=60, minloglevel=2
    )
    with pytest.raises(UserError, match="not trained by nmt"):
        Tokenizer(tmp_path / "foreign.model")


# --- through `nmt train` and `nmt translate` ------------------------------------------------------------


def test_a_tokenizer_of_random_bytes_is_one_line(trained_run: Path, tmp_path: Path) -> None:
    run = Path(shutil.copytree(trained_run, tmp_path / "copy"))
    (run / "spm.model").write_bytes(random.Random(0).randbytes(4096))
    assert_one_line_error(run_cli("translate", str(run), input="a b c\n"), "spm.model", "sentencepiece")


def test_a_tokenizer_written_short_is_never_saved(
    tiny: Path, small_corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = tokenizer_training._in_child

    def disk_full(task: Callable[[], tuple[bytes, int]]) -> tuple[bytes, int]:
        model, vocab_size = real(task)
        return model[:100], vocab_size  # a model cut short on its way back from the training process

    monkeypatch.setattr(tokenizer_training, "_in_child", disk_full)
    monkeypatch.setenv("NMT_CACHE", str(tmp_path / "cache"))  # trained here, not found in the cache
    run = tmp_path / "run"
    result = run_cli("-q", *train_args(tiny, small_corpus, run, *FAST))
    assert_one_line_error(result, "tokenizer", "sentencepiece")
    assert not (run / "spm.model").exists()


def _children(process: subprocess.Popen) -> list[int]:
    try:
        return [
            int(pid) for pid in Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split()
        ]
    except OSError:
        return []


@pytest.fixture(scope="module")
def tokenizer_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Enough text that training a 2000-piece sentencepiece model takes a while."""
    return write_reordering_corpus(
        tmp_path_factory.mktemp("spm") / "data",
        train=60000,
        valid=20,
        test=20,
        vocab=3000,
        min_len=5,
        max_len=20,
    )


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="finds the child process in /proc")
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_while_sentencepiece_trains_ends_the_child_too(
    signum: int, tokenizer_corpus: Path, tiny: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    process = start_nmt(*train_args(tiny, tokenizer_corpus, run, "--set", "tokenizer.vocab_size=2000"))
    wait_until(lambda: _children(process), process)
    child = _children(process)[0]
    process.send_signal(signum)
    assert assert_interrupted(process, "nmt: interrupted") == "nmt: interrupted"
    assert not Path(f"/proc/{child}").exists()
    assert not list(run.glob("spm*")) and not (run / "config.yaml").exists()
