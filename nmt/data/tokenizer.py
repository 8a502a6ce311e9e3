"""sentencepiece subword models: used to encode and decode every sentence (trained by
nmt/data/tokenizer_training.py, or imported with a vocabulary file of their own)."""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import sentencepiece as spm

from nmt.atomic_files import atomic_write
from nmt.data.language_tags import TAG
from nmt.data.special_tokens import BOS, EOS, PAD, UNK
from nmt.errors import UserError

FEW = 16  # sentences encoded or decoded one call each, in the calling thread


class Tokenizer:
    """One sentencepiece model: text ↔ subword ids, the model's own, with pad=0, unk=1, bos=2, eos=3 (a model
    nmt trained). `MappedTokenizer` is the same with ids of a vocabulary file (an imported model's)."""

    specials: tuple[int, ...] = (PAD, BOS, EOS)  # ids that stand for no text: decoding drops them
    markers: tuple[
        str, ...
    ] = ()  # pieces only a source holds (terminology markers): search never outputs them

    def __init__(self, path: Path, markers: Sequence[str] = ()) -> None:
        if not path.is_file():
            raise UserError(f"sentencepiece model {path} is missing; the run directory is incomplete")
        self.path, self.markers = path, tuple(markers)
        self.sp = processor_of(path.read_bytes(), str(path))
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
        for i in range(sp.get_piece_size()):  # the sentencepiece model's pieces, whatever ids a subclass maps
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
        kept = [[i for i in seq if i not in self.specials] for seq in ids]
        if len(kept) <= FEW:
            return [self.sp.decode(seq) for seq in kept]
        return self.sp.decode(kept)

    def normalize(self, text: str) -> str:
        """`text` as sentencepiece normalises it before segmenting (NFKC, extra spaces removed)."""
        return " ".join(self.sp.normalize(text).replace(SPACER, " ").split())

    def pieces(self, ids: list[int]) -> list[str]:
        """Subword strings of the ids (one call into sentencepiece for all of them)."""
        return self.sp.id_to_piece(list(ids))

    def ids(self, pieces: list[str]) -> list[int]:
        """Subword ids of the subword strings (one call into sentencepiece for all of them)."""
        return self.sp.piece_to_id(list(pieces))

    @property
    def vocabulary_path(self) -> Path:
        """The file that gives the ids: the sentencepiece model itself."""
        return self.path

    @property
    def banned(self) -> tuple[int, ...]:
        """The ids search never outputs: the specials but eos, and the `markers` the vocabulary holds (a run
        trained with terminology annotation reads them in its source and was never taught to write them)."""
        markers = tuple(i for i in self.ids(list(self.markers)) if i != UNK) if self.markers else ()
        return tuple(i for i in self.specials if i != EOS) + markers

    def is_control(self, i: int) -> bool:
        """Whether id `i` stands for no text (a special id, a language tag)."""
        return self.sp.is_control(i)

    def surfaces(self, ids: list[int]) -> list[str]:
        """The text each of the ids (no specials among them) decodes to, in `decode`'s output."""
        return [piece.surface for piece in self.sp.decode_ids_as_proto(ids).pieces]


class MappedTokenizer(Tokenizer):
    """A sentencepiece model whose pieces map to ids through a vocabulary file (`vocab.json`, piece → id), as
    a transformers MarianMT model's do: the ids are the vocabulary's, not sentencepiece's (a piece the file
    lacks is unknown). nmt keeps the vocabulary of an imported model with pad=0, unk=1, eos=3 and no bos: id 2
    is a piece, and the decoder starts from pad (model.transformer.decoder_start). Text and ids are as
    transformers' `MarianTokenizer` makes them: a leading `>>xx<<` is the language tag's id, and decoded text
    has every `▁` as a space, stripped."""

    specials = (PAD, EOS)

    def __init__(self, path: Path, vocabulary: Path) -> None:
        if not path.is_file():
            raise UserError(f"sentencepiece model {path} is missing; the run directory is incomplete")
        self.path, self.vocabulary = path, vocabulary
        self.sp = processor_of(path.read_bytes(), str(path))
        self.vocab = read_vocabulary(vocabulary)
        self.index = {piece: i for i, piece in enumerate(self.vocab)}

    def __len__(self) -> int:
        return len(self.vocab)

    @functools.cached_property
    def fingerprint(self) -> str:
        """sha256 of the segmentation (the sentencepiece model's pieces) and of the vocabulary's pieces."""
        digest = hashlib.sha256(super().fingerprint.encode())
        digest.update("\n".join(self.vocab).encode())
        return digest.hexdigest()

    @functools.cached_property
    def tag_ids(self) -> dict[str, int]:
        return {match.group(1): i for i, piece in enumerate(self.vocab) if (match := TAG.fullmatch(piece))}

    def encode(self, sentences: list[str], num_threads: int = -1) -> list[list[int]]:
        tags, texts = zip(*map(_leading_tag, sentences), strict=True) if sentences else ((), ())
        if len(texts) <= FEW:
            pieces = [self.sp.encode(text, out_type=str) for text in texts]
        else:
            pieces = self.sp.encode(list(texts), out_type=str, num_threads=num_threads)
        return [self.ids([*tag, *found]) for tag, found in zip(tags, pieces, strict=True)]

    def decode(self, ids: list[list[int]]) -> list[str]:
        texts = [
            self.sp.decode_pieces(self.pieces([i for i in seq if i not in self.specials])) for seq in ids
        ]
        return [text.replace(SPACER, " ").strip() for text in texts]

    def pieces(self, ids: list[int]) -> list[str]:
        return [self.vocab[i] for i in ids]

    def ids(self, pieces: list[str]) -> list[int]:
        return [self.index.get(piece, UNK) for piece in pieces]

    @property
    def vocabulary_path(self) -> Path:
        return self.vocabulary

    def is_control(self, i: int) -> bool:
        return i in self.specials or TAG.fullmatch(self.vocab[i]) is not None

    def surfaces(self, ids: list[int]) -> list[str]:
        found = self.sp.decode_pieces_as_proto(self.pieces(ids)).pieces
        return [piece.surface.replace(SPACER, " ") for piece in found]


