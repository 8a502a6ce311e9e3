"""The speed ceiling of a Multi30k-sized encoder-decoder Transformer written in plain PyTorch, without nmt.

    python -m benchmarks.ceiling_bench [--json FILE] [--time-budget S] [--smoke]

The model is configs/multi30k-transformer.yaml's (`Sizes`; SDPA, bf16 autocast, fused AdamW on CUDA). It times
training updates at fixed padded batches, eager and torch.compile'd, with and without a source mask, with
their model FLOPs utilisation against a measured bf16 matmul peak; and greedy decoding of 1,000 sentences for
40 steps with a key/value cache and without. `--smoke`: tiny sizes for a CPU; no training variant starts
after `--time-budget` seconds.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

PAD, BOS, EOS = 1, 2, 3
Batch = tuple[Tensor, Tensor, Tensor, Tensor | None]  # source, target in, target out, mask (or None)
Shape = tuple[int, int, int]  # a batch's sentences, source tokens, target tokens
SEED = 0  # of the weights and of the batches


@dataclass(frozen=True)
class Sizes:
    """The model's sizes (configs/multi30k-transformer.yaml's): vocabulary, width, heads, feed-forward width,
    encoder and decoder layers, dropout, positions."""

    vocab: int = 8000
    d: int = 512
    h: int = 8
    ff: int = 2048
    n_enc: int = 3
    n_dec: int = 3
    p: float = 0.1
    max_len: int = 256


def sinusoid(length: int, d: int) -> Tensor:
    """(length, d) position table: sin on even dimensions, cos on odd ones."""
    table = torch.zeros(length, d)
    position = torch.arange(length).unsqueeze(1).float()
    frequency = torch.exp(torch.arange(0, d, 2).float() * (-math.log(10000.0) / d))
    table[:, 0::2] = torch.sin(position * frequency)
    table[:, 1::2] = torch.cos(position * frequency)
    return table


class SelfAttention(nn.Module):
    def __init__(self, sizes: Sizes) -> None:
        super().__init__()
        self.heads, self.dropout, d = sizes.h, sizes.p, sizes.d
        self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)

    def forward(self, x: Tensor, mask: Tensor | None = None, causal: bool = False) -> Tensor:
        b, n, d = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        p = self.dropout if self.training else 0.0
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, dropout_p=p)
        return self.out(a.transpose(1, 2).reshape(b, n, d))  # (batch, n, d)


class CrossAttention(nn.Module):
    def __init__(self, sizes: Sizes) -> None:
        super().__init__()
        self.heads, self.dropout, d = sizes.h, sizes.p, sizes.d
        self.q, self.kv, self.out = nn.Linear(d, d), nn.Linear(d, 2 * d), nn.Linear(d, d)

    def keys_values(self, memory: Tensor) -> tuple[Tensor, Tensor]:
        b, s, d = memory.shape
        k, v = self.kv(memory).view(b, s, 2, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        return k, v  # (batch, heads, s, d_head) each

    def forward(self, x: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None) -> Tensor:
        b, n, d = x.shape
        q = self.q(x).view(b, n, self.heads, d // self.heads).transpose(1, 2)
        p = self.dropout if self.training else 0.0
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)
        return self.out(a.transpose(1, 2).reshape(b, n, d))


class FeedForward(nn.Module):
    def __init__(self, sizes: Sizes) -> None:
        super().__init__()
        d, ff = sizes.d, sizes.ff
        self.w1, self.w2, self.drop = nn.Linear(d, ff), nn.Linear(ff, d), nn.Dropout(sizes.p)

    def forward(self, x: Tensor) -> Tensor:
        return self.w2(self.drop(F.relu(self.w1(x))))


class EncoderLayer(nn.Module):
    def __init__(self, sizes: Sizes) -> None:
        super().__init__()
        self.ln1, self.att = nn.LayerNorm(sizes.d), SelfAttention(sizes)
        self.ln2, self.ffn = nn.LayerNorm(sizes.d), FeedForward(sizes)
        self.drop = nn.Dropout(sizes.p)

    def forward(self, x: Tensor, mask: Tensor | None) -> Tensor:
        x = x + self.drop(self.att(self.ln1(x), mask=mask))
        return x + self.drop(self.ffn(self.ln2(x)))


class DecoderLayer(nn.Module):
    def __init__(self, sizes: Sizes) -> None:
        super().__init__()
        self.ln1, self.att = nn.LayerNorm(sizes.d), SelfAttention(sizes)
        self.ln2, self.cross = nn.LayerNorm(sizes.d), CrossAttention(sizes)
        self.ln3, self.ffn = nn.LayerNorm(sizes.d), FeedForward(sizes)
        self.drop = nn.Dropout(sizes.p)

    def forward(self, x: Tensor, memory: Tensor, mask: Tensor | None) -> Tensor:
        x = x + self.drop(self.att(self.ln1(x), causal=True))
        k, v = self.cross.keys_values(memory)
        x = x + self.drop(self.cross(self.ln2(x), k, v, mask=mask))
        return x + self.drop(self.ffn(self.ln3(x)))


class Seq2SeqTransformer(nn.Module):
    def __init__(self, sizes: Sizes) -> None:
        super().__init__()
        self.d, self.h, d = sizes.d, sizes.h, sizes.d
        self.emb = nn.Embedding(sizes.vocab, d, padding_idx=PAD)  # source, target and output
        nn.init.normal_(self.emb.weight, std=d**-0.5)
        self.register_buffer("pe", sinusoid(sizes.max_len, d), persistent=False)
        self.enc = nn.ModuleList([EncoderLayer(sizes) for _ in range(sizes.n_enc)])
        self.dec = nn.ModuleList([DecoderLayer(sizes) for _ in range(sizes.n_dec)])
        self.enc_ln, self.dec_ln = nn.LayerNorm(d), nn.LayerNorm(d)
        self.drop = nn.Dropout(sizes.p)

    def embed(self, ids: Tensor, offset: int = 0) -> Tensor:
        n = ids.shape[1]
        return self.drop(self.emb(ids) * math.sqrt(self.d) + self.pe[offset : offset + n])

    def encode(self, src: Tensor, mask: Tensor | None) -> Tensor:
        x = self.embed(src)
        for layer in self.enc:
            x = layer(x, mask)
        return self.enc_ln(x)  # (batch, s, d)

    def decode(self, tgt_in: Tensor, memory: Tensor, mask: Tensor | None) -> Tensor:
        x = self.embed(tgt_in)
        for layer in self.dec:
            x = layer(x, memory, mask)
        return F.linear(self.dec_ln(x), self.emb.weight)  # (batch, t, vocab): the tied output projection

    def forward(self, src: Tensor, tgt_in: Tensor, mask: Tensor | None) -> Tensor:
        return self.decode(tgt_in, self.encode(src, mask), mask)


def loss_fn(
    model: Seq2SeqTransformer, src: Tensor, tgt_in: Tensor, tgt_out: Tensor, mask: Tensor | None
) -> Tensor:
    logits = model(src, tgt_in, mask)
    flat = logits.reshape(-1, logits.shape[-1]).float()
    return F.cross_entropy(flat, tgt_out.reshape(-1), ignore_index=PAD, label_smoothing=0.1)


def train_flops(sizes: Sizes, b: int, s: int, t: int) -> int:
    """Matmul FLOPs of one training update of `b` sentences of `s` source and `t` target tokens: 3 × the
    forward pass (a multiply-add is 2 FLOPs a weight and a token; attention's QKᵀ and AV count the whole
    Lq × Lk, the causal half included)."""
    d, ff, n_enc, n_dec = sizes.d, sizes.ff, sizes.n_enc, sizes.n_dec
    per_src = n_enc * (4 * d * d + 2 * d * ff) + n_dec * 2 * d * d  # encoder layers, cross-attention K, V
    per_tgt = n_dec * (6 * d * d + 2 * d * ff) + d * sizes.vocab  # self-attention, cross Q and O, FFN, output
    dense = 2 * (per_src * b * s + per_tgt * b * t)
    attention = 4 * d * b * (n_enc * s * s + n_dec * (t * t + t * s))
    return 3 * (dense + attention)


def timed(device: torch.device, work: Callable[[], Any]) -> tuple[Any, float]:
    """`work()`'s result and its wall seconds, the device synchronised before and after."""
    if device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    result = work()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return result, time.perf_counter() - start


