"""`nmt export --to huggingface`: a trained Transformer run as a Hugging Face transformers model directory,
which `AutoModelForSeq2SeqLM.from_pretrained` and `AutoTokenizer.from_pretrained` load and whose greedy
`generate` gives our greedy output token for token.

A pre-norm run becomes a `PegasusForConditionalGeneration` (pre-norm layers with final layer norms, positions
stored with the weights: ours, as they are), a post-norm run a `MarianMTModel` (post-norm layers, no final
norms). One mapping (nmt/export/hf_names.py, which `nmt import` reads back with) places every weight; for
Marian it permutes the hidden dimensions into Marian's layout of positions, which changes no output. The
tokenizer is a `MarianTokenizer` over the run's sentencepiece model with its pieces in id order as the
vocabulary, so that its ids are ours by construction; an imported run's (tokenizer.vocabulary=marian) has its
own source.spm, target.spm and vocab.json (and target_vocab.json where the vocabularies are separate).

```
OUT_DIR/config.json  generation_config.json  model.safetensors  README.md (the model card)
        source.spm  target.spm (both the run's spm.model)  vocab.json  tokenizer_config.json …
```
"""

from __future__ import annotations

import shutil
import warnings
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from nmt.config.schema import Config, max_source_len
from nmt.data.special_tokens import BOS, EOS, PAD, UNK
from nmt.data.tokenizer import write_vocabulary
from nmt.decode.exported import output_limit
from nmt.decode.trained_run import TrainedRun
from nmt.errors import UserError
from nmt.export.directories import check_out_dir, load_transformer_run, staged_directory
from nmt.export.hf_names import hf_state_dict
from nmt.export.model_card import model_card
from nmt.models.config import ModelConfig
from nmt.models.transformer import TransformerSeq2Seq

HF_CLASSES = {"pre": "PegasusForConditionalGeneration", "post": "MarianMTModel"}  # by model.transformer.norm
NEVER = -1e9  # the bias of a language tag's logit: never generated, unless forced


def import_transformers() -> ModuleType:
    """The transformers package, or a UserError saying how to install it."""
    try:
        import transformers
    except ImportError:
        raise UserError(
            "transformers is not installed; install it with `pip install 'nmt[huggingface]'`"
        ) from None
    return transformers


def export_run(run_dir: Path, out_dir: Path, quantization: str = "float32", which: str | None = None) -> Path:
    """Write the run's checkpoint `which` (best, last or averaged; default: the run's choice) as a
    transformers model, tokenizer, generation settings and model card into `out_dir` (which must not exist or
    be empty); returns `out_dir`."""
    if quantization != "float32":
        raise UserError(
            f"--quantization {quantization}: a huggingface export is float32; load it with "
            f"`from_pretrained(..., dtype=torch.float16)` for half precision"
        )
    check_out_dir(out_dir)
    transformers = import_transformers()
    run, ours = load_transformer_run(run_dir, which, "Hugging Face transformers")
    if not run.tokenizers.joint and run.cfg.tokenizer.vocabulary == "sentencepiece":
        raise UserError(
            f"{run_dir} has separate source and target vocabularies (tokenizer.joint=false); transformers' "
            f"Pegasus and Marian models with our tokenizer need one: train with tokenizer.joint=true"
        )
    tags = sorted(run.tokenizers.src.tag_ids.values()) if run.cfg.data.directions.tagged else []
    tokenizers = run.tokenizers
    tgt_size = None if tokenizers.joint else len(tokenizers.tgt)
    model = hf_model(transformers, ours, run.cfg, len(tokenizers.src), tgt_size, tags, tokenizers.tgt.banned)
    with staged_directory(out_dir) as tmp:
        model.save_pretrained(tmp)
        save_tokenizer(transformers, run, tmp)
        card = model_card(run, type(model).__name__, out_dir.name, model.generation_config.max_length)
        (tmp / "README.md").write_text(card, encoding="utf-8")
    return out_dir


def hf_model(
    transformers: ModuleType,
    ours: TransformerSeq2Seq,
    cfg: Config,
    vocab_size: int,
    tgt_vocab_size: int | None = None,
    tags: Sequence[int] = (),
    banned: Sequence[int] = (PAD, BOS),
) -> Any:
    """Our model (built from `cfg` with vocabularies of `vocab_size` and `tgt_vocab_size`, none where one
    vocabulary is joint) as a transformers model with generation settings that never generate the `banned`
    ids nor the language `tags` (the decoder tag of a multilingual run is forced by `generate(…,
    forced_bos_token_id=…)`): greedy search, or the run's beam search where it scores beams as transformers
    does (search.length_normalization=power: an imported model's). A model this version of transformers
    cannot hold (it loads a weight into a place shared with another) is refused."""
    arch, search = cfg.model.transformer_settings, cfg.search
    norm = arch.norm
    config = hf_config(transformers, cfg.model, vocab_size, tgt_vocab_size)
    model = getattr(transformers, HF_CLASSES[norm])(config).eval()
    weights = hf_state_dict(
        ours.state_dict(), cfg.model, tgt_vocab_size or vocab_size, tgt_vocab_size is None
    )
    model.load_state_dict(weights, strict=True)
    held = model.state_dict()
    shared = [name for name, tensor in weights.items() if not torch.equal(held[name], tensor)]
    if shared:
        raise UserError(
            f"transformers {transformers.__version__} shares {shared[0]} with another weight in "
            f"{HF_CLASSES[norm]}, but this run has separate ones (model.tie_embeddings=false); export it "
            f"with transformers 5 (`pip install 'transformers>=5'`)"
        )
    limit = output_limit(max_source_len(cfg), search)
    forced = cfg.data.directions.forced_tokens
    beams = search.length_normalization == "power"  # transformers' scoring: the run's beam search
    model.generation_config = transformers.GenerationConfig(
        decoder_start_token_id=config.decoder_start_token_id,
        bos_token_id=config.bos_token_id,
        eos_token_id=EOS,
        pad_token_id=PAD,
        forced_eos_token_id=EOS,
        suppress_tokens=list(banned),
        sequence_bias=[[[tag], NEVER] for tag in tags] or None,  # suppress_tokens refuses a forced token
        num_beams=search.beam_size if beams else 1,
        length_penalty=search.length_penalty if beams else 1.0,
        max_length=min(arch.max_positions, limit + 2 + forced),  # decoder start, tag, `limit` tokens, eos
    )
    return model


