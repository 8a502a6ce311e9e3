"""`nmt import`: a transformers MarianMT model (an OPUS-MT model, say) read into an ordinary run directory.

The source is a directory as `MarianMTModel.save_pretrained` and `MarianTokenizer.save_pretrained` write it:

```
config.json  model.safetensors (or pytorch_model.bin; either in shards)  source.spm  target.spm
vocab.json  (target_vocab.json where the vocabularies are separate)  [tokenizer_config.json,
generation_config.json, README.md]
```

Nothing of it is executed: the config and vocabularies are JSON, the weights safetensors (preferred) or a
pickle read with `weights_only=True`. The model becomes a post-norm Transformer of nmt's with Marian's
settings (activation, final logits bias, unscaled or scaled embeddings, pad as the decoder start, shared or
tied embeddings); its weights are placed by the one mapping the Hugging Face export writes with
(nmt/export/hf_names.py). Marian's vocabularies number eos 0 and pad last; nmt's put pad, unk and eos at 0, 1
and 3, so every vocabulary (vocab.json, and target_vocab.json) is renumbered — the pieces move, and the
embedding rows, output rows and logits bias with them — and the run's `vocab.json` is the renumbered one
(tokenizer.vocabulary=marian). The search settings are the model's generation settings, its beams scored as
transformers scores them (search.length_normalization=power).

```
RUN_DIR/config.yaml  best.pt  source.spm  target.spm  vocab.json  [target_vocab.json]  origin.json
```
"""

from __future__ import annotations

import inspect
import json
import re
import shutil
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from nmt.config.schema import Config
from nmt.config.sections import DataConfig, SearchConfig, TokenizerConfig
from nmt.config.yaml_file import save_config
from nmt.data.special_tokens import PAD
from nmt.data.tokenizer import load_tokenizers, processor_of, read_vocabulary, write_vocabulary
from nmt.errors import UserError
from nmt.export.directories import check_out_dir, staged_directory
from nmt.export.hf_names import our_state_dict, places
from nmt.importing.origin import Origin
from nmt.models.build import shapes_only
from nmt.models.config import ModelConfig, TransformerConfig
from nmt.models.transformer import TransformerSeq2Seq
from nmt.run.checkpoint import weights_checkpoint
from nmt.run.checkpoint_io import save_checkpoint
from nmt.run.directory import RunDir

SUPPORTED = ("marian",)  # the model_type values of config.json that nmt imports
ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "swish": "swish", "silu": "swish"}
WEIGHTS = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)  # in order of preference; an index names the shards of a sharded file


@dataclass(frozen=True)
class Vocabulary:
    """One side's vocabulary file: its pieces in transformers' id order, and `order`, the transformers id of
    each of nmt's ids (pad, unk and eos moved to 0, 1 and 3)."""

    path: Path
    pieces: list[str]
    order: list[int]

    @property
    def ours(self) -> list[str]:
        """The pieces in nmt's id order."""
        return [self.pieces[i] for i in self.order]


def import_model(source: str, out_dir: Path) -> Path:
    """Read the MarianMT model `source` (a local directory, or a hub id downloaded with huggingface_hub) into
    the new run directory `out_dir` (which must not exist, or be empty), written complete or not at all;
    returns `out_dir`."""
    check_out_dir(out_dir)
    directory, origin = locate(source)
    with ThreadPoolExecutor(max_workers=1) as pool:  # hashlib frees the GIL: the hashes cost no time
        hashed = pool.submit(origin.with_files, directory, licence(directory))
        return write_run(directory, hashed, out_dir)


