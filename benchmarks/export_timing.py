"""One runtime and one search of benchmarks/export_bench.py (its request: `child_process` there), timed in a
process of its own.

    python -m benchmarks.export_timing REQUEST.json ANSWER.json

Only the standard library is imported at the top: CTranslate2 called directly never loads torch, and Argos
Translate's virtual environment holds neither torch nor nmt.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.common import fastest

Translate = Callable[[list[str]], list[str]]  # one pass over the sentences, in batches
RUNTIME_MODULES = ("torch", "ctranslate2", "transformers", "sentencepiece")
VERSIONS = {"argos": ("argos-translate-lt", "ctranslate2")}  # what a runtime's answer names the versions of


def by_length(lengths: list[int], batch_tokens: int, beam: int) -> list[list[int]]:
    """Indices in order of length, longest first, in batches of sentences × (longest + eos) × beam within
    `batch_tokens` (nmt.data.batching.search_groups, without importing nmt, which imports torch)."""
    groups: list[list[int]] = []
    for i in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        if groups and (len(groups[-1]) + 1) * (lengths[groups[-1][0]] + 1) * beam <= batch_tokens:
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups


def nmt_translator(request: dict[str, Any], engine: str, int8: bool = False) -> Translate:
    """`nmt translate` through nmt's loader: a run directory on PyTorch ('torch'; int8 linear layers where
    `int8`), or an export on nmt's CTranslate2 engine ('ctranslate2')."""
    import torch

    from nmt.decode.exported import load_export
    from nmt.decode.loading import load_translator

    path, threads = Path(request["path"]), request["threads"]
    if engine == "torch":
        torch.set_num_threads(threads)
        loaded = load_translator([path], "torch", torch.device("cpu"), request["checkpoint"], {}, int8)
    else:
        loaded = load_export(path, "cpu", threads)
    search = {key: request[key] for key in ("beam_size", "length_penalty", "batch_tokens")}
    return loaded.with_search(nbest=1, **search).translate


def ctranslate2_translator(request: dict[str, Any]) -> Translate:
    """CTranslate2 called directly on the export, no nmt code: `translate_batch` on batches sorted by length
    with the settings nmt's engine passes (output limit a × (source + 1) + b, padding and bos suppressed)."""
    import ctranslate2
    import numpy as np
    import sentencepiece

    path = Path(request["path"])
    meta = json.loads((path / "nmt-export.json").read_text(encoding="utf-8"))
    names = ["spm.model"] * 2 if meta["joint_vocabulary"] else ["spm.src.model", "spm.tgt.model"]
    src, tgt = (sentencepiece.SentencePieceProcessor(model_file=str(path / name)) for name in names)
    a, b = np.float32(meta["search"]["max_len_a"]), np.float32(meta["search"]["max_len_b"])
    banned = [[tgt.id_to_piece(tgt.pad_id())], [tgt.id_to_piece(tgt.bos_id())]]
    options = {"beam_size": request["beam_size"], "length_penalty": request["length_penalty"]}
    options |= {"min_decoding_length": 0, "max_input_length": 0, "suppress_sequences": banned}
    translator = ctranslate2.Translator(str(path), device="cpu", intra_threads=request["threads"])

    def translate(sentences: list[str]) -> list[str]:
        pieces = src.encode(sentences, out_type=str)
        outputs = [""] * len(sentences)
        for group in by_length([len(p) for p in pieces], request["batch_tokens"], request["beam_size"]):
            limits = [max(1, int(np.float32(len(pieces[i]) + 1) * a + b)) for i in group]
            batch = [pieces[i] for i in group]
            results = translator.translate_batch(batch, max_decoding_length=max(limits), **options)
            for i, limit, result in zip(group, limits, results, strict=True):
                outputs[i] = tgt.decode_pieces(result.hypotheses[0][:limit])
        return outputs

    return translate


def transformers_translator(request: dict[str, Any]) -> Translate:
    """transformers' `generate` on the Hugging Face export (greedy: num_beams=1), on torch's threads."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the export is a local directory: never ask the Hub
    import torch
    import transformers

    torch.set_num_threads(request["threads"])
    tokenizer = transformers.AutoTokenizer.from_pretrained(request["path"])
    model = transformers.AutoModelForSeq2SeqLM.from_pretrained(request["path"]).eval()

    def translate(sentences: list[str]) -> list[str]:
        ids = tokenizer(sentences, truncation=True)["input_ids"]
        outputs = [""] * len(sentences)
        for group in by_length([len(i) - 1 for i in ids], request["batch_tokens"], request["beam_size"]):
            batch = tokenizer.pad({"input_ids": [ids[i] for i in group]}, return_tensors="pt")
            with torch.inference_mode():
                generated = model.generate(**batch, num_beams=request["beam_size"])  # (batch, out_len)
            texts = tokenizer.batch_decode(generated, skip_special_tokens=True)
            for i, text in zip(group, texts, strict=True):
                outputs[i] = text
        return outputs

    return translate


def argos_translator(request: dict[str, Any]) -> Translate:
    """argostranslate with the package installed (in its virtual environment): a call per sentence, its
    sentence splitter included, as LibreTranslate makes one per request."""
    os.environ |= {"ARGOS_INTRA_THREADS": str(request["threads"]), "ARGOS_INTER_THREADS": "1"}
    from argostranslate import package, translate

    package.install_from_path(Path(request["path"]))
    source, target = request["from"], request["to"]
    return lambda sentences: [translate.translate(sentence, source, target) for sentence in sentences]


RUNTIMES: dict[str, Callable[[dict[str, Any]], Translate]] = {
    "nmt": lambda request: nmt_translator(request, "torch"),
    "nmt-int8": lambda request: nmt_translator(request, "torch", int8=True),
    "nmt-ctranslate2": lambda request: nmt_translator(request, "ctranslate2"),
    "ctranslate2": ctranslate2_translator,
    "transformers": transformers_translator,
    "argos": argos_translator,
}


def openmp_libraries() -> list[str]:
    """The OpenMP runtimes mapped into this process (paths from /proc/self/maps; none where it is absent)."""
    maps = Path("/proc/self/maps")
    if not maps.is_file():
        return []
    paths = {line.split()[-1] for line in maps.read_text().splitlines() if "omp" in line.rsplit("/", 1)[-1]}
    return sorted(path for path in paths if path.startswith("/") and ".so" in path)


def main() -> None:
    request_path, answer_path = (Path(arg) for arg in sys.argv[1:3])
    request = json.loads(request_path.read_text(encoding="utf-8"))
    sentences = json.loads(Path(request["sentences"]).read_text(encoding="utf-8"))
    translate = RUNTIMES[request["runtime"]](request)
    translate(sentences[: request["warmup"]])  # untimed
    translations, seconds = fastest(lambda: translate(sentences), request["repeats"])
    answer = {
        "translations": translations,
        "seconds": seconds,
        "pid": os.getpid(),
        "modules": [name for name in RUNTIME_MODULES if name in sys.modules],
        "openmp": openmp_libraries(),
        "versions": {name: importlib.metadata.version(name) for name in VERSIONS.get(request["runtime"], ())},
    }
    answer_path.write_text(json.dumps(answer, ensure_ascii=False), encoding="utf-8")


if __name__ == "__main__":
    main()
