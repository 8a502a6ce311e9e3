"""sentencepiece subword models: trained on the training split, used to encode and decode every sentence."""

from __future__ import annotations

import functools
import hashlib
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
from nmt.data.language_tags import TAG, vocabulary_tags
from nmt.data.special_tokens import BOS, EOS, PAD, UNK
from nmt.errors import UserError

log = logging.getLogger(__name__)

_TOO_HIGH = re.compile(r"Vocabulary size too high \((\d+)\)\. Please set it to a value <= (\d+)")
_TOO_LOW = re.compile(r"Vocabulary size is smaller than required_chars\. (\d+) vs (\d+)")
T = TypeVar("T")
FEW = 16  # sentences encoded or decoded one call each, in the calling thread


class Tokenizer:
    """One sentencepiece model: text ↔ subword ids, with pad=0, unk=1, bos=2, eos=3."""

    def __init__(self, path: Path) -> None:
        if not path.is_file():
            raise UserError(f"sentencepiece model {path} is missing; the run directory is incomplete")
        self.path = path
        self.sp = _processor(path.read_bytes(), str(path))
        if (self.sp.pad_id(), self.sp.unk_id(), self.sp.bos_id(), self.sp.eos_id()) != (PAD, UNK, BOS, EOS):
            raise UserError(
                f"{path} was not trained by nmt (special ids differ from pad=0 unk=1 bos=2 eos=3)"
            )

    def __len__(self) -> int:
        return self.sp.get_piece_size()

    @functools.cached_property
    def fingerprint(self) -> str:
        """sha256 of the vocabulary: every piece with its score and kind. A checkpoint records it to refuse a
        mismatched vocabulary; models trained alike have the same one, whatever else their files record."""
        sp, digest = self.sp, hashlib.sha256()
        for i in range(len(self)):
            kind = (sp.is_unknown(i), sp.is_control(i), sp.is_unused(i), sp.is_byte(i))
            digest.update(f"{sp.id_to_piece(i)}\t{sp.get_score(i)!r}\t{kind}\n".encode())
        return digest.hexdigest()

    @functools.cached_property
    def file_sha256(self) -> str:
        """sha256 of the model file: the fingerprint checkpoints recorded before it covered the pieces."""
        return hashlib.sha256(self.path.read_bytes()).hexdigest()

    @functools.cached_property
    def tag_ids(self) -> dict[str, int]:
        """The target-language tags of a multilingual vocabulary (nmt/data/language_tags.py), language → id;
        empty for a bilingual one. Search must never output them except where it forces one."""
        sp = self.sp
        pieces = (sp.id_to_piece(i) for i in range(len(self)))
        return {
            match.group(1): i
            for i, piece in enumerate(pieces)
            if sp.is_control(i) and (match := TAG.fullmatch(piece))
        }

    def encode(self, sentences: list[str], num_threads: int = -1) -> list[list[int]]:
        """Subword ids of each sentence, without bos/eos (encoded in `num_threads` threads; -1: all cores; a
        few sentences, such as a server's request holds, in this thread: starting threads would cost more)."""
        if len(sentences) <= FEW:
            return [self.sp.encode(sentence) for sentence in sentences]
        return self.sp.encode(sentences, num_threads=num_threads)

    def decode(self, ids: list[list[int]]) -> list[str]:
        """Detokenized text of each id sequence; pad/bos/eos are skipped, unknowns show as ' ⁇ '."""
        kept = [[i for i in seq if i not in (PAD, BOS, EOS)] for seq in ids]
        if len(kept) <= FEW:
            return [self.sp.decode(seq) for seq in kept]
        return self.sp.decode(kept)

    def pieces(self, ids: list[int]) -> list[str]:
        """Subword strings of the ids (one call into sentencepiece for all of them)."""
        return self.sp.id_to_piece(list(ids))

    def ids(self, pieces: list[str]) -> list[int]:
        """Subword ids of the subword strings (one call into sentencepiece for all of them)."""
        return self.sp.piece_to_id(list(pieces))


def _processor(model: bytes, name: str) -> spm.SentencePieceProcessor:
    """A sentencepiece processor of the serialized `model`; a damaged model (truncated, random bytes)
    raises UserError naming it."""
    try:
        processor = spm.SentencePieceProcessor(model_proto=model)
        if processor.get_piece_size() <= 4:
            raise RuntimeError("it holds no pieces besides the special ones")
    except (RuntimeError, OSError, TypeError) as err:
        detail = (str(err).splitlines() or ["unreadable"])[0][:120]
        raise UserError(
            f"{name} is not a usable sentencepiece model ({detail}); restore the run directory or train again"
        ) from err
    return processor