def make_batches(
    n: int, shape: Shape, vocab: int, device: torch.device, with_mask: bool, generator: torch.Generator
) -> list[Batch]:
    """`n` random batches of `shape` (sentences, source and target tokens); with a mask, each source is
    60–100% of the padded length."""
    b, s, t = shape
    batches = []
    for _ in range(n):
        src = torch.randint(4, vocab, (b, s), generator=generator)
        tgt = torch.randint(4, vocab, (b, t + 1), generator=generator)
        tgt[:, 0] = BOS
        mask = None
        if with_mask:
            lengths = torch.randint(int(0.6 * s), s + 1, (b,), generator=generator)
            keep = torch.arange(s)[None, :] < lengths[:, None]  # (b, s)
            src[~keep] = PAD
            mask = keep[:, None, None, :].to(device)  # (b, 1, 1, s), True = attend
        tgt_in, tgt_out = tgt[:, :-1].contiguous().to(device), tgt[:, 1:].contiguous().to(device)
        batches.append((src.to(device), tgt_in, tgt_out, mask))
    return batches


def bench_train(
    sizes: Sizes, shape: Shape, compiled: bool, with_mask: bool, device: torch.device, warm: int, iters: int
) -> dict[str, Any]:
    """Seconds per update (the median of three timed windows of `iters` updates, after `warm`)."""
    torch.manual_seed(SEED)
    model = Seq2SeqTransformer(sizes).to(device).train()
    fused = device.type == "cuda"
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-4, betas=(0.9, 0.98), fused=fused)
    loss_of = torch.compile(loss_fn) if compiled else loss_fn
    batches = make_batches(8, shape, sizes.vocab, device, with_mask, torch.Generator().manual_seed(SEED))

    def steps(count: int) -> Tensor:
        for i in range(count):
            src, tgt_in, tgt_out, mask = batches[i % len(batches)]
            with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
                loss = loss_of(model, src, tgt_in, tgt_out, mask)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        return loss

    _, warmup_s = timed(device, lambda: steps(warm))
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    windows = []
    for _ in range(3):
        loss, seconds = timed(device, lambda: steps(iters))
        windows.append(seconds / iters)
    peak = torch.cuda.max_memory_allocated() / 2**20 if device.type == "cuda" else float("nan")
    assert torch.isfinite(loss).item(), "non-finite loss"
    real_src = int((batches[0][0] != PAD).sum())
    return {
        "step_s": sorted(windows)[1],
        "step_s_windows": windows,
        "warmup_s": warmup_s,
        "peak_mib": peak,
        "loss": loss.item(),
        "real_src_tokens_batch0": real_src,
    }