def write_run(directory: Path, origin: Future[Origin], out_dir: Path) -> Path:
    """The run directory `out_dir` of the MarianMT model in `directory`, with its `origin` (whose files are
    being hashed meanwhile)."""
    hf_config = read_json(directory / "config.json", "a transformers model directory needs one")
    check_model_type(directory, hf_config)
    joint = not (directory / "target_vocab.json").exists()
    specials = special_pieces(directory)
    src = vocabulary(directory / "vocab.json", hf_config, specials, target=joint)
    tgt = src if joint else vocabulary(directory / "target_vocab.json", hf_config, specials)
    for name in ("source.spm", "target.spm"):
        if not (directory / name).is_file():
            raise UserError(
                f"{directory / name} is missing: a MarianMT model needs source.spm and target.spm"
            )
        processor_of((directory / name).read_bytes(), str(directory / name), "download the model again")
    weights_path, weights = read_weights(directory)
    cfg = run_config(directory, hf_config, joint, len(src.pieces), weights)
    state = our_weights(weights, weights_path, cfg.model, src, tgt, joint)  # empties `weights` as it goes
    del weights  # what had no place (the positions Marian rebuilds); the model takes `state` as it is
    with staged_directory(out_dir) as tmp:
        for name in ("source.spm", "target.spm"):
            shutil.copyfile(directory / name, tmp / name)
        write_vocabulary(tmp / "vocab.json", src.ours)
        if not joint:
            write_vocabulary(tmp / "target_vocab.json", tgt.ours)
        tokenizers = load_tokenizers(tmp, joint, "marian")
        with shapes_only():  # no memory or initial weights of its own: it takes the renumbered tensors
            model = TransformerSeq2Seq(cfg.model, len(tokenizers.src), len(tokenizers.tgt), joint, PAD)
        try:
            model.load_state_dict(state, strict=True, assign=True)
        except RuntimeError as err:
            raise UserError(
                f"{directory / 'config.json'} contradicts the weights in {weights_path.name}: "
                f"{str(err).splitlines()[-1].strip()}"
            ) from None
        save_config(cfg, RunDir(tmp).config)
        save_checkpoint(RunDir(tmp).checkpoint("best"), weights_checkpoint(model, cfg, tokenizers, 0))
        origin.result().write(RunDir(tmp).origin)
    return out_dir


def locate(source: str) -> tuple[Path, Origin]:
    """The local directory of `source` and where it came from: a directory as it is, or a hub id such as
    Helsinki-NLP/opus-mt-de-en downloaded (config, tokenizer and weights files only) into the hub's cache."""
    path = Path(source).expanduser()
    if path.is_dir():
        return path, Origin(source=str(path.resolve()))
    if path.exists():
        raise UserError(f"{source} is a file; pass a MarianMT model directory or a hub id")
    if not re.fullmatch(r"[\w.-]+/[\w.-]+", source):
        raise UserError(
            f"{source} is neither a directory nor a hub id (owner/name, e.g. Helsinki-NLP/opus-mt-de-en)"
        )
    from nmt.importing.hub import download

    return download(source)


def read_json(path: Path, why: str) -> dict[str, Any]:
    """A JSON object file; a UserError naming it where it is missing or not a JSON object."""
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"{path} is missing: {why}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise UserError(f"{path} is not valid JSON ({str(err)[:100]}); restore the file") from None
    if not isinstance(found, dict):
        raise UserError(f"{path} is not a JSON object; restore the file")
    return found


def check_model_type(directory: Path, hf_config: Mapping[str, Any]) -> None:
    """Refuse a config.json of another architecture than those nmt imports, naming both."""
    found = hf_config.get("model_type")
    if found not in SUPPORTED:
        classes = ", ".join(hf_config.get("architectures") or []) or "no architectures listed"
        raise UserError(
            f"{directory / 'config.json'} is a model of type {found!r} ({classes}); nmt imports only "
            f"{', '.join(SUPPORTED)} (MarianMTModel: OPUS-MT and other Marian models)"
        )


def special_pieces(directory: Path) -> tuple[str, str, str]:
    """The pad, unk and eos pieces: tokenizer_config.json's where it names them, else MarianTokenizer's."""
    path = directory / "tokenizer_config.json"
    settings = read_json(path, "") if path.is_file() else {}

    def piece(name: str, default: str) -> str:
        value = settings.get(name, default)
        return str(value.get("content", default) if isinstance(value, dict) else value)

    return piece("pad_token", "<pad>"), piece("unk_token", "<unk>"), piece("eos_token", "</s>")


