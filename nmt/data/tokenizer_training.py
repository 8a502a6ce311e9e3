"""Training sentencepiece models (nmt/data/tokenizer.py uses them): on the training split, in a child process,
with a vocabulary shrunk to what the text allows."""

from __future__ import annotations

import functools
import io
import itertools
import logging
import os
import pickle
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import sentencepiece as spm

from nmt import interrupts
from nmt.atomic_files import atomic_write
from nmt.config.sections import TokenizerConfig
from nmt.data.language_tags import vocabulary_tags
from nmt.data.special_tokens import BOS, EOS, PAD, UNK
from nmt.data.tokenizer import Tokenizers, load_tokenizers, processor_of, tokenizer_paths
from nmt.errors import UserError

log = logging.getLogger(__name__)

_TOO_HIGH = re.compile(r"Vocabulary size too high \((\d+)\)\. Please set it to a value <= (\d+)")
_TOO_LOW = re.compile(r"Vocabulary size is smaller than required_chars\. (\d+) vs (\d+)")
T = TypeVar("T")


def train_tokenizers(
    cfg: TokenizerConfig,
    src: Iterable[str],
    tgt: Iterable[str],
    run_dir: Path,
    languages: Sequence[str] = (),
    symbols: Sequence[str] = (),
) -> Tokenizers:
    """Train the sentencepiece model(s) on the source and target sentences and save them in `run_dir`; a
    joint model reserves a tag for each of `languages` (nmt/data/language_tags.py); `symbols` (terminology
    markers) become user-defined pieces of the source vocabulary (the joint one).

    `src` and `tgt` are iterated once per training attempt: lists, or re-iterable readers of a sample.
    """
    src_path, tgt_path = tokenizer_paths(run_dir, cfg.joint)
    if cfg.joint:
        train_sentencepiece(cfg, Joined((src, tgt)), src_path, languages, symbols)
    else:
        train_sentencepiece(cfg, src, src_path, symbols=symbols)
        train_sentencepiece(cfg, tgt, tgt_path)
    return load_tokenizers(run_dir, cfg.joint)


@dataclass(frozen=True)
class Joined:
    """The sentences of several re-iterables one after another, as often as iterated."""

    parts: tuple[Iterable[str], ...]

    def __iter__(self) -> Iterator[str]:
        return itertools.chain.from_iterable(self.parts)


def train_sentencepiece(
    cfg: TokenizerConfig,
    sentences: Iterable[str],
    path: Path,
    languages: Sequence[str] = (),
    symbols: Sequence[str] = (),
) -> None:
    """Train one model at `path`, with a tag for each of `languages` and a piece for each of `symbols`;
    shrink the vocabulary (or fail clearly) when the text is too small.

    The sentences stream into sentencepiece (iterated again if the vocabulary shrinks) and the model comes
    back in memory: no temporary file, so training the same sentences twice writes the same bytes. Training
    runs in a child process: sentencepiece's trainer keeps the heap it used (0.8 GiB for 1M sentences of
    WMT-like text) until its process ends, and training must not leave that to the training loop.
    """
    threads = _training_threads(cfg)  # decided here: the machine is this process's to judge
    tags = vocabulary_tags(languages)
    task = functools.partial(_train_fitting, cfg, sentences, threads, tags, list(symbols))
    model, vocab_size = _in_child(task)
    if vocab_size != cfg.vocab_size:
        log.warning(
            "tokenizer.vocab_size=%d is too large for this corpus; using %d", cfg.vocab_size, vocab_size
        )
    processor_of(model, f"the trained tokenizer for {path}")  # what is saved must load
    atomic_write(path, lambda handle: handle.write(model))


