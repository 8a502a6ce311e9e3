"""`nmt train`: a run directory prepared (locked, checked, the tokenizer trained and the data encoded), the
processes of a torchrun job joined, the model trained by nmt/trainer.py (from scratch, from `last.pt` with
--resume, or from another run's weights with --init-from), then the final report."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from nmt.config import Config, with_absolute_paths
from nmt.config_file import save_config
from nmt.data.prepare import PreparedData, prepare_data
from nmt.device import resolve_device
from nmt.distributed import joined
from nmt.report import final_report
from nmt.run_dir import RunDir
from nmt.trainer import Trainer
from nmt.warm_start import find_parent

log = logging.getLogger(__name__)


def train(
    cfg: Config, out: Path, resume: bool = False, overwrite: bool = False, init_from: Path | None = None
) -> Path:
    """Train the configured model into the run directory `out` (from the weights and sentencepiece model of
    the run `init_from` when given: fine-tuning); returns the path of the best checkpoint.

    Under torchrun every process calls this: the main one checks and prepares the run directory (training
    sentencepiece) while the others wait, then they load what it wrote. Relative data paths are made absolute
    first, so that config.yaml in the run directory works from any working directory.
    """
    cfg, run_dir = with_absolute_paths(cfg), RunDir(out)
    parent, cfg = find_parent(cfg, init_from) if init_from else (None, cfg)

    def prepare() -> PreparedData:
        run_dir.prepare(cfg, resume, overwrite)
        if parent and not resume:
            parent.copy_tokenizers(run_dir)
        data = prepare_data(cfg, run_dir.path, reuse_tokenizers=resume or parent is not None)
        save_config(cfg, run_dir.config)
        return data

    with run_dir.locked(hold=os.environ.get("RANK", "0") == "0"):  # the main process holds it, to the end
        with joined(resolve_device(cfg.train.device)) as (world, device):
            data = world.main_first(prepare) or prepare_data(cfg, run_dir.path, reuse_tokenizers=True)
            trainer = Trainer(cfg, run_dir, data, device, world)
            if resume:
                trainer.restore()
            elif parent:
                trainer.model.load_state_dict(parent.weights())
                trainer.progress.parent = str(parent.checkpoint)
                log.info("starting from the weights of %s", parent.checkpoint)
            trainer.fit_batch_tokens()
            log.info(
                "training %s (%.1fM parameters) on %s%s; %s",
                cfg.model.type,
                sum(p.numel() for p in trainer.model.parameters()) / 1e6,
                device,
                f" in each of {world.size} processes" if world.size > 1 else "",
                world.describe_batch(cfg.train, trainer.progress.batch_tokens),
            )
            best = trainer.run()
            main = world.is_main
        if cfg.train.final_report and main:
            final_report(cfg, run_dir, cfg.train.device)
    return best