def vocabulary(
    path: Path, hf_config: Mapping[str, Any], specials: tuple[str, str, str], target: bool = True
) -> Vocabulary:
    """The vocabulary file at `path`, its specials found by name (the `target` one's pad and eos at the ids
    config.json gives: generation's), renumbered into nmt's order: pad 0, unk 1, eos 3, the other pieces in
    their order."""
    pieces = read_vocabulary(path)
    index = {piece: i for i, piece in enumerate(pieces)}
    pad, unk, eos = (index.get(piece) for piece in specials)
    for name, piece, i in zip(("pad", "unk", "eos"), specials, (pad, unk, eos), strict=True):
        if i is None:
            raise UserError(f"{path} has no {name} piece {piece!r}; it is not this model's vocabulary")
    for name, i in (("pad", pad), ("eos", eos)) if target else ():
        wanted = hf_config.get(f"{name}_token_id")
        if wanted is not None and wanted != i:
            raise UserError(
                f"{path} numbers {name} {i} where config.json's {name}_token_id is {wanted}; the files are "
                f"of different models"
            )
    assert pad is not None and unk is not None and eos is not None
    rest = [i for i in range(len(pieces)) if i not in (pad, unk, eos)]
    order = [pad, unk, rest[0], eos, *rest[1:]]
    return Vocabulary(path, pieces, order)


def read_weights(directory: Path) -> tuple[Path, dict[str, Tensor]]:
    """The weights of the model: model.safetensors, else pytorch_model.bin read as weights only (no code of
    the file's ever runs), each whole or in the shards its `.index.json` names; a UserError names a missing,
    truncated or corrupt file."""
    path = next((directory / name for name in WEIGHTS if (directory / name).is_file()), None)
    if path is None:
        raise UserError(f"{directory} holds no weights (model.safetensors or pytorch_model.bin)")
    found: dict[str, Tensor] = {}
    for file in shards(path) if path.name.endswith(".index.json") else [path]:
        found |= read_weight_file(file)
    return path, found


def shards(index: Path) -> list[Path]:
    """The shard files a transformers `.index.json` names in its weight_map, each checked to be there."""
    weight_map = read_json(index, "").get("weight_map")
    if not isinstance(weight_map, dict) or not all(isinstance(name, str) for name in weight_map.values()):
        raise UserError(f"{index} has no weight_map of shard files; download it again")
    files = []
    for name in dict.fromkeys(weight_map.values()):
        if Path(name).name != name:
            raise UserError(f"{index} names a shard outside its directory ({name!r}); download it again")
        if not (index.parent / name).is_file():
            raise UserError(f"{index.parent / name} is missing: {index.name} names it as a shard")
        files.append(index.parent / name)
    return files


def read_weight_file(path: Path) -> dict[str, Tensor]:
    """The tensors of one safetensors or pickled weights file, as float32, each in memory of its own (freed
    as soon as the import has placed it; safetensors' memory map would keep the whole file resident)."""
    try:
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file

            own_memory = {"backend": "pread"} if "backend" in inspect.signature(load_file).parameters else {}
            found = load_file(path, **own_memory)  # safetensors before 0.8 maps the file
        else:
            found = torch.load(path, map_location="cpu", weights_only=True)
    except ImportError:
        raise UserError(
            "safetensors is not installed; install it with `pip install 'nmt[huggingface]'`"
        ) from None
    except Exception as err:  # safetensors, zipfile and unpickling each raise their own
        reason = str(err).splitlines()[0][:120] if str(err) else type(err).__name__
        raise UserError(f"{path} is truncated or corrupt ({reason}); download it again") from None
    if not isinstance(found, dict) or not all(isinstance(t, Tensor) for t in found.values()):
        raise UserError(f"{path} holds no state dict of tensors; it is not a transformers model's weights")
    for name, tensor in found.items():
        found[name] = tensor.float()  # in place: a half-precision tensor is freed once converted
    return found


