"""Where an imported run came from (RUN_DIR/origin.json): the source given to `nmt import`, the hub id and
revision where it was downloaded, the sha256 of every file read and the licence its model card names."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from nmt.atomic_files import atomic_write_text

READ = (
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
    "source.spm",
    "target.spm",
    "vocab.json",
    "target_vocab.json",
    "tokenizer_config.json",
    "README.md",
)  # the files `nmt import` reads, where present
SHARDS = ("model-*-of-*.safetensors", "pytorch_model-*-of-*.bin")  # the shards an index names


@dataclass(frozen=True)
class Origin:
    source: str  # as given: a directory or a hub id
    model_id: str | None = None  # the hub id, where downloaded
    revision: str | None = None  # the hub commit downloaded
    licence: str | None = None
    files: dict[str, str] = field(default_factory=dict)  # file name → sha256

    def with_files(self, directory: Path, licence: str | None) -> Origin:
        """This origin with the hashes of the files read from `directory` and the model card's licence."""
        names = [name for name in READ if (directory / name).is_file()]
        names += sorted(path.name for pattern in SHARDS for path in directory.glob(pattern))
        found = {name: sha256(directory / name) for name in names}
        return dataclasses.replace(self, files=found, licence=licence)

    def write(self, path: Path) -> None:
        atomic_write_text(path, json.dumps(dataclasses.asdict(self), indent=2) + "\n")


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
