"""`nmt train`: a run directory prepared (locked, checked, the tokenizer trained and the data encoded), the
processes of a torchrun job joined, the model trained by nmt/train/loop.py (from scratch, from `last.pt` with
--resume, or from another run's weights with --init-from), then the final report."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from pathlib import Path

from nmt.config.schema import Config, with_absolute_paths
from nmt.config.yaml_file import load_saved_config, save_config
from nmt.data.cache import cache_root
from nmt.data.prepare import PreparedData, prepare_data
from nmt.data.target_vocabulary import save_target_vocabularies
from nmt.device.choice import resolve_device
from nmt.errors import UserError, process_rank
from nmt.evaluate.report import final_report
from nmt.run.checkpoint import check_training_state, trained_batch_tokens
from nmt.run.checkpoint_io import load_checkpoint
from nmt.run.directory import RunDir
from nmt.train.alignment_labels import with_training_links
from nmt.train.distributed import joined
from nmt.train.loop import Trainer
from nmt.train.monitor import run_log
from nmt.train.term_links import RunTermLinks
from nmt.train.warm_start import find_parent

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
    if cfg.tokenizer.vocabulary == "marian" and parent is None and not resume:
        raise UserError(
            "tokenizer.vocabulary=marian is the vocabulary of a model `nmt import` read; fine-tune that run "
            "with --init-from RUN_DIR (a vocabulary of nmt's own is trained with tokenizer.vocabulary="
            "sentencepiece)"
        )
    main = process_rank() == 0
    logs = contextlib.ExitStack()

    def prepare() -> PreparedData:
        prepare_run_dir(run_dir, cfg, resume, overwrite)
        logs.enter_context(run_log(run_dir.train_log))  # after --overwrite removed the old run's
        if parent and not resume:
            parent.copy_tokenizers(run_dir)
        data = prepared(cfg, run_dir.path, reuse_tokenizers=resume or parent is not None)
        save_config(cfg, run_dir.config)
        if cfg.data.directions.tagged:
            save_target_vocabularies(data, run_dir.path)
        return data

    # the main process holds the lock and writes train.log, to the end
    with run_dir.locked(hold=main) as training_started, logs:
        with joined(resolve_device(cfg.train.device)) as (world, device):
            data = world.main_first(prepare) or prepared(cfg, run_dir.path, reuse_tokenizers=True)
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
            training_started()  # from here on, a failure keeps what the run wrote
            best = trainer.run()
        if cfg.train.final_report and main:
            final_report(cfg, run_dir, cfg.train.device)
    return best


def prepared(cfg: Config, run_dir: Path, reuse_tokenizers: bool) -> PreparedData:
    """The run's data (nmt/data/prepare.py; its sources annotated with terms from word links under
    data.terminology, nmt/train/term_links.py), with guided alignment's labels beside the training pairs when
    `train.alignment.links` names them (nmt/train/alignment_labels.py)."""
    terms = cfg.data.terminology
    term_links = None if terms is None else RunTermLinks(cfg.data, terms, cache_root())
    data = prepare_data(cfg, run_dir, reuse_tokenizers, term_links=term_links)
    align = cfg.train.alignment
    if align is None or align.links is None:
        return data
    links = with_training_links(data.train, data.tokenizers, cfg.data, Path(align.links), cache_root())
    return dataclasses.replace(data, train=links)


def prepare_run_dir(run_dir: RunDir, cfg: Config, resume: bool, overwrite: bool) -> None:
    """Check the directory against --resume/--overwrite, create it and drop temporary files a killed run
    left behind."""
    if resume:
        if not run_dir.checkpoint("last").is_file():
            raise UserError(
                f"--resume: {run_dir} holds no last.pt to resume from; drop --resume to start a new run"
            )
        check_same_setup(run_dir, cfg)
    elif run_dir.trained():
        if not overwrite:
            raise UserError(
                f"{run_dir} already holds a trained run; pass --resume to continue it or --overwrite"
            )
        run_dir.remove_run()
    run_dir.create()
    for stale in run_dir.path.glob(".*.pt.*.tmp"):  # a checkpoint being written when a run was killed
        stale.unlink()


def check_same_setup(run_dir: RunDir, cfg: Config) -> None:
    """Resuming needs the same data, tokenizer and model settings as the run was started with, a last.pt
    that holds the training state, and the same token budget (the saved data position counts batches of
    it); checked before any data is read."""
    saved = with_absolute_paths(load_saved_config(run_dir.config))
    for section in ("data", "tokenizer", "model"):
        if getattr(saved, section) != getattr(cfg, section):
            raise UserError(
                f"the {section} settings differ from {run_dir.config}; resume with the same config"
            )
    last = run_dir.checkpoint("last")
    checkpoint = load_checkpoint(last)
    check_training_state(last, checkpoint)
    trained = trained_batch_tokens(checkpoint)
    if cfg.train.batch_tokens not in ("auto", trained):
        raise UserError(
            f"train.batch_tokens={cfg.train.batch_tokens} differs from the {trained} the run trained with, "
            f"which its saved data position belongs to; resume with train.batch_tokens={trained}, or start "
            f"a new run"
        )