@dataclass(frozen=True)
class Tokenizers:
    """Source and target tokenizers (the same object when the vocabulary is joint)."""

    src: Tokenizer
    tgt: Tokenizer

    @property
    def joint(self) -> bool:
        return self.src.path == self.tgt.path

    @property
    def pad(self) -> int:
        """The padding id of both vocabularies (every tokenizer nmt loads has pad=0)."""
        return self.tgt.sp.pad_id()


def tokenizer_paths(run_dir: Path, joint: bool) -> tuple[Path, Path]:
    """Paths of the source and target sentencepiece models inside a run directory."""
    if joint:
        return run_dir / "spm.model", run_dir / "spm.model"
    return run_dir / "spm.src.model", run_dir / "spm.tgt.model"


def load_tokenizers(run_dir: Path, joint: bool) -> Tokenizers:
    """Load the tokenizers a run directory holds."""
    src_path, tgt_path = tokenizer_paths(run_dir, joint)
    src = Tokenizer(src_path)
    return Tokenizers(src, src if joint else Tokenizer(tgt_path))


def install_tokenizers(directory: Path, run_dir: Path, joint: bool) -> Tokenizers:
    """Copy the sentencepiece model(s) in `directory` (a cache entry) into `run_dir`; load them from there."""
    for path in dict.fromkeys(tokenizer_paths(run_dir, joint)):
        model = (directory / path.name).read_bytes()
        atomic_write(path, lambda handle, model=model: handle.write(model))
    return load_tokenizers(run_dir, joint)


def train_tokenizers(
    cfg: TokenizerConfig, src: Iterable[str], tgt: Iterable[str], run_dir: Path, languages: Sequence[str] = ()
) -> Tokenizers:
    """Train the sentencepiece model(s) on the source and target sentences and save them in `run_dir`; a
    joint model reserves a tag for each of `languages` (nmt/data/language_tags.py).

    `src` and `tgt` are iterated once per training attempt: lists, or re-iterable readers of a sample.
    """
    src_path, tgt_path = tokenizer_paths(run_dir, cfg.joint)
    if cfg.joint:
        train_sentencepiece(cfg, Joined((src, tgt)), src_path, languages)
    else:
        train_sentencepiece(cfg, src, src_path)
        train_sentencepiece(cfg, tgt, tgt_path)
    return load_tokenizers(run_dir, cfg.joint)


@dataclass(frozen=True)
class Joined:
    """The sentences of several re-iterables one after another, as often as iterated."""

    parts: tuple[Iterable[str], ...]

    def __iter__(self) -> Iterator[str]:
        return itertools.chain.from_iterable(self.parts)


def train_sentencepiece(
    cfg: TokenizerConfig, sentences: Iterable[str], path: Path, languages: Sequence[str] = ()
) -> None:
    """Train one model at `path`, with a tag for each of `languages`; shrink the vocabulary (or fail clearly)
    when the text is too small.

    The sentences stream into sentencepiece (iterated again if the vocabulary shrinks) and the model comes
    back in memory: no temporary file, so training the same sentences twice writes the same bytes. Training
    runs in a child process: sentencepiece's trainer keeps the heap it used (0.8 GiB for 1M sentences of
    WMT-like text) until its process ends, and training must not leave that to the training loop.
    """
    threads = _training_threads(cfg)  # decided here: the machine is this process's to judge
    tags = vocabulary_tags(languages)
    model, vocab_size = _in_child(functools.partial(_train_fitting, cfg, sentences, threads, tags))
    if vocab_size != cfg.vocab_size:
        log.warning(
            "tokenizer.vocab_size=%d is too large for this corpus; using %d", cfg.vocab_size, vocab_size
        )
    _processor(model, f"the trained tokenizer for {path}")  # what is saved must load
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
    program = f"from nmt.data.tokenizer import child_main; child_main({os.getpid()})"
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
    cfg: TokenizerConfig, sentences: Iterable[str], threads: int, tags: list[str]
) -> tuple[bytes, int]:
    """The model, and the vocabulary size it has: `cfg.vocab_size`, or the largest the text allows."""
    vocab_size = cfg.vocab_size
    for _ in range(2):
        try:
            return _train(cfg, sentences, vocab_size, threads, tags), vocab_size
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
    cfg: TokenizerConfig, sentences: Iterable[str], vocab_size: int, threads: int, tags: list[str]
) -> bytes:
    """The serialized model. `tags` become control symbols (ids 4, 5, … after pad, unk, bos, eos): pieces of
    their own that no text encodes to (a `>>fr<<` typed in a sentence stays text) and that decoding drops."""
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
        minloglevel=2,
        num_threads=threads,
    )
    return model.getvalue()
