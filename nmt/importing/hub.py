"""A model on the Hugging Face hub, downloaded with huggingface_hub into its cache (only the files `nmt
import` reads: no code, never `trust_remote_code`); an unreachable hub is one line naming the local form."""

from __future__ import annotations

from pathlib import Path

from nmt.errors import UserError
from nmt.importing.origin import READ, SHARDS, Origin


def download(model_id: str) -> tuple[Path, Origin]:
    """The local snapshot of the hub model `model_id` and its origin (id and commit)."""
    try:
        import huggingface_hub
        from huggingface_hub.errors import RepositoryNotFoundError, RevisionNotFoundError
    except ImportError:
        raise UserError(
            f"{model_id} is not a directory, and huggingface_hub, which downloads hub models, is not "
            f"installed: install it with `pip install 'nmt[huggingface]'`, or pass a downloaded model "
            f"directory"
        ) from None
    try:
        path = Path(huggingface_hub.snapshot_download(model_id, allow_patterns=[*READ, *SHARDS]))
    except (RepositoryNotFoundError, RevisionNotFoundError):
        raise UserError(f"the Hugging Face hub has no model {model_id}; check the id") from None
    except Exception as err:  # offline, unreachable, refused: huggingface_hub and requests raise their own
        name = model_id.rsplit("/", 1)[-1]
        raise UserError(
            f"cannot download {model_id}: the Hugging Face hub is unreachable ({type(err).__name__}); "
            f"download the model where it is reachable (`hf download {model_id} --local-dir {name}`) and "
            f"import the directory: nmt import {name} --out RUN_DIR"
        ) from None
    return path, Origin(source=model_id, model_id=model_id, revision=path.name)