SPACER = "▁"  # sentencepiece's mark of a word's first piece


def _leading_tag(text: str) -> tuple[list[str], str]:
    """A leading language tag `>>xx<<` of `text` apart from the rest, as transformers' MarianTokenizer takes
    it (its `remove_language_code`)."""
    end = text.find("<<") if text.startswith(">>") else -1
    return ([text[: end + 2]], text[end + 2 :]) if end != -1 else ([], text)


def read_vocabulary(path: Path) -> list[str]:
    """The pieces of a vocabulary file (JSON, piece → id, the ids 0 … n − 1 each once) in id order; a
    UserError names a missing or malformed file."""
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"vocabulary {path} is missing; the model directory is incomplete") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise UserError(f"{path} is not a JSON vocabulary ({str(err)[:100]}); restore the file") from err
    if not isinstance(found, dict) or not all(isinstance(i, int) for i in found.values()):
        raise UserError(f"{path} is not a vocabulary: it must map each piece to an integer id")
    if sorted(found.values()) != list(range(len(found))) or len(found) <= EOS:
        raise UserError(f"{path} does not number its {len(found)} pieces 0 … {len(found) - 1} once each")
    pieces = [""] * len(found)
    for piece, i in found.items():
        pieces[i] = piece
    return pieces


def write_vocabulary(path: Path, pieces: Sequence[str]) -> None:
    """A vocabulary file of `pieces` in id order (what `read_vocabulary` reads)."""
    text = json.dumps({piece: i for i, piece in enumerate(pieces)}, ensure_ascii=False, indent=0)
    atomic_write(path, lambda handle: handle.write(text.encode()))


def processor_of(
    model: bytes, name: str, fix: str = "restore the run directory or train again"
) -> spm.SentencePieceProcessor:
    """A sentencepiece processor of the serialized `model`; a damaged model (truncated, random bytes)
    raises UserError naming it and the `fix`."""
    try:
        processor = spm.SentencePieceProcessor(model_proto=model)
        if processor.get_piece_size() <= 4:
            raise RuntimeError("it holds no pieces besides the special ones")
    except (RuntimeError, OSError, TypeError) as err:
        detail = (str(err).splitlines() or ["unreadable"])[0][:120]
        raise UserError(f"{name} is not a usable sentencepiece model ({detail}); {fix}") from err
    return processor


@dataclass(frozen=True)
class Tokenizers:
    """Source and target tokenizers (the same object when the vocabulary is joint)."""

    src: Tokenizer
    tgt: Tokenizer

    @property
    def joint(self) -> bool:
        """Whether both sides have one vocabulary (one set of ids; a Marian model's two sentencepiece models
        may segment them)."""
        return self.src.vocabulary_path == self.tgt.vocabulary_path

    @property
    def pad(self) -> int:
        """The padding id of both vocabularies (every tokenizer nmt loads has pad=0)."""
        return PAD


def tokenizer_paths(run_dir: Path, joint: bool, vocabulary: str = "sentencepiece") -> tuple[Path, Path]:
    """Paths of the source and target sentencepiece models inside a run directory (`vocabulary`: the
    layout, tokenizer.vocabulary)."""
    if vocabulary == "marian":
        return run_dir / "source.spm", run_dir / "target.spm"
    if joint:
        return run_dir / "spm.model", run_dir / "spm.model"
    return run_dir / "spm.src.model", run_dir / "spm.tgt.model"


def vocabulary_paths(run_dir: Path, joint: bool) -> tuple[Path, Path]:
    """Paths of the source and target vocabulary files of the marian layout (transformers' names)."""
    return run_dir / "vocab.json", run_dir / ("vocab.json" if joint else "target_vocab.json")


def tokenizer_files(run_dir: Path, joint: bool, vocabulary: str = "sentencepiece") -> list[Path]:
    """Every file of a run directory's tokenizers, each once: the sentencepiece models, and the marian
    layout's vocabulary files."""
    found = list(tokenizer_paths(run_dir, joint, vocabulary))
    if vocabulary == "marian":
        found += vocabulary_paths(run_dir, joint)
    return list(dict.fromkeys(found))


def load_tokenizers(
    run_dir: Path, joint: bool, vocabulary: str = "sentencepiece", markers: Sequence[str] = ()
) -> Tokenizers:
    """Load the tokenizers a run directory holds (`vocabulary`: their layout, tokenizer.vocabulary; `markers`:
    the terminology markers of a run trained with annotation, never output)."""
    src_path, tgt_path = tokenizer_paths(run_dir, joint, vocabulary)
    if vocabulary == "marian":
        src_vocabulary, tgt_vocabulary = vocabulary_paths(run_dir, joint)
        return Tokenizers(
            MappedTokenizer(src_path, src_vocabulary), MappedTokenizer(tgt_path, tgt_vocabulary)
        )
    src = Tokenizer(src_path, markers)
    return Tokenizers(src, src if joint else Tokenizer(tgt_path, markers))


def install_tokenizers(directory: Path, run_dir: Path, joint: bool) -> Tokenizers:
    """Copy the sentencepiece model(s) in `directory` (a cache entry) into `run_dir`; load them from there."""
    for path in dict.fromkeys(tokenizer_paths(run_dir, joint)):
        model = (directory / path.name).read_bytes()
        atomic_write(path, lambda handle, model=model: handle.write(model))
    return load_tokenizers(run_dir, joint)
