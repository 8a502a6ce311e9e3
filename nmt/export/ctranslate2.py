"""`nmt export`: a trained Transformer run as a CTranslate2 model directory.

One mapping from the model's state dict onto `ctranslate2.specs.TransformerSpec` (as CTranslate2's own
converters/fairseq.py does): every weight is placed once, and a weight left over refuses the export, so
nothing the model computes is silently dropped.

```
OUT_DIR/model.bin  config.json  shared_vocabulary.json (or source_/target_vocabulary.json)
        spm.model (or spm.src.model, spm.tgt.model)  nmt-export.json
        vmap.txt  target_vocabulary.json        (a multilingual run with encoder tags)
```

A multilingual run with its tags on the encoder carries its target-language vocabularies as CTranslate2's
vocabulary map (`vmap.txt`, read with `use_vmap`): one line per target language, keyed by the language's tag,
which starts every source sentence into it. With decoder tags no map can: its keys are source n-grams, and a
decoder tag is no part of the source.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import shutil
from pathlib import Path
from typing import Any, cast

import numpy as np
from torch import Tensor

from nmt.align.reading import SEARCH_READING, Reading, full_context_layer, translation_reading
from nmt.config.schema import max_source_len
from nmt.data.language_tags import tag_piece
from nmt.data.special_tokens import BOS, EOS, PAD, UNK
from nmt.data.target_vocabulary import FILE as TARGET_VOCABULARIES
from nmt.data.target_vocabulary import load_target_vocabularies
from nmt.data.tokenizer import Tokenizer, tokenizer_files
from nmt.decode.exported import ALIGNMENT, META, VOCABULARY_MAP, import_ctranslate2
from nmt.decode.trained_run import TrainedRun
from nmt.errors import UserError
from nmt.export.directories import check_out_dir, load_transformer_run, staged_directory
from nmt.models.transformer import EncoderLayer, TransformerSeq2Seq, sinusoidal_positions

FORMATS = ("ctranslate2", "argos", "huggingface")  # nmt export --to (argos.py and huggingface.py: the others)
QUANTIZATIONS = (
    "float32",
    "int8",
    "int8_float32",
    "int8_float16",
    "int8_bfloat16",
    "int16",
    "float16",
    "bfloat16",
)
CROSS_ATTENTION = ("query_proj", "key_value_proj", "out_proj")  # CTranslate2's order of its 3 linears

log = logging.getLogger(__name__)


def export_run(
    run_dir: Path,
    out_dir: Path,
    to: str = "ctranslate2",
    quantization: str = "float32",
    which: str | None = None,
) -> Path:
    """Write the run's checkpoint `which` (best, last or averaged; default: the run's choice) as a CTranslate2
    model with weights stored as `quantization`, its vocabularies, sentencepiece models and search settings
    into `out_dir` (which must not exist or be empty); returns `out_dir`."""
    if to != "ctranslate2":
        raise UserError(f"--to {to}: unknown export format; use {', '.join(FORMATS)}")
    if quantization not in QUANTIZATIONS:
        raise UserError(f"--quantization {quantization}: unknown; use {', '.join(QUANTIZATIONS)}")
    check_out_dir(out_dir)
    import_ctranslate2()
    run, model = load_transformer_run(run_dir, which, "CTranslate2")
    arch = run.cfg.model.transformer_settings
    reading = translation_reading(run.cfg) or SEARCH_READING
    if full_context_layer(run.cfg) is not None:
        log.warning(
            "CTranslate2 has no full-context pass: the export's alignments read decoder layer %d's causal "
            "attention, which guided alignment trained with full context",
            reading.layer,
        )
    spec = transformer_spec(model, arch.heads, arch.norm == "pre", reading, arch.activation)
    set_vocabularies(spec, run.tokenizers.src, run.tokenizers.tgt, arch.decoder_start == "pad")
    spec.validate()
    spec.optimize(quantization=quantization)
    _save(spec, run, out_dir, quantization)
    return out_dir


def _save(spec: Any, run: TrainedRun, out_dir: Path, quantization: str) -> None:
    """Write the export into a temporary sibling directory, then rename it to `out_dir`."""
    joint, cfg = run.tokenizers.joint, run.cfg
    meta = {
        "format": "ctranslate2",
        "run": run.directory.path.resolve().name,  # its name alone: no path of the exporting machine
        "checkpoint": run.checkpoint_name,
        "step": run.checkpoint.get("step"),
        "domain": cfg.data.domain,  # what the model was trained on (data.domain), for /v1/models
        "quantization": quantization,
        "joint_vocabulary": joint,
        "vocabulary": cfg.tokenizer.vocabulary,
        "directions": [direction.name for direction in cfg.data.directions.directions],
        "tags": cfg.data.directions.tags,
        "search": dataclasses.asdict(cfg.search),
        "max_source_len": max_source_len(cfg),
        "alignment": alignment_meta(translation_reading(cfg)),
        "terminology": None if cfg.data.terminology is None else list(cfg.data.terminology.markers),
    }
    with staged_directory(out_dir) as tmp:
        spec.save(str(tmp))
        for source in tokenizer_files(run.directory.path, joint, cfg.tokenizer.vocabulary):
            shutil.copyfile(source, tmp / source.name)
        (tmp / META).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
        if cfg.data.directions.tags == "encoder":
            write_vocabulary_map(run, tmp)


def alignment_meta(reading: Reading | None) -> str | dict[str, Any]:
    """What nmt-export.json says of the attention the export returns: `ALIGNMENT` (search's), or the guided
    run's reading (nmt/decode/exported.py `exported_reading` reads it back)."""
    if reading is None:
        return ALIGNMENT
    heads = None if reading.heads is None else list(reading.heads)
    return {"layer": reading.layer, "heads": heads, "rule": reading.rule, "null": reading.null}


def write_vocabulary_map(run: TrainedRun, out_dir: Path) -> None:
    """The run's target-language vocabularies (none from a run trained by an earlier nmt) as CTranslate2's
    vocabulary map, a line per language: its tag, a tab, the pieces it may write; and as nmt keeps them."""
    vocabularies = load_target_vocabularies(run.directory.path)
    if not vocabularies:
        return
    tags, pieces = run.tokenizers.src.tag_ids, run.tokenizers.tgt
    lines = [
        f"{tag_piece(lang)}\t{' '.join(pieces.pieces(ids))}\n"
        for lang, ids in vocabularies.items()
        if lang in tags
    ]
    (out_dir / VOCABULARY_MAP).write_text("".join(lines), encoding="utf-8")
    shutil.copyfile(run.directory.path / TARGET_VOCABULARIES, out_dir / TARGET_VOCABULARIES)


class _Weights:
    """The state dict as float32 numpy arrays, handed out once each; `check_used` refuses leftovers."""

    def __init__(self, state: dict[str, Tensor]) -> None:
        self.left = {name: tensor.detach().float().cpu().numpy() for name, tensor in state.items()}

    def __call__(self, name: str) -> np.ndarray:
        return self.left.pop(name)

    def linear(self, spec: Any, prefix: str) -> None:
        spec.weight, spec.bias = self(f"{prefix}.weight"), self(f"{prefix}.bias")

    def norm(self, spec: Any, prefix: str) -> None:
        spec.gamma, spec.beta = self(f"{prefix}.weight"), self(f"{prefix}.bias")

    def check_used(self) -> None:
        if self.left:
            raise UserError(
                f"cannot export: CTranslate2's Transformer has no place for the weights {sorted(self.left)}"
            )


def transformer_spec(
    model: TransformerSeq2Seq,
    heads: int,
    pre_norm: bool,
    reading: Reading = SEARCH_READING,
    activation: str = "relu",
) -> Any:
    """The model's weights on a `ctranslate2.specs.TransformerSpec`.

    The feed-forward networks' `activation` is CTranslate2's of that name (swish: SWISH). Embeddings are
    scaled as ours are (by sqrt(d), or not at all: an imported model's) and get our sinusoidal table (sin on
    even, cos on odd dimensions; stored explicitly, as CTranslate2's default concatenates sin and cos
    halves). The fused self-attention `qkv_proj` (rows: queries, keys, values) is CTranslate2's fused linear
    as it is; cross-attention keeps its query and fused key/value projections. Final layer norms exist in
    pre-norm models only, in both. The attention CTranslate2 returns is the one `reading` reads (its default
    is the first head alone): the last decoder layer's mean of heads (`ALIGNMENT`), the one nmt's search
    returns and aligns with, or a guided run's supervised layer and the mean of its first heads. A learned
    output bias (an imported Marian model's final logits bias) is the output projection's bias.
    """
    from ctranslate2.specs import common_spec
    from ctranslate2.specs import transformer_spec as ts

    layers = (len(model.encoder_layers), len(model.decoder_layers))
    first = 0 if reading.heads is None else len(reading.heads)  # CTranslate2 averages the first heads; 0: all
    assert reading.heads in (None, tuple(range(first))), "CTranslate2 averages the first heads only"
    spec = ts.TransformerSpec.from_config(
        layers,
        heads,
        pre_norm=pre_norm,
        alignment_layer=reading.layer % layers[1],
        alignment_heads=first,
        activation=getattr(common_spec.Activation, activation.upper()),
    )
    weights = _Weights(model.state_dict())
    encoder, decoder = spec.encoder, spec.decoder
    positions = sinusoidal_positions(*model.src_embed.positions.shape)  # (max_positions, d_model)
    encoder.embeddings[0].weight = weights("src_embed.embedding.weight")
    decoder.embeddings.weight = weights("tgt_embed.embedding.weight")
    encoder.position_encodings.encodings = decoder.position_encodings.encodings = positions.numpy()
    encoder.scale_embeddings, decoder.scale_embeddings = model.src_embed.scale, model.tgt_embed.scale
    for i, layer in enumerate(encoder.layer):
        prefix = f"encoder_layers.{i}"
        _self_attention(weights, layer.self_attention, f"{prefix}.self_attn", f"{prefix}.attn_block.norm")
        _feed_forward(weights, layer.ffn, prefix)
    for i, layer in enumerate(decoder.layer):
        prefix = f"decoder_layers.{i}"
        _self_attention(weights, layer.self_attention, f"{prefix}.self_attn", f"{prefix}.self_block.norm")
        weights.norm(layer.attention.layer_norm, f"{prefix}.cross_block.norm")
        for linear, name in zip(layer.attention.linear, CROSS_ATTENTION, strict=True):
            weights.linear(linear, f"{prefix}.cross_attn.{name}")
        _feed_forward(weights, layer.ffn, prefix)
    if pre_norm:
        weights.norm(encoder.layer_norm, "encoder_norm")
        weights.norm(decoder.layer_norm, "decoder_norm")
    tied = "output.weight" not in weights.left
    decoder.projection.weight = decoder.embeddings.weight if tied else weights("output.weight")
    if model.output_bias is not None:
        decoder.projection.bias = weights("output_bias")
    weights.check_used()
    spec.config.layer_norm_epsilon = cast(EncoderLayer, model.encoder_layers[0]).attn_block.norm.eps
    spec.config.add_source_eos = True  # our sources end with eos, our targets start with bos
    return spec


def _self_attention(weights: _Weights, spec: Any, prefix: str, norm: str) -> None:
    weights.linear(spec.linear[0], f"{prefix}.qkv_proj")
    weights.linear(spec.linear[1], f"{prefix}.out_proj")
    weights.norm(spec.layer_norm, norm)


def _feed_forward(weights: _Weights, spec: Any, prefix: str) -> None:
    weights.linear(spec.linear_0, f"{prefix}.feed_forward.0")
    weights.linear(spec.linear_1, f"{prefix}.feed_forward.3")
    weights.norm(spec.layer_norm, f"{prefix}.ff_block.norm")


def set_vocabularies(spec: Any, src: Tokenizer, tgt: Tokenizer, pad_start: bool = False) -> None:
    """Sentencepiece pieces in id order as the vocabularies; unk, bos (= decoder start) and eos named by the
    target model's own pieces (sentencepiece's `<unk>`, `<s>`, `</s>`: CTranslate2's defaults). Our padding
    piece `<pad>` (id 0, CTranslate2's `<blank>`) only fills the vocabulary: decoding suppresses it. With
    `pad_start` (an imported Marian model's, which has no bos: id 2 is a piece) the decoder starts from the
    padding piece, and bos keeps CTranslate2's default name, which no piece has."""
    spec.register_source_vocabulary(src.pieces(list(range(len(src)))))
    spec.register_target_vocabulary(tgt.pieces(list(range(len(tgt)))))
    config = spec.config
    config.unk_token, config.bos_token, config.eos_token = tgt.pieces([UNK, BOS, EOS])
    config.decoder_start_token = config.bos_token
    if pad_start:
        config.bos_token, config.decoder_start_token = "<s>", tgt.pieces([PAD])[0]
