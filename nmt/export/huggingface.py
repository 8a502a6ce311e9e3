"""`nmt export --to huggingface`: a trained Transformer run as a Hugging Face transformers model directory,
which `AutoModelForSeq2SeqLM.from_pretrained` and `AutoTokenizer.from_pretrained` load and whose greedy
`generate` gives our greedy output token for token.

A pre-norm run becomes a `PegasusForConditionalGeneration` (pre-norm layers with final layer norms, positions
stored with the weights: ours, as they are), a post-norm run a `MarianMTModel` (post-norm layers, no final
norms). Marian never stores its sinusoidal positions: it rebuilds them on loading with sin in the first half
of the dimensions and cos in the second, where ours interleave them, so for Marian the hidden dimensions are
permuted into that layout (`halves_order`), which changes no output. One mapping (`hf_state_dict`) places
every weight; the tokenizer is a `MarianTokenizer` over the run's sentencepiece model with its pieces in id
order as the vocabulary, so that its ids are ours by construction.

```
OUT_DIR/config.json  generation_config.json  model.safetensors  README.md (the model card)
        source.spm  target.spm (both the run's spm.model)  vocab.json  tokenizer_config.json …
```
"""

from __future__ import annotations

import json
import shutil
import warnings
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
from torch import Tensor

from nmt.config.schema import Config, max_source_len
from nmt.data.special_tokens import BOS, EOS, PAD, UNK
from nmt.decode.exported import output_limit
from nmt.decode.trained_run import TrainedRun
from nmt.errors import UserError
from nmt.export.directories import check_out_dir, load_transformer_run, staged_directory
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
    if not run.tokenizers.joint:
        raise UserError(
            f"{run_dir} has separate source and target vocabularies (tokenizer.joint=false); transformers' "
            f"Pegasus and Marian models with our tokenizer need one: train with tokenizer.joint=true"
        )
    tags = sorted(run.tokenizers.src.tag_ids.values())
    model = hf_model(transformers, ours, run.cfg, len(run.tokenizers.src), tags)
    with staged_directory(out_dir) as tmp:
        model.save_pretrained(tmp)
        save_tokenizer(transformers, run, tmp)
        card = model_card(run, type(model).__name__, out_dir.name, model.generation_config.max_length)
        (tmp / "README.md").write_text(card, encoding="utf-8")
    return out_dir


def hf_model(
    transformers: ModuleType, ours: TransformerSeq2Seq, cfg: Config, vocab_size: int, tags: Sequence[int] = ()
) -> Any:
    """Our model (built from `cfg` with a joint vocabulary of `vocab_size`) as a transformers model with
    generation settings for greedy search, never generating the language `tags` (the decoder tag of a
    multilingual run is forced by `generate(…, forced_bos_token_id=…)`); refuses a model this version of
    transformers cannot hold (it loads a weight into a place shared with another)."""
    arch = cfg.model.transformer_settings
    norm = arch.norm
    model = getattr(transformers, HF_CLASSES[norm])(hf_config(transformers, cfg.model, vocab_size)).eval()
    weights = hf_state_dict(ours, pre_norm=norm == "pre")
    model.load_state_dict(weights, strict=True)
    held = model.state_dict()
    shared = [name for name, tensor in weights.items() if not torch.equal(held[name], tensor)]
    if shared:
        raise UserError(
            f"transformers {transformers.__version__} shares {shared[0]} with another weight in "
            f"{HF_CLASSES[norm]}, but this run has separate ones (model.tie_embeddings=false); export it "
            f"with transformers 5 (`pip install 'transformers>=5'`)"
        )
    limit = output_limit(max_source_len(cfg), cfg.search)
    forced = cfg.data.directions.forced_tokens
    model.generation_config = transformers.GenerationConfig(
        decoder_start_token_id=BOS,
        bos_token_id=BOS,
        eos_token_id=EOS,
        pad_token_id=PAD,
        forced_eos_token_id=EOS,
        suppress_tokens=[PAD, BOS],
        sequence_bias=[[[tag], NEVER] for tag in tags] or None,  # suppress_tokens refuses a forced token
        num_beams=1,
        max_length=min(arch.max_positions, limit + 2 + forced),  # decoder start, tag, `limit` tokens, eos
    )
    return model


def hf_config(transformers: ModuleType, model: ModelConfig, vocab_size: int) -> Any:
    """The `PegasusConfig` (pre-norm) or `MarianConfig` (post-norm) of our model with a joint vocabulary of
    `vocab_size`: our sizes, dropouts, special ids (Pegasus' defaults differ: decoder start 0, eos 1) and
    embeddings scaled by sqrt(d_model)."""
    arch, tied = model.transformer_settings, model.tie_embeddings
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
        activation_function="relu",
        dropout=model.dropout,
        activation_dropout=model.dropout,
        attention_dropout=arch.attention_dropout,
        encoder_layerdrop=0.0,
        decoder_layerdrop=0.0,
        scale_embedding=True,
        tie_word_embeddings=tied,
        pad_token_id=PAD,
        bos_token_id=BOS,
        eos_token_id=EOS,
        decoder_start_token_id=BOS,
        forced_eos_token_id=None,
        is_encoder_decoder=True,  # the generation config forces eos
    )
    if arch.norm == "pre":
        return transformers.PegasusConfig(**settings)
    return transformers.MarianConfig(
        **settings, share_encoder_decoder_embeddings=tied, decoder_vocab_size=vocab_size
    )


def halves_order(d_model: int) -> Tensor:
    """The permutation of hidden dimensions that turns our position layout (sin on even dimensions, cos on odd
    ones) into transformers' Marian layout (sin in the first half, cos in the second): [0, 2, …, 1, 3, …]."""
    return torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])