@torch.no_grad()
def greedy_kv(model: Seq2SeqTransformer, src: Tensor, mask: Tensor | None, steps: int) -> Tensor:
    """Greedy decoding for `steps` steps with a self-attention key/value cache and the cross-attention's keys
    and values computed once (random weights never finish, so every step runs)."""
    b, d, h = src.shape[0], model.d, model.h
    memory = model.encode(src, mask)
    cross = [layer.cross.keys_values(memory) for layer in model.dec]
    k_cache = [torch.empty(b, h, steps, d // h, device=src.device, dtype=memory.dtype) for _ in model.dec]
    v_cache = [torch.empty_like(k) for k in k_cache]
    y = torch.full((b, 1), BOS, dtype=torch.long, device=src.device)
    outputs = []
    for step in range(steps):
        x = model.embed(y, offset=step)
        for i, layer in enumerate(model.dec):
            q, k, v = layer.att.qkv(layer.ln1(x)).view(b, 1, 3, h, d // h).permute(2, 0, 3, 1, 4)
            k_cache[i][:, :, step : step + 1], v_cache[i][:, :, step : step + 1] = k, v
            a = F.scaled_dot_product_attention(q, k_cache[i][:, :, : step + 1], v_cache[i][:, :, : step + 1])
            x = x + layer.att.out(a.transpose(1, 2).reshape(b, 1, d))
            x = x + layer.cross(layer.ln2(x), *cross[i], mask=mask)
            x = x + layer.ffn(layer.ln3(x))
        y = F.linear(model.dec_ln(x[:, -1]), model.emb.weight).argmax(-1, keepdim=True)  # (b, 1)
        outputs.append(y)
    return torch.cat(outputs, 1)  # (b, steps)


@torch.no_grad()
def greedy_nocache(model: Seq2SeqTransformer, src: Tensor, mask: Tensor | None, steps: int) -> Tensor:
    """Greedy decoding that runs the decoder over the whole prefix at every step."""
    memory = model.encode(src, mask)
    ys = torch.full((src.shape[0], 1), BOS, dtype=torch.long, device=src.device)
    for _ in range(steps):
        logits = model.decode(ys, memory, mask)[:, -1]
        ys = torch.cat([ys, logits.argmax(-1, keepdim=True)], 1)
    return ys[:, 1:]


def bench_decode(
    sizes: Sizes, n_sent: int, s: int, steps: int, device: torch.device, decode: Callable[..., Tensor]
) -> dict[str, Any]:
    """Sentences per second of `decode` on one batch of `n_sent` sentences (the median of 5 runs)."""
    torch.manual_seed(SEED)
    model = Seq2SeqTransformer(sizes).to(device).eval()
    generator = torch.Generator().manual_seed(SEED)
    src, _, _, mask = make_batches(1, (n_sent, s, 4), sizes.vocab, device, True, generator)[0]

    def run() -> Tensor:
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
            return decode(model, src, mask, steps)

    run()  # warm-up
    outputs, times = zip(*(timed(device, run) for _ in range(5)), strict=True)
    assert outputs[-1].shape == (n_sent, steps)
    median = sorted(times)[len(times) // 2]
    return {
        "total_s": median,
        "all_s": list(times),
        "sent_per_s": n_sent / median,
        "ms_per_step": 1000 * median / steps,
    }


def matmul_peak(device: torch.device, n: int = 8192, reps: int = 10) -> float:
    """FLOP/s of a large bf16 matmul on the GPU."""
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        a @ b
    end.record()
    torch.cuda.synchronize()
    return 2 * n**3 * reps / (start.elapsed_time(end) / 1000)


def main() -> None:
    parse = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parse.add_argument("--json", help="also write the results here")
    parse.add_argument("--smoke", action="store_true", help="tiny sizes, for a CPU")
    parse.add_argument("--time-budget", type=float, default=420.0, help="no variant starts after it (s)")
    args = parse.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    started = time.perf_counter()
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    sizes = Sizes()
    name = torch.cuda.get_device_name() if device.type == "cuda" else "cpu"
    results: dict[str, Any] = {"torch": torch.__version__, "device": name}
    results["params_total"] = sum(p.numel() for p in Seq2SeqTransformer(sizes).parameters())
    if device.type == "cuda":
        results["bf16_matmul_peak_tflops"] = matmul_peak(device) / 1e12
    peak = results.get("bf16_matmul_peak_tflops", float("nan")) * 1e12
    variants = [  # (B, S, T), compiled, mask
        ((256, 24, 24), False, False),
        ((256, 24, 24), True, False),
        ((256, 24, 24), True, True),
        ((256, 24, 24), False, True),
        ((1024, 24, 24), True, False),
    ]
    warm, iters = 15, 30
    if args.smoke:
        variants, warm, iters = [((8, 6, 7), False, False), ((8, 6, 7), False, True)], 1, 2
    results["train"] = []
    for (b, s, t), compiled, with_mask in variants:
        if time.perf_counter() - started > args.time_budget:
            print(f"skip B={b} compiled={compiled} mask={with_mask}: time budget", flush=True)
            continue
        run = bench_train(sizes, (b, s, t), compiled, with_mask, device, warm, iters)
        flops, tokens = train_flops(sizes, b, s, t), {"tgt": b * t, "total": b * (s + t)}
        run |= {"B": b, "S": s, "T": t, "compiled": compiled, "src_pad_mask": with_mask, "flops_step": flops}
        run |= {f"{k}_tok_per_s": n / run["step_s"] for k, n in tokens.items()}
        run |= {"tflops": flops / run["step_s"] / 1e12, "mfu": flops / run["step_s"] / peak}
        if device.type == "cuda":
            torch.cuda.empty_cache()
        results["train"].append(run)
        print(
            f"train B={b} S={s} T={t} compiled={compiled} mask={with_mask}: "
            f"step {1000 * run['step_s']:.2f} ms, "
            f"tgt {run['tgt_tok_per_s']:,.0f} tok/s, src+tgt {run['total_tok_per_s']:,.0f} tok/s, "
            f"{run['tflops']:.1f} TFLOP/s, MFU {100 * run['mfu']:.1f}%, peak {run['peak_mib']:.0f} MiB, "
            f"warm-up {run['warmup_s']:.1f} s",
            flush=True,
        )
    n_sent, s_dec, steps = (16, 6, 5) if args.smoke else (1000, 40, 40)
    results["decode"] = {}
    for key, decode in (("greedy_kvcache", greedy_kv), ("greedy_nocache", greedy_nocache)):
        run = bench_decode(sizes, n_sent, s_dec, steps, device, decode)
        run.update(n_sent=n_sent, src_len_padded=s_dec, steps=steps)
        results["decode"][key] = run
        print(
            f"decode {key}: {n_sent} sentences × {steps} steps in {run['total_s'] * 1000:.1f} ms → "
            f"{run['sent_per_s']:,.0f} sent/s ({run['ms_per_step']:.2f} ms/step)",
            flush=True,
        )
    results["wall_s"] = time.perf_counter() - started
    print(json.dumps({k: v for k, v in results.items() if k not in ("train", "decode")}))
    if args.json:
        with open(args.json, "w") as file:
            json.dump(results, file, indent=1)


if __name__ == "__main__":
    main()