def run_config(
    directory: Path, hf_config: Mapping[str, Any], joint: bool, vocab_size: int, weights: Mapping[str, Tensor]
) -> Config:
    """The run's config: the model section Marian's config.json and the `weights` describe, the marian
    vocabulary layout, the languages tokenizer_config.json names and the search generation_config.json sets
    (transformers' scoring: the summed log-probability over length ** length_penalty). Embeddings are shared
    and tied as the config says, unless the weights hold two different matrices (as transformers 5 saves a
    model whose config shares the embeddings but does not tie them, and then loads them apart)."""
    path = directory / "config.json"

    def value(name: str, *others: str) -> Any:
        found = hf_config.get(name)
        if not isinstance(found, int) or isinstance(found, bool) or found < 1:
            raise UserError(f"{path}: {name}={found!r} is not a positive integer")
        for other in others:
            if hf_config.get(other, found) != found:
                raise UserError(
                    f"{path}: {name}={found} but {other}={hf_config[other]}; nmt's Transformer has one "
                    f"value for both"
                )
        return found

    activation = ACTIVATIONS.get(hf_config.get("activation_function", "swish"))
    if activation is None:
        raise UserError(
            f"{path}: activation_function={hf_config['activation_function']!r}; nmt supports "
            f"{', '.join(ACTIVATIONS)}"
        )
    start = hf_config.get("decoder_start_token_id", hf_config.get("pad_token_id"))
    if start != hf_config.get("pad_token_id"):
        raise UserError(
            f"{path}: decoder_start_token_id={start} is not pad_token_id={hf_config.get('pad_token_id')}; "
            f"nmt imports Marian models that start decoding from pad"
        )
    share = bool(hf_config.get("share_encoder_decoder_embeddings", True)) and joint
    share = share and not differ(
        weights, "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight"
    )
    tie = bool(hf_config.get("tie_word_embeddings", True))
    tie = tie and not differ(weights, "model.decoder.embed_tokens.weight", "lm_head.weight")
    model = ModelConfig(
        type="transformer",
        encoder_layers=value("encoder_layers"),
        decoder_layers=value("decoder_layers"),
        dropout=float(number(hf_config, "dropout", path, 0.1) or 0.0),
        tie_embeddings=tie,
        share_embeddings=share,
        transformer=TransformerConfig(
            d_model=value("d_model"),
            heads=value("encoder_attention_heads", "decoder_attention_heads"),
            ff_dim=value("encoder_ffn_dim", "decoder_ffn_dim"),
            attention_dropout=float(number(hf_config, "attention_dropout", path, 0.0) or 0.0),
            norm="post",
            max_positions=value("max_position_embeddings"),
            activation=activation,  # type: ignore[arg-type]
            scale_embeddings=bool(hf_config.get("scale_embedding", False)),
            output_bias="final_logits_bias" in weights and bool(weights["final_logits_bias"].any()),
            decoder_start="pad",
        ),
    )
    languages = tokenizer_languages(directory)
    generation_path = directory / "generation_config.json"
    generation = read_json(generation_path, "") if generation_path.is_file() else {}

    def generation_number(name: str, default: float) -> float | None:
        if name in generation:
            return number(generation, name, generation_path)
        return number(hf_config, name, path, default)

    penalty = generation_number("length_penalty", 1.0)
    search = SearchConfig(
        beam_size=int(generation_number("num_beams", 4) or 1),
        length_penalty=float(1.0 if penalty is None else penalty),
        length_normalization="power",
    )
    max_len = min(128, model.transformer_settings.max_positions - 1)
    return Config(
        data=DataConfig(src_lang=languages[0], tgt_lang=languages[1], max_len=max_len),
        tokenizer=TokenizerConfig(vocab_size=vocab_size, joint=joint, vocabulary="marian"),
        model=model,
        search=search,
    )


