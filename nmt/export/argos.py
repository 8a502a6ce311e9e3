"""`nmt export --to argos`: a trained Transformer as an Argos Translate package, which argostranslate (and
LibreTranslate through it) installs with `argostranslate.package.install_from_path` and runs offline.

The package is a zip holding one folder, `translate-<src>_<tgt>-nmt/` (a multilingual run with decoder tags:
one package per direction, its metadata.json naming the tag Argos forces as `target_prefix`):
```
metadata.json        language codes and names, package_version, argos_version, type "translate"
README.md            the run, the checkpoint, the sentence splitter's rules
model/               the CTranslate2 export (`nmt export --to ctranslate2`: `nmt translate` reads it too)
sentencepiece.model  the run's joint sentencepiece model (an imported Marian model's source.spm)
minisbd/<src>.onnx   the sentence splitter argostranslate runs on each paragraph (sentence_splitter.py)
```
argostranslate encodes each sentence into sentencepiece pieces and CTranslate2 appends the eos our sources end
with (`add_source_eos` in model/config.json), as `nmt translate --engine ctranslate2` does. CTranslate2's
vocabularies map the pieces, so an imported Marian model's pieces reach it through vocab.json's mapping;
argostranslate decodes the output pieces with the same sentencepiece model, which gives the target model's
text (`_check_marian_decoding` says why).

A run trained with terminology annotation names its markers in metadata.json (`nmt.terminology`: term start,
translation start, term end; null for other runs), so that a consumer that knows nmt can write a glossary's
terms into each sentence as `nmt translate --glossary` does. argostranslate itself knows nothing of them: it
translates plain text as the run does without a glossary, and does not ban the markers from the output
(the model was never trained to write them).
"""

from __future__ import annotations

import json
import shutil
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from nmt.config.multilingual import Direction
from nmt.data.language_tags import tag_piece
from nmt.decode.exported import META, export_directions
from nmt.errors import UserError
from nmt.export.ctranslate2 import export_run
from nmt.export.model_card import domain_statement
from nmt.export.sentence_splitter import description, import_onnx, write_splitter

PACKAGE_VERSION = "1.0"
ARGOS_VERSION = "1.0"
LANGUAGE_NAMES = {"cs": "Czech", "de": "German", "en": "English", "fr": "French"}
# argostranslate's own search (translate.py, settings.py): CTranslate2's beam search with these settings.
MARIAN_MODELS = ("source.spm", "target.spm")  # an imported Marian model's, in its CTranslate2 export
SOURCE_MODEL = (
    "the model's source.spm; Argos Translate decodes the output pieces with it, which gives the text its "
    "target.spm gives (model/ holds both)."
)
ARGOS_SEARCH = "beam size ARGOS_BEAM_SIZE (default 4) and length penalty 0.2, at most 256 tokens a sentence"


def export_package(run_dir: Path, out: Path, quantization: str = "float32", which: str | None = None) -> Path:
    """Write the run's checkpoint `which` (default: the run's choice) as an Argos Translate package at `out`
    (a new file; by convention `*.argosmodel`), weights stored as `quantization`; returns `out`.

    A multilingual run with decoder tags becomes one package per direction in the new directory `out`
    (`<src>_<tgt>.argosmodel`), each forcing its target tag with Argos's `target_prefix`; one with encoder
    tags is refused: Argos Translate 1.x passes no source prefix."""
    if out.exists():
        raise UserError(f"{out} already exists; choose a new {'file' if out.suffix else 'directory'} name")
    import_onnx()
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{out.name}.", dir=out.parent) as tmp:
        model = export_run(run_dir, Path(tmp) / "model", "ctranslate2", quantization, which)
        meta = json.loads((model / META).read_text(encoding="utf-8"))
        _check(run_dir, model, meta)
        directions = export_directions(meta)
        if meta["tags"] is None:
            _zip(_write_folder(model, directions[0], meta, None), Path(tmp) / out.name).replace(out)
            return out
        packages = Path(tmp) / out.name
        packages.mkdir()
        for direction in directions:
            folder = _write_folder(model, direction, meta, tag_piece(direction.tgt))
            _zip(folder, packages / f"{direction.src}_{direction.tgt}.argosmodel")
            shutil.rmtree(folder)
        packages.replace(out)
    return out


def _check(run_dir: Path, model: Path, meta: dict[str, Any]) -> None:
    """Refuse what an Argos package cannot hold: two sentencepiece models (but an imported Marian model's,
    see `_package_tokenizer`), tags on the source side."""
    if meta.get("vocabulary") == "marian":
        _check_marian_decoding(run_dir, model)
    elif not meta["joint_vocabulary"]:
        raise UserError(
            f"{run_dir} has a source and a target sentencepiece model; an Argos package holds one: "
            f"train with tokenizer.joint=true"
        )
    if meta["tags"] == "encoder":
        raise UserError(
            f"{run_dir} puts its language tags on the source (data.multilingual.tags=encoder), and Argos "
            f"Translate 1.x passes no source prefix, only a target_prefix: train with "
            f"data.multilingual.tags=decoder to export to Argos"
        )


