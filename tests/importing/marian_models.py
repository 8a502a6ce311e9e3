"""Tiny MarianMT models written by transformers' own classes, as OPUS-MT's are laid out: two sentencepiece
models trained on a few lines, a vocab.json numbering eos 0, unk 1 and pad last (target_vocab.json beside it
where the vocabularies are separate), a MarianConfig and MarianMTModel saved with save_pretrained, a
MarianTokenizer saved beside them, a generation config with beams and a model card with a licence."""

from __future__ import annotations

import io
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import sentencepiece as spm
import torch

transformers = pytest.importorskip("transformers")

PARTNERS = dict(
    haus="house",
    katze="cat",
    hund="dog",
    baum="tree",
    auto="car",
    buch="book",
    tisch="table",
    stuhl="chair",
    fenster="window",
    garten="garden",
    blume="flower",
    vogel="bird",
    fisch="fish",
    brot="bread",
    milch="milk",
)  # each source word's translation
SOURCE_WORDS, TARGET_WORDS = list(PARTNERS), list(PARTNERS.values())
STEPS = 200


@dataclass(frozen=True)
class Variant:
    activation: str = "swish"
    separate: bool = False  # separate source and target vocabularies (target_vocab.json)
    tied: bool = True  # lm_head is the decoder's embedding
    scale: bool = True
    seed: int = 0
    target_bytes: bool = False  # target.spm falls back to byte pieces (<0xE3>), source.spm does not

    @property
    def name(self) -> str:
        return (
            f"{self.activation}-{'separate' if self.separate else 'shared'}{'' if self.tied else '-untied'}"
        )


def sentences(count: int, words: list[str], seed: int) -> list[str]:
    draw = random.Random(seed)
    return [" ".join(draw.choices(words, k=draw.randint(2, 7))) for _ in range(count)]


def train_spm(lines: list[str], size: int, byte_fallback: bool = False) -> bytes:
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_writer=model,
        vocab_size=size,
        model_type="unigram",
        character_coverage=1.0,
        hard_vocab_limit=False,
        byte_fallback=byte_fallback,
        num_threads=1,
        minloglevel=2,
    )
    return model.getvalue()


def pieces_of(model: Path) -> list[str]:
    sp = spm.SentencePieceProcessor(model_file=str(model))
    return [
        sp.id_to_piece(i) for i in range(sp.get_piece_size()) if not (sp.is_control(i) or sp.is_unknown(i))
    ]


def vocab_of(*models: Path) -> dict[str, int]:
    """Marian's layout: eos 0, unk 1, the pieces, pad last."""
    pieces = ["</s>", "<unk>", *dict.fromkeys(piece for model in models for piece in pieces_of(model))]
    return {piece: i for i, piece in enumerate([*pieces, "<pad>"])}


def padded(vocab: dict[str, int], size: int) -> dict[str, int]:
    """`vocab` with unused pieces before pad up to `size`: config.json has one pad id for both
    vocabularies."""
    pieces = [piece for piece in vocab if piece != "<pad>"]
    pieces += [f"<unused{i}>" for i in range(size - 1 - len(pieces))]
    return {piece: i for i, piece in enumerate([*pieces, "<pad>"])}


def word_pairs(count: int, seed: int) -> tuple[list[str], list[str]]:
    """Sources and their translations: each word's partner, in reverse order."""
    lines = sentences(count, SOURCE_WORDS, seed)
    return lines, [" ".join(PARTNERS[word] for word in reversed(line.split())) for line in lines]


def train_briefly(model: Any, tokenizer: Any, steps: int = STEPS) -> None:
    """A few Adam steps of transformers' own loss on word pairs: outputs of varied length that end with eos,
    far from the ties of a random model."""
    sources, targets = word_pairs(256, 3)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    model.train()
    for step in range(steps):
        rows = slice(32 * (step % 8), 32 * (step % 8 + 1))
        batch = tokenizer(sources[rows], text_target=targets[rows], return_tensors="pt", padding=True)
        batch["labels"][batch["labels"] == tokenizer.pad_token_id] = -100
        model(**batch).loss.backward()
        optimizer.step()
        optimizer.zero_grad()


def write_marian(directory: Path, variant: Variant = Variant(), steps: int = STEPS) -> Path:
    """A MarianMT model directory of `variant`, trained for `steps` with a non-zero final logits bias."""
    directory.mkdir(parents=True)
    (directory / "source.spm").write_bytes(train_spm(sentences(300, SOURCE_WORDS, 1), 40))
    target = train_spm(
        sentences(300, TARGET_WORDS, 2), 300 if variant.target_bytes else 40, variant.target_bytes
    )
    (directory / "target.spm").write_bytes(target)
    if variant.separate:
        src_vocab, tgt_vocab = vocab_of(directory / "source.spm"), vocab_of(directory / "target.spm")
        src_vocab, tgt_vocab = (
            padded(vocab, max(len(src_vocab), len(tgt_vocab))) for vocab in (src_vocab, tgt_vocab)
        )
        (directory / "target_vocab.json").write_text(json.dumps(tgt_vocab), encoding="utf-8")
    else:
        src_vocab = tgt_vocab = vocab_of(directory / "source.spm", directory / "target.spm")
    (directory / "vocab.json").write_text(json.dumps(src_vocab), encoding="utf-8")
    pad = tgt_vocab["<pad>"]
    config = transformers.MarianConfig(
        vocab_size=len(src_vocab),
        decoder_vocab_size=len(tgt_vocab),
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        max_position_embeddings=64,
        activation_function=variant.activation,
        dropout=0.0,
        attention_dropout=0.0,
        activation_dropout=0.0,
        scale_embedding=variant.scale,
        share_encoder_decoder_embeddings=not variant.separate,
        tie_word_embeddings=variant.tied,
        pad_token_id=pad,
        eos_token_id=0,
        decoder_start_token_id=pad,
        forced_eos_token_id=0,
    )
    torch.manual_seed(variant.seed)
    model = transformers.MarianMTModel(config)
    model.final_logits_bias.normal_(0.0, 0.5)  # a buffer transformers never trains: it stays non-zero
    tokenizer = transformers.MarianTokenizer(
        source_spm=str(directory / "source.spm"),
        target_spm=str(directory / "target.spm"),
        vocab=str(directory / "vocab.json"),
        target_vocab_file=str(directory / "target_vocab.json") if variant.separate else None,
        separate_vocabs=variant.separate,
        source_lang="de",
        target_lang="en",
    )
    train_briefly(model, tokenizer, steps)
    model.eval().save_pretrained(directory)
    model.generation_config = transformers.GenerationConfig(
        decoder_start_token_id=pad,
        eos_token_id=0,
        pad_token_id=pad,
        forced_eos_token_id=0,
        bad_words_ids=[[pad]],
        num_beams=4,
        max_length=64,
    )
    model.generation_config.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    (directory / "README.md").write_text("---\nlicense: cc-by-4.0\n---\n# a tiny Marian model\n")
    return directory
