"""`nmt benchmark`: training throughput, memory, time to a BLEU score and decoding speed, in one run, with the
host's work per training update and per decoding step (operators, host syncs; kernel launches on CUDA).

Every timed region starts after warm-up and ends with a device synchronisation, so GPU work is counted
when it is done, not when it is queued.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import platform
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from nmt.bench.profiling import counting_steps, peak_resident_gib, profile_updates
from nmt.config.schema import Config, replace
from nmt.data.prepare import prepare_data
from nmt.data.splits import read_directions
from nmt.data.synthetic import write_reordering_corpus
from nmt.decode.search import Hypothesis
from nmt.decode.translator import TorchTranslator
from nmt.device.choice import resolve_device
from nmt.limits import MAX_SIZE
from nmt.run.directory import RunDir
from nmt.run.metrics import read_metrics
from nmt.train.loop import Trainer
from nmt.train.term_links import RunTermLinks

log = logging.getLogger(__name__)

PROFILED_UPDATES = 5  # after the timed ones, under torch.profiler: operators, launches, syncs per update


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(device: torch.device, work: Callable[[], Any]) -> tuple[Any, float]:
    """Result of `work()` and its wall seconds, synchronised before and after."""
    synchronize(device)
    started = time.perf_counter()
    result = work()
    synchronize(device)
    return result, time.perf_counter() - started


def synthetic_corpus(directory: Path, src_lang: str, tgt_lang: str) -> Path:
    """A reordering corpus the size of Multi30k (29k/1k/1k pairs, 4–25 words, mean ≈ 14)."""
    return write_reordering_corpus(
        directory,
        train=29000,
        valid=1014,
        test=1000,
        vocab=4000,
        min_len=4,
        max_len=25,
        src_lang=src_lang,
        tgt_lang=tgt_lang,
    )


def measure_training(trainer: Trainer, warmup_steps: int, max_steps: int) -> dict[str, float]:
    """Steady-state training speed: an untimed warm-up epoch (at least `warmup_steps` updates), then up to one
    epoch (at most `max_steps` updates) timed.

    The warm-up must cover a whole epoch: every new batch shape costs kernel selection and allocator growth
    the first time (on an H100 the first epoch measured 56k target tok/s, later epochs 100k-124k)."""
    device = trainer.device

    def updates(count: int, epochs: int = 0) -> tuple[int, torch.Tensor, torch.Tensor]:
        """Train at most `count` updates (within `epochs` epochs when given) from the trainer's position."""
        done, target, total = 0, torch.zeros((), device=device), torch.zeros((), device=device)
        with contextlib.closing(trainer.stream.updates(trainer.progress, epochs)) as stream:
            for batches in itertools.islice(stream, count):
                result = trainer.train_step(batches)
                if result is not None:  # None: skipped for lack of GPU memory
                    target += result[1]
                    total += result[1] + sum(b.src_mask.sum() for b in batches)
                done += 1
        return done, target, total

    updates(warmup_steps)
    updates(10**9, epochs=1)  # to the epoch's end: every batch shape seen, kernels chosen
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    (steps, target, total), seconds = timed(device, lambda: updates(max_steps, epochs=1))
    epoch_tokens = int(trainer.data.train.lengths()[1].sum())
    result = {
        "train_steps_timed": steps,
        "train_seconds": seconds,
        "train_target_tokens_per_s": target.item() / seconds,
        "train_tokens_per_s": total.item() / seconds,
        "ms_per_step": 1000 * seconds / steps,
    }
    result["epoch_seconds"] = epoch_tokens / result["train_target_tokens_per_s"]
    if device.type == "cuda":
        result["peak_memory_allocated_gib"] = torch.cuda.max_memory_allocated(device) / 2**30
        result["peak_memory_reserved_gib"] = torch.cuda.max_memory_reserved(device) / 2**30
    return result | update_costs(trainer, lambda: updates(PROFILED_UPDATES)[0], seconds / steps)


def update_costs(trainer: Trainer, work: Callable[[], int], seconds_per_update: float) -> dict[str, Any]:
    """Why an update takes its time: operators, kernel launches and host syncs per update (profiled), the
    fraction of an update's wall time the GPU spends in kernels, the static shapes and the captured or
    compiled ones, and the process's peak resident memory."""
    costs = profile_updates(work, trainer.device)
    busy = None if costs.kernel_seconds is None else costs.kernel_seconds / seconds_per_update
    graphs, compiled = trainer.update.graphs, trainer.update.compile_log
    return {
        "operators_per_update": costs.operators,
        "optimizer_operators_per_update": costs.optimizer_operators,
        "kernel_launches_per_update": costs.kernel_launches,
        "host_syncs_per_update": costs.host_syncs,
        "gpu_busy_fraction": busy,
        "static_shapes": len(trainer.stream.buckets) if trainer.stream.buckets else None,
        "shapes_captured_or_compiled": len(graphs.captured)
        if graphs
        else len(compiled.seen)
        if compiled
        else 0,
        "capture_or_compile_seconds": graphs.capture_seconds
        if graphs
        else compiled.seconds
        if compiled
        else 0.0,
        "peak_resident_memory_gib": peak_resident_gib(),
    }