def number(settings: Mapping[str, Any], name: str, path: Path, default: float | None = None) -> float | None:
    """The number `name` of the JSON file `path`'s `settings` (`default` where absent; None where null); a
    UserError naming the file where it is not a number."""
    found = settings.get(name, default)
    if found is not None and (isinstance(found, bool) or not isinstance(found, int | float)):
        raise UserError(f"{path}: {name}={found!r} is not a number; restore the file")
    return found


def differ(weights: Mapping[str, Tensor], first: str, second: str) -> bool:
    """Whether `weights` holds both names, as different tensors."""
    if first not in weights or second not in weights:
        return False
    return not (
        weights[first].shape == weights[second].shape and torch.equal(weights[first], weights[second])
    )


def tokenizer_languages(directory: Path) -> tuple[str, str]:
    """The source and target languages tokenizer_config.json names (source_lang, target_lang), else those
    of an OPUS-MT name (opus-mt-de-en), else xx and yy."""
    path = directory / "tokenizer_config.json"
    settings = read_json(path, "") if path.is_file() else {}
    src, tgt = settings.get("source_lang"), settings.get("target_lang")
    if isinstance(src, str) and isinstance(tgt, str) and src and tgt:
        return src, tgt
    match = re.search(r"opus-mt-([a-z]{2,3})-([a-z]{2,3})$", directory.resolve().name)
    return (match.group(1), match.group(2)) if match else ("xx", "yy")


def our_weights(
    weights: dict[str, Tensor],
    path: Path,
    model: ModelConfig,
    src: Vocabulary,
    tgt: Vocabulary,
    joint: bool,
) -> dict[str, Tensor]:
    """The Marian `weights` (read from `path`) under nmt's names, their vocabulary rows renumbered; a weight
    the config wants but the file lacks, or one the config has no place for, is a UserError naming the
    file. `weights` is emptied as its tensors are renumbered and placed, each freed once copied."""
    rows = {
        "model.shared.weight": src,
        "model.encoder.embed_tokens.weight": src,
        "model.decoder.embed_tokens.weight": tgt,
        "lm_head.weight": tgt,
    }
    known = {place.hf for place in places(model, joint)} | set(rows) | {"final_logits_bias"}
    extra = sorted(
        name for name in weights if name not in known and not name.endswith("embed_positions.weight")
    )
    if extra:
        raise UserError(
            f"{path} has weights config.json's model has no place for ({extra[0]}, {len(extra)} in all); "
            f"the config and the weights are of different models"
        )
    for name, side in rows.items():
        if name not in weights:
            continue
        if weights[name].size(0) != len(side.pieces):
            raise UserError(
                f"{side.path} has {len(side.pieces)} pieces but {path.name}'s {name} has "
                f"{weights[name].size(0)} rows; the files are of different models"
            )
        order = torch.tensor(side.order)
        weights[name] = weights[name].index_select(0, order)  # the file's matrix is freed: replaced
    bias = weights.get("final_logits_bias")
    if bias is not None and bias.size(-1) == len(tgt.pieces):
        weights["final_logits_bias"] = bias.index_select(1, torch.tensor(tgt.order))
    try:
        return our_state_dict(weights, model, joint)
    except KeyError as err:
        raise UserError(
            f"{path} lacks the weight {err.args[0]} that config.json's model has; the config and the "
            f"weights are of different models"
        ) from None
    except ValueError as err:
        raise UserError(f"{path}: {err}; the weights contradict config.json") from None


def licence(directory: Path) -> str | None:
    """The licence the model card (README.md's front matter) names, if any."""
    card = directory / "README.md"
    if not card.is_file():
        return None
    text = card.read_text(encoding="utf-8", errors="replace")
    front = text.split("---")[1] if text.startswith("---") else ""
    match = re.search(r"^license:\s*(\S+)", front, re.MULTILINE)
    return match.group(1).strip("'\"") if match else None