def _check_marian_decoding(run_dir: Path, model: Path) -> None:
    """An imported Marian model's package holds its source sentencepiece model (`_package_tokenizer`), with
    which argostranslate also decodes the target pieces: `decode_pieces` joins pieces that model lacks as they
    are, and argostranslate then writes each ▁ as a space and drops the first space, which is what the target
    model's decoding gives. Byte-fallback pieces (`<0xE3>`) are the exception: only a model that has them
    turns them into bytes, so a target model with byte pieces the source model lacks is refused."""
    import sentencepiece as spm

    src, tgt = (spm.SentencePieceProcessor(model_file=str(model / name)) for name in MARIAN_MODELS)
    src_bytes = {src.id_to_piece(i) for i in range(src.get_piece_size()) if src.is_byte(i)}
    lacking = [
        tgt.id_to_piece(i)
        for i in range(tgt.get_piece_size())
        if tgt.is_byte(i) and tgt.id_to_piece(i) not in src_bytes
    ]
    if lacking:
        raise UserError(
            f"{run_dir}'s target.spm has byte-fallback pieces ({lacking[0]}, {len(lacking)} in all) that its "
            f"source.spm lacks; Argos Translate decodes a translation with the package's one sentencepiece "
            f"model (the source's), which would leave them as text: export it with --to ctranslate2 and "
            f"serve it with `nmt serve`"
        )


def _zip(folder: Path, archive: Path) -> Path:
    """`folder` as the zip file `archive` (paths inside it start with the folder's name)."""
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zipped:
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            zipped.write(path, path.relative_to(folder.parent).as_posix())
    return archive


def _write_folder(model: Path, direction: Direction, meta: dict[str, Any], prefix: str | None) -> Path:
    """The package folder of `direction` beside the CTranslate2 export `model` (copied into it), with the
    decoder tag `prefix` that Argos forces (None: a one-pair run)."""
    src, tgt = direction.src, direction.tgt
    folder = model.parent / f"translate-{src}_{tgt}-nmt"
    folder.mkdir()
    shutil.copytree(model, folder / "model")
    tokenizer = MARIAN_MODELS[0] if meta.get("vocabulary") == "marian" else "spm.model"
    shutil.copyfile(model / tokenizer, folder / "sentencepiece.model")
    write_splitter(src, folder / "minisbd" / f"{src}.onnx")
    metadata = {
        "package_version": PACKAGE_VERSION,
        "argos_version": ARGOS_VERSION,
        "from_code": src,
        "from_name": LANGUAGE_NAMES.get(src, src),
        "to_code": tgt,
        "to_name": LANGUAGE_NAMES.get(tgt, tgt),
        "type": "translate",
        "sentence_splitter": description(src),
        "nmt": {key: meta[key] for key in ("checkpoint", "step", "quantization", "domain", "terminology")},
    }
    if prefix is not None:
        metadata["target_prefix"] = prefix
    (folder / "metadata.json").write_text(json.dumps(metadata, indent=2, ensure_ascii=False) + "\n", "utf-8")
    readme = _readme(metadata, meta["run"], meta.get("vocabulary") == "marian")
    (folder / "README.md").write_text(readme, encoding="utf-8")
    return folder


def _readme(metadata: dict, run_name: str, marian: bool) -> str:
    src, tgt, nmt = metadata["from_code"], metadata["to_code"], metadata["nmt"]
    multilingual = "target_prefix" in metadata
    direction = f"--src-lang {src} --tgt-lang {tgt} " if multilingual else ""
    prefix = (
        f"\n\nThe model translates several directions; Argos Translate forces `{metadata['target_prefix']}` "
        f"(metadata.json's `target_prefix`) as the first token of each translation, which makes it {tgt}."
        if multilingual
        else ""
    )
    return f"""# {metadata["from_name"]} → {metadata["to_name"]} ({src} → {tgt}), trained with nmt

Written by `nmt export --to argos` from the run `{run_name}`: checkpoint {nmt["checkpoint"]} (step \
{nmt["step"]}), weights {nmt["quantization"]}.

{domain_statement(nmt["domain"])}

- `model/`: the CTranslate2 model (`nmt translate model/` translates with it too).
- `sentencepiece.model`: {SOURCE_MODEL if marian else "the sentencepiece model of source and target."}
- `minisbd/{src}.onnx`: the sentence splitter. {metadata["sentence_splitter"]}

Argos Translate searches with {ARGOS_SEARCH}: `nmt translate model/ {direction}--beam-size 4 \
--length-penalty 0.2` gives the same translations, sentence by sentence, unless one reaches its length limit \
(nmt's is search.max_len_a × source length + search.max_len_b).{prefix}{_terminology(nmt["terminology"])}
"""


def _terminology(markers: list[str] | None) -> str:
    """What the README says of a run trained with terminology annotation (nothing for another run)."""
    if markers is None:
        return ""
    start, translation, end = markers
    return f"""

The model was trained to follow terms written into its source: `{start} Fahrrad {translation} bicycle {end}` \
makes it translate `Fahrrad` as `bicycle` (metadata.json's `nmt.terminology` names the three markers). \
`nmt translate model/ --glossary terms.tsv` writes a glossary's terms in; Argos Translate translates plain \
text, as the model does without a glossary."""