def hf_config(
    transformers: ModuleType, model: ModelConfig, vocab_size: int, tgt_vocab_size: int | None = None
) -> Any:
    """The `PegasusConfig` (pre-norm) or `MarianConfig` (post-norm) of our model with vocabularies of
    `vocab_size` and `tgt_vocab_size` (none: one joint vocabulary): our sizes, dropouts, activation, special
    ids (Pegasus' defaults differ: decoder start 0, eos 1; a decoder started from pad has no bos), embedding
    scale and sharing."""
    arch, tied = model.transformer_settings, model.tie_embeddings
    start = PAD if arch.decoder_start == "pad" else BOS
    settings = dict(
        vocab_size=vocab_size,
        d_model=arch.d_model,
        max_position_embeddings=arch.max_positions,
        encoder_layers=model.encoder_layers,
        decoder_layers=model.decoder_layers,
        encoder_attention_heads=arch.heads,
        decoder_attention_heads=arch.heads,
        encoder_ffn_dim=arch.ff_dim,
        decoder_ffn_dim=arch.ff_dim,
        activation_function=arch.activation,
        dropout=model.dropout,
        activation_dropout=model.dropout,
        attention_dropout=arch.attention_dropout,
        encoder_layerdrop=0.0,
        decoder_layerdrop=0.0,
        scale_embedding=arch.scale_embeddings,
        tie_word_embeddings=tied,
        pad_token_id=PAD,
        bos_token_id=None if start == PAD else BOS,
        eos_token_id=EOS,
        decoder_start_token_id=start,
        forced_eos_token_id=None,
        is_encoder_decoder=True,  # the generation config forces eos
    )
    if arch.norm == "pre":
        return transformers.PegasusConfig(**settings)
    shared = model.shares_embeddings(joint_vocab=tgt_vocab_size is None)
    return transformers.MarianConfig(
        **settings, share_encoder_decoder_embeddings=shared, decoder_vocab_size=tgt_vocab_size or vocab_size
    )


def save_tokenizer(transformers: ModuleType, run: TrainedRun, directory: Path) -> None:
    """A `MarianTokenizer` in `directory`: the run's sentencepiece model as its source and target model and
    the pieces in id order as its vocabulary (ids equal ours), or an imported run's own models and
    vocabularies; eos appended to every source as we do; inputs cut at our source limit when called with
    truncation=True; no clean-up of spaces around punctuation."""
    tokenizer, tokenizers = run.tokenizers.src, run.tokenizers
    marian = run.cfg.tokenizer.vocabulary == "marian"
    shutil.copyfile(tokenizer.path, directory / "source.spm")
    shutil.copyfile(tokenizers.tgt.path if marian else tokenizer.path, directory / "target.spm")
    for side, name in ((tokenizers.src, "vocab.json"), (tokenizers.tgt, "target_vocab.json")):
        if name == "vocab.json" or not tokenizers.joint:
            write_vocabulary(directory / name, side.pieces(list(range(len(side)))))
    pad, unk, eos = tokenizer.pieces([PAD, UNK, EOS])
    multilingual = run.cfg.data.directions.tagged
    with warnings.catch_warnings():  # it recommends sacremoses, for a normaliser it never calls
        warnings.filterwarnings("ignore", message=".*sacremoses")
        hf_tokenizer = transformers.MarianTokenizer(
            source_spm=str(directory / "source.spm"),
            target_spm=str(directory / "target.spm"),
            vocab=str(directory / "vocab.json"),
            target_vocab_file=None if tokenizers.joint else str(directory / "target_vocab.json"),
            separate_vocabs=not tokenizers.joint,
            source_lang=None if multilingual else run.cfg.data.src_lang,
            target_lang=None if multilingual else run.cfg.data.tgt_lang,
            pad_token=pad,
            unk_token=unk,
            eos_token=eos,
            model_max_length=max_source_len(run.cfg) + 1,
            clean_up_tokenization_spaces=False,
        )
    hf_tokenizer.save_pretrained(directory)