def measure_time_to_bleu(
    cfg: Config, run_dir: RunDir, data: Any, device: torch.device, target: float, budget: float
) -> tuple[Trainer, dict[str, float | None]]:
    """Train from scratch until validation BLEU reaches `target` or `budget` seconds pass."""
    cfg = replace(
        cfg, train={"target_bleu": target, "max_time": budget, "max_steps": 0, "max_epochs": 0, "patience": 0}
    )
    trainer = Trainer(cfg, run_dir, data, device)
    trainer.run()
    records = read_metrics(run_dir)
    valid = [r for r in records if r["kind"] == "valid"]
    reached = next((r for r in valid if r["bleu"] >= target), None)
    return trainer, {
        "bleu_target": target,
        "seconds_to_bleu": reached["elapsed"] if reached else None,
        "best_valid_bleu": max((r["bleu"] for r in valid), default=None),
        "steps_to_bleu": reached["step"] if reached else None,
    }


def measure_decoding(
    translator: TorchTranslator,
    device: torch.device,
    sources: list[list[int]],
    beam_size: int,
    cuda_graphs: bool,
) -> dict[str, float | None]:
    """Decode all `sources` in one batch (after one untimed warm-up run), with or without CUDA graphs; the
    keys of the figures with graphs end in `_graphs`. Without graphs, also the costs of a step."""
    searching = translator.with_search(
        cuda_graphs=cuda_graphs, beam_size=beam_size, nbest=1, batch_tokens=MAX_SIZE
    )

    def run() -> list[list[Hypothesis]]:
        return searching.search(sources)

    run()
    outputs, seconds = timed(device, run)
    tokens = sum(len(o[0].tokens) + 1 for o in outputs)
    suffix = "_graphs" if cuda_graphs else ""
    result: dict[str, float | None] = {
        f"beam{beam_size}_sent_per_s{suffix}": len(sources) / seconds,
        f"beam{beam_size}_tokens_per_s{suffix}": tokens / seconds,
    }
    return result if cuda_graphs else result | step_costs(searching, device, sources, beam_size)


def step_costs(
    translator: TorchTranslator, device: torch.device, sources: list[list[int]], beam_size: int
) -> dict[str, float | None]:
    """Why a decoding step takes its time: operators, kernel launches (CUDA) and host syncs per step of one
    more eager search of `sources`, profiled."""
    costs = profile_updates(counting_steps(translator.model, lambda: translator.search(sources)), device)
    return {
        f"beam{beam_size}_operators_per_step": costs.operators,
        f"beam{beam_size}_kernel_launches_per_step": costs.kernel_launches,
        f"beam{beam_size}_host_syncs_per_step": costs.host_syncs,
    }


def benchmark(
    cfg: Config,
    data_dir: Path | None,
    warmup_steps: int,
    max_steps: int,
    bleu_target: float,
    bleu_budget: float,
    decode_sentences: int,
) -> dict[str, Any]:
    """Run every measurement for the configured model; returns a flat dict of settings and figures.
    `bleu_budget <= 0` measures training speed only; `decode_sentences=0` skips decoding."""
    device = resolve_device(cfg.train.device)
    with tempfile.TemporaryDirectory(prefix="nmt-bench-") as tmp:
        corpus = data_dir or synthetic_corpus(Path(tmp) / "corpus", cfg.data.src_lang, cfg.data.tgt_lang)
        cfg = replace(cfg, data={"dir": str(corpus)})
        run_dir = RunDir(Path(tmp) / "run")
        run_dir.path.mkdir()
        cache, terms = Path(tmp) / "cache", cfg.data.terminology
        links = None if terms is None else RunTermLinks(cfg.data, terms, cache)
        data = prepare_data(cfg, run_dir.path, reuse_tokenizers=False, cache=cache, term_links=links)
        trainer = Trainer(cfg, run_dir, data, device)
        trainer.fit_batch_tokens()
        cfg = replace(cfg, train={"batch_tokens": trainer.progress.batch_tokens})  # `auto` resolved
        result: dict[str, Any] = environment(cfg, device) | {
            "corpus": str(data_dir or "synthetic (Multi30k-sized)")
        }
        result |= measure_training(trainer, warmup_steps, max_steps)
        if bleu_budget <= 0:  # decoding an untrained model measures nothing useful either
            return result
        trainer, bleu = measure_time_to_bleu(cfg, run_dir, data, device, bleu_target, bleu_budget)
        result |= bleu
        (test,) = read_directions(cfg.data, "test").values()
        translator = TorchTranslator.of(trainer.model.eval(), cfg, data.tokenizers)
        sources = translator.encode(test.src[:decode_sentences])
        result["decode_sentences"] = len(sources)
        graphs = (False, True) if device.type == "cuda" else (False,)
        for beam in (1, 5) if sources else ():
            for cuda_graphs in graphs:
                result |= measure_decoding(translator, device, sources, beam, cuda_graphs)
    return result


def environment(cfg: Config, device: torch.device) -> dict[str, Any]:
    """What the figures were measured on and with."""
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu"
    amp = cfg.train.amp and device.type == "cuda"
    return {
        "model": cfg.model.type,
        "device": name,
        "torch": torch.__version__,
        "dtype": "bf16 autocast" if amp else "fp32",
        "compile": cfg.train.compile and device.type == "cuda",
        "cuda_graphs": cfg.train.cuda_graphs and device.type == "cuda",
        "batch_tokens": cfg.train.batch_tokens,
        "accumulate": cfg.train.accumulate,
    }


def format_table(result: dict[str, Any]) -> str:
    """The results as an aligned two-column table."""
    width = max(len(key) for key in result)
    lines = []
    for key, value in result.items():
        shown = f"{value:,.2f}" if isinstance(value, float) else str(value)
        lines.append(f"{key:<{width}}  {shown}")
    return "\n".join(lines)