def _in_child(task: Callable[[], T]) -> T:
    """`task()` computed in a fresh Python process, its exception raised here.

    Not a forked child: sentencepiece's trainer runs OpenMP, whose runtime torch shares, and OpenMP hangs or
    crashes in a forked child of a process that has used it (any torch work on the CPU). The child has a
    session of its own, so Ctrl-C at the terminal reaches this process alone; when it is interrupted (or
    fails) while waiting, it kills the child: the child never outlives the command.
    """
    package_root = str(Path(__file__).resolve().parents[2])  # the child imports this very nmt
    path = os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))
    program = f"from nmt.data.tokenizer_training import child_main; child_main({os.getpid()})"
    child = None
    try:
        with interrupts.deferred():  # a signal while it starts would leave the child running, unknown
            child = subprocess.Popen(
                [sys.executable, "-c", program],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=os.environ | {"PYTHONPATH": path},
                start_new_session=True,
            )
        output, _ = child.communicate(pickle.dumps(task))
    except BaseException:
        if child is not None:
            child.kill()
            child.wait()
        raise
    if child.returncode or not output:
        raise UserError(f"sentencepiece training died (its process exited with {child.returncode})")
    succeeded, value = pickle.loads(output)
    if not succeeded:
        raise value
    return value


def child_main(parent: int) -> None:
    """The child process of `_in_child`: reads the pickled task on stdin, writes (ok, result) on stdout.

    It ends, silently, as soon as its parent (`parent`, the pid that started it) does: killed at once, the
    parent could not kill the child. Given, not read here: the parent may have ended before the child started.
    """
    threading.Thread(target=_end_with, args=(parent,), daemon=True).start()
    try:
        task = pickle.load(sys.stdin.buffer)
    except (EOFError, pickle.UnpicklingError):  # the parent ended before it sent the whole task
        os._exit(1)
    try:
        outcome = (True, task())
    except Exception as err:
        outcome = (False, err)
    pickle.dump(outcome, sys.stdout.buffer)


def _end_with(parent: int) -> None:
    """Exit this process once `parent` is no longer its parent."""
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(1)


def _train_fitting(
    cfg: TokenizerConfig, sentences: Iterable[str], threads: int, tags: list[str], symbols: list[str]
) -> tuple[bytes, int]:
    """The model, and the vocabulary size it has: `cfg.vocab_size`, or the largest the text allows."""
    vocab_size = cfg.vocab_size
    for _ in range(2):
        try:
            return _train(cfg, sentences, vocab_size, threads, tags, symbols), vocab_size
        except RuntimeError as err:
            if low := _TOO_LOW.search(str(err)):
                raise UserError(
                    f"tokenizer.vocab_size={vocab_size} is smaller than the {low.group(2)} pieces this "
                    f"corpus needs (its characters and the special tokens); raise it or lower "
                    f"tokenizer.character_coverage"
                ) from None
            match = _TOO_HIGH.search(str(err))
            if not match:
                raise UserError(f"sentencepiece training failed: {str(err).splitlines()[-1]}") from None
            if not cfg.auto_shrink:
                raise UserError(
                    f"tokenizer.vocab_size={cfg.vocab_size} is too large for this corpus "
                    f"(at most {match.group(2)}); lower it or set tokenizer.auto_shrink=true"
                ) from None
            vocab_size = int(match.group(2))
    raise UserError(f"sentencepiece refused tokenizer.vocab_size={vocab_size}, the size it proposed")


def _training_threads(cfg: TokenizerConfig) -> int:
    """Threads for sentencepiece's trainer: every core for BPE, whose pieces do not depend on the thread
    count; a fixed 4 for the other types (unigram's do), so that every machine trains the same tokenizer."""
    if cfg.model_type != "bpe":
        return 4
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _train(
    cfg: TokenizerConfig,
    sentences: Iterable[str],
    vocab_size: int,
    threads: int,
    tags: list[str],
    symbols: list[str],
) -> bytes:
    """The serialized model. `tags` become control symbols (ids 4, 5, … after pad, unk, bos, eos): pieces of
    their own that no text encodes to (a `>>fr<<` typed in a sentence stays text) and that decoding drops.
    `symbols` become user-defined ones: text that holds one is encoded to its piece, never split."""
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences),
        model_writer=model,
        vocab_size=vocab_size,
        model_type=cfg.model_type,
        character_coverage=cfg.character_coverage,
        input_sentence_size=cfg.max_sentences,
        shuffle_input_sentence=True,
        pad_id=PAD,
        unk_id=UNK,
        bos_id=BOS,
        eos_id=EOS,
        control_symbols=tags,
        user_defined_symbols=symbols,
        minloglevel=2,
        num_threads=threads,
    )
    return model.getvalue()
