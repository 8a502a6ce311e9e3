"""sentencepiece subword models: trained on the training split, used to encode and decode every sentence."""

from __future__ import annotations

import hashlib
import logging
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

import sentencepiece as spm

from nmt.config import TokenizerConfig
from nmt.errors import UserError
from nmt.files import atomic_write

log = logging.getLogger(__name__)

PAD, UNK, BOS, EOS = 0, 1, 2, 3
_TOO_HIGH = re.compile(r"Vocabulary size too high \((\d+)\)\. Please set it to a value <= (\d+)")
_TOO_LOW = re.compile(r"Vocabulary size is smaller than required_chars\. (\d+) vs (\d+)")


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

    @property
    def fingerprint(self) -> str:
        """sha256 of the model file: a checkpoint records it to refuse a mismatched vocabulary."""
        return hashlib.sha256(self.path.read_bytes()).hexdigest()

    def encode(self, sentences: list[str]) -> list[list[int]]:
        """Subword ids of each sentence, without bos/eos."""
        return self.sp.encode(sentences)

    def decode(self, ids: list[list[int]]) -> list[str]:
        """Detokenized text of each id sequence; pad/bos/eos are skipped, unknowns show as ' ⁇ '."""
        return self.sp.decode([[i for i in seq if i not in (PAD, BOS, EOS)] for seq in ids])

    def pieces(self, ids: list[int]) -> list[str]:
        """Subword strings of the ids, for plot labels."""
        return [self.sp.id_to_piece(i) for i in ids]


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


def train_tokenizers(cfg: TokenizerConfig, src: list[str], tgt: list[str], run_dir: Path) -> Tokenizers:
    """Train the sentencepiece model(s) on the training sentences and save them in `run_dir`."""
    src_path, tgt_path = tokenizer_paths(run_dir, cfg.joint)
    if cfg.joint:
        train_sentencepiece(cfg, src + tgt, src_path)
    else:
        train_sentencepiece(cfg, src, src_path)
        train_sentencepiece(cfg, tgt, tgt_path)
    return load_tokenizers(run_dir, cfg.joint)


def train_sentencepiece(cfg: TokenizerConfig, sentences: list[str], path: Path) -> None:
    """Train one model at `path`; shrink the vocabulary (or fail clearly) when the text is too small."""
    vocab_size = cfg.vocab_size
    with tempfile.TemporaryDirectory() as tmp:
        text = Path(tmp) / "train.txt"
        text.write_text("\n".join(sentences) + "\n", encoding="utf-8")
        for _ in range(2):
            try:
                _train(cfg, text, Path(tmp) / "spm", vocab_size)
                break
            except RuntimeError as err:
                if low := _TOO_LOW.search(str(err)):
                    raise UserError(
                        f"tokenizer.vocab_size={vocab_size} is smaller than the {low.group(2)} pieces this "
                        f"corpus needs (its characters and the special tokens); raise it or lower "
                        f"tokenizer.character_coverage"
                    ) from err
                match = _TOO_HIGH.search(str(err))
                if not match:
                    raise UserError(f"sentencepiece training failed: {str(err).splitlines()[-1]}") from err
                limit = int(match.group(2))
                if not cfg.auto_shrink:
                    raise UserError(
                        f"tokenizer.vocab_size={cfg.vocab_size} is too large for this corpus "
                        f"(at most {limit}); "
                        f"lower it or set tokenizer.auto_shrink=true"
                    ) from err
                log.warning(
                    "tokenizer.vocab_size=%d is too large for this corpus; using %d", vocab_size, limit
                )
                vocab_size = limit
        model = (Path(tmp) / "spm.model").read_bytes()
        _processor(model, f"the trained tokenizer for {path}")  # a model cut short (a full disk) is not saved
        atomic_write(path, lambda handle: handle.write(model))


def _train(cfg: TokenizerConfig, text: Path, prefix: Path, vocab_size: int) -> None:
    spm.SentencePieceTrainer.train(
        input=str(text),
        model_prefix=str(prefix),
        vocab_size=vocab_size,
        model_type=cfg.model_type,
        character_coverage=cfg.character_coverage,
        input_sentence_size=cfg.max_sentences,
        shuffle_input_sentence=True,
        pad_id=PAD,
        unk_id=UNK,
        bos_id=BOS,
        eos_id=EOS,
        minloglevel=2,
        num_threads=4,
    )