def hf_state_dict(model: TransformerSeq2Seq, pre_norm: bool) -> dict[str, Tensor]:
    """Our weights under the names of transformers' Pegasus (pre-norm) or Marian (post-norm), which differ
    only in Pegasus' final layer norms; every name the transformers model has is given (tied ones all name the
    same matrix), and a weight of ours left over raises ValueError.

    For Marian the hidden dimensions of the residual stream are permuted (`halves_order`): the columns of the
    embeddings, positions, output projection and of every linear layer that reads the stream (q/k/v, fc1),
    the rows and biases of every one that writes it (out_proj, fc2), and every layer norm's weight and bias.
    """
    ours = dict(model.state_dict())
    d_model = model.src_embed.embedding.embedding_dim
    order = torch.arange(d_model) if pre_norm else halves_order(d_model)
    hf: dict[str, Tensor] = {}

    def reads(ours_name: str, *names: str) -> None:
        """Linear layers applied to the stream, as many as `names`, fused in one of ours (rows: q, k, v)."""
        weights, biases = (ours.pop(f"{ours_name}.{kind}").chunk(len(names)) for kind in ("weight", "bias"))
        for name, weight, bias in zip(names, weights, biases, strict=True):
            hf[f"{name}.weight"], hf[f"{name}.bias"] = weight[:, order], bias

    def writes(name: str, ours_name: str) -> None:
        """A linear layer whose output is added to the stream, or a layer norm of the stream."""
        hf[f"{name}.weight"] = ours.pop(f"{ours_name}.weight")[order]
        hf[f"{name}.bias"] = ours.pop(f"{ours_name}.bias")[order]

    for side, layers in (("encoder", model.encoder_layers), ("decoder", model.decoder_layers)):
        self_norm = "attn_block" if side == "encoder" else "self_block"
        for i in range(len(layers)):
            name, ours_name = f"model.{side}.layers.{i}", f"{side}_layers.{i}"
            q, k, v = (f"{name}.self_attn.{x}_proj" for x in "qkv")
            reads(f"{ours_name}.self_attn.qkv_proj", q, k, v)
            writes(f"{name}.self_attn.out_proj", f"{ours_name}.self_attn.out_proj")
            writes(f"{name}.self_attn_layer_norm", f"{ours_name}.{self_norm}.norm")
            if side == "decoder":
                q, k, v = (f"{name}.encoder_attn.{x}_proj" for x in "qkv")
                reads(f"{ours_name}.cross_attn.query_proj", q)
                reads(f"{ours_name}.cross_attn.key_value_proj", k, v)
                writes(f"{name}.encoder_attn.out_proj", f"{ours_name}.cross_attn.out_proj")
                writes(f"{name}.encoder_attn_layer_norm", f"{ours_name}.cross_block.norm")
            reads(f"{ours_name}.feed_forward.0", f"{name}.fc1")
            writes(f"{name}.fc2", f"{ours_name}.feed_forward.3")
            writes(f"{name}.final_layer_norm", f"{ours_name}.ff_block.norm")
        if pre_norm:
            writes(f"model.{side}.layer_norm", f"{side}_norm")
        hf[f"model.{side}.embed_positions.weight"] = model.src_embed.positions[:, order]
    src = ours.pop("src_embed.embedding.weight")[:, order]
    tgt = ours.pop("tgt_embed.embedding.weight")[:, order]
    hf["model.encoder.embed_tokens.weight"], hf["model.decoder.embed_tokens.weight"] = src, tgt
    hf["lm_head.weight"] = ours.pop("output.weight")[:, order] if "output.weight" in ours else tgt
    hf["final_logits_bias"] = torch.zeros(1, tgt.size(0))
    if pre_norm or model.src_embed.embedding is model.tgt_embed.embedding:  # Marian has `shared` when sharing
        hf["model.shared.weight"] = src
    if ours:
        raise ValueError(f"transformers' models have no place for the weights {sorted(ours)}")
    return {name: tensor.contiguous() for name, tensor in hf.items()}


def save_tokenizer(transformers: ModuleType, run: TrainedRun, directory: Path) -> None:
    """A `MarianTokenizer` in `directory`: the run's sentencepiece model as its source and target model and
    the pieces in id order as its vocabulary (ids equal ours), eos appended to every source as we do; inputs
    cut at our source limit when called with truncation=True; no clean-up of spaces around punctuation."""
    tokenizer = run.tokenizers.src
    shutil.copyfile(tokenizer.path, directory / "source.spm")
    shutil.copyfile(tokenizer.path, directory / "target.spm")
    pieces = tokenizer.pieces(list(range(len(tokenizer))))
    vocab = {piece: i for i, piece in enumerate(pieces)}
    (directory / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False, indent=0), encoding="utf-8")
    pad, unk, eos = tokenizer.pieces([PAD, UNK, EOS])
    multilingual = run.cfg.data.directions.tagged
    with warnings.catch_warnings():  # it recommends sacremoses, for a normaliser it never calls
        warnings.filterwarnings("ignore", message=".*sacremoses")
        hf_tokenizer = transformers.MarianTokenizer(
            source_spm=str(directory / "source.spm"),
            target_spm=str(directory / "target.spm"),
            vocab=str(directory / "vocab.json"),
            source_lang=None if multilingual else run.cfg.data.src_lang,
            target_lang=None if multilingual else run.cfg.data.tgt_lang,
            pad_token=pad,
            unk_token=unk,
            eos_token=eos,
            model_max_length=max_source_len(run.cfg) + 1,
            clean_up_tokenization_spaces=False,
        )
    hf_tokenizer.save_pretrained(directory)
