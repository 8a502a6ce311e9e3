"""The speed ceiling of a Multi30k-sized encoder-decoder Transformer written in plain PyTorch, without nmt.

    python -m benchmarks.ceiling_bench [--json FILE] [--time-budget S] [--smoke]

configs/multi30k-transformer.yaml's model (SDPA, bf16 autocast, fused AdamW on CUDA): target tok/s of training
updates at fixed padded batches (`VARIANTS`), and greedy decoding of 1,000 sentences for 40 steps with a
key/value cache. `--smoke`: tiny batches for a CPU; no training variant starts after `--time-budget` seconds.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

PAD, BOS = 1, 2
Batch = tuple[Tensor, Tensor, Tensor, Tensor | None]  # source, target in, target out, mask (or None)
Shape = tuple[int, int, int]  # a batch's sentences, source tokens, target tokens
SEED = 0  # of the weights and of the batches
# configs/multi30k-transformer.yaml's model: 3 encoder and 3 decoder layers
VOCAB, D_MODEL, HEADS, FF_DIM, LAYERS, DROPOUT, MAX_LEN = 8000, 512, 8, 2048, 3, 0.1, 256


def sinusoid(length: int, d: int) -> Tensor:
    """(length, d) position table: sin on even dimensions, cos on odd ones."""
    table = torch.zeros(length, d)
    position = torch.arange(length).unsqueeze(1).float()
    frequency = torch.exp(torch.arange(0, d, 2).float() * (-math.log(10000.0) / d))
    table[:, 0::2] = torch.sin(position * frequency)
    table[:, 1::2] = torch.cos(position * frequency)
    return table


class SelfAttention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.qkv, self.out = nn.Linear(D_MODEL, 3 * D_MODEL), nn.Linear(D_MODEL, D_MODEL)

    def forward(self, x: Tensor, mask: Tensor | None = None, causal: bool = False) -> Tensor:
        b, n, d = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, HEADS, d // HEADS).permute(2, 0, 3, 1, 4)
        p = DROPOUT if self.training else 0.0
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, dropout_p=p)
        return self.out(a.transpose(1, 2).reshape(b, n, d))  # (batch, n, d)


class CrossAttention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.q, self.kv = nn.Linear(D_MODEL, D_MODEL), nn.Linear(D_MODEL, 2 * D_MODEL)
        self.out = nn.Linear(D_MODEL, D_MODEL)

    def keys_values(self, memory: Tensor) -> tuple[Tensor, Tensor]:
        b, s, d = memory.shape
        k, v = self.kv(memory).view(b, s, 2, HEADS, d // HEADS).permute(2, 0, 3, 1, 4)
        return k, v  # (batch, heads, s, d_head) each

    def forward(self, x: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None) -> Tensor:
        b, n, d = x.shape
        q = self.q(x).view(b, n, HEADS, d // HEADS).transpose(1, 2)
        p = DROPOUT if self.training else 0.0
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)
        return self.out(a.transpose(1, 2).reshape(b, n, d))


class FeedForward(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w1, self.w2 = nn.Linear(D_MODEL, FF_DIM), nn.Linear(FF_DIM, D_MODEL)
        self.drop = nn.Dropout(DROPOUT)

    def forward(self, x: Tensor) -> Tensor:
        return self.w2(self.drop(F.relu(self.w1(x))))


class EncoderLayer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln1, self.att = nn.LayerNorm(D_MODEL), SelfAttention()
        self.ln2, self.ffn = nn.LayerNorm(D_MODEL), FeedForward()
        self.drop = nn.Dropout(DROPOUT)

    def forward(self, x: Tensor, mask: Tensor | None) -> Tensor:
        x = x + self.drop(self.att(self.ln1(x), mask=mask))
        return x + self.drop(self.ffn(self.ln2(x)))


class DecoderLayer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln1, self.att = nn.LayerNorm(D_MODEL), SelfAttention()
        self.ln2, self.cross = nn.LayerNorm(D_MODEL), CrossAttention()
        self.ln3, self.ffn = nn.LayerNorm(D_MODEL), FeedForward()
        self.drop = nn.Dropout(DROPOUT)

    def forward(self, x: Tensor, memory: Tensor, mask: Tensor | None) -> Tensor:
        x = x + self.drop(self.att(self.ln1(x), causal=True))
        k, v = self.cross.keys_values(memory)
        x = x + self.drop(self.cross(self.ln2(x), k, v, mask=mask))
        return x + self.drop(self.ffn(self.ln3(x)))


class Seq2SeqTransformer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(VOCAB, D_MODEL, padding_idx=PAD)  # source, target and output
        nn.init.normal_(self.emb.weight, std=D_MODEL**-0.5)
        self.register_buffer("pe", sinusoid(MAX_LEN, D_MODEL), persistent=False)
        self.enc = nn.ModuleList([EncoderLayer() for _ in range(LAYERS)])
        self.dec = nn.ModuleList([DecoderLayer() for _ in range(LAYERS)])
        self.enc_ln, self.dec_ln = nn.LayerNorm(D_MODEL), nn.LayerNorm(D_MODEL)
        self.drop = nn.Dropout(DROPOUT)

    def embed(self, ids: Tensor, offset: int = 0) -> Tensor:
        n = ids.shape[1]
        return self.drop(self.emb(ids) * math.sqrt(D_MODEL) + self.pe[offset : offset + n])

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


def timed(device: torch.device, work: Callable[[], Any]) -> tuple[Any, float]:
    """`work()`'s result and its wall seconds, the device synchronised before and after."""
    synchronize = torch.cuda.synchronize if device.type == "cuda" else lambda: None
    synchronize()
    start = time.perf_counter()
    result = work()
    synchronize()
    return result, time.perf_counter() - start


def make_batches(n: int, shape: Shape, device: torch.device, with_mask: bool) -> list[Batch]:
    """`n` random batches of `shape` (seeded); with a mask, each source is 60–100% of the padded length."""
    b, s, t = shape
    generator, batches = torch.Generator().manual_seed(SEED), []
    for _ in range(n):
        src = torch.randint(4, VOCAB, (b, s), generator=generator)
        tgt = torch.randint(4, VOCAB, (b, t + 1), generator=generator)
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
    shape: Shape, compiled: bool, with_mask: bool, device: torch.device, warm: int, iters: int
) -> float:
    """Seconds per update: the median of three timed windows of `iters` updates, after `warm`."""
    torch.manual_seed(SEED)
    model = Seq2SeqTransformer().to(device).train()
    fused = device.type == "cuda"
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-4, betas=(0.9, 0.98), fused=fused)
    loss_of = torch.compile(loss_fn) if compiled else loss_fn
    batches = make_batches(8, shape, device, with_mask)

    def steps(count: int) -> Tensor:
        for i in range(count):
            src, tgt_in, tgt_out, mask = batches[i % len(batches)]
            with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
                loss = loss_of(model, src, tgt_in, tgt_out, mask)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        return loss

    timed(device, lambda: steps(warm))
    windows = [timed(device, lambda: steps(iters)) for _ in range(3)]
    assert all(torch.isfinite(loss).item() for loss, _ in windows), "non-finite loss"
    return sorted(seconds for _, seconds in windows)[1] / iters


@torch.no_grad()
def greedy_kv(model: Seq2SeqTransformer, src: Tensor, mask: Tensor | None, steps: int) -> Tensor:
    """Greedy decoding for `steps` steps with a self-attention key/value cache and the cross-attention's keys
    and values computed once (random weights never finish, so every step runs)."""
    b, d, h = src.shape[0], D_MODEL, HEADS
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


def bench_decode(n_sent: int, s: int, steps: int, device: torch.device) -> float:
    """Sentences per second of `greedy_kv` on one batch of `n_sent` sentences (the median of 5 runs)."""
    torch.manual_seed(SEED)
    model = Seq2SeqTransformer().to(device).eval()
    src, _, _, mask = make_batches(1, (n_sent, s, 4), device, True)[0]

    def run() -> Tensor:
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
            return greedy_kv(model, src, mask, steps)

    run()  # warm-up
    outputs, times = zip(*(timed(device, run) for _ in range(5)), strict=True)
    assert outputs[-1].shape == (n_sent, steps)
    return n_sent / sorted(times)[len(times) // 2]


VARIANTS = [  # (B, S, T), compiled, source mask
    ((256, 24, 24), False, False),
    ((256, 24, 24), True, False),
    ((256, 24, 24), True, True),
    ((1024, 24, 24), True, False),
]


def main() -> None:
    parse = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parse.add_argument("--json", help="also write the results here")
    parse.add_argument("--smoke", action="store_true", help="tiny batches, for a CPU")
    parse.add_argument("--time-budget", type=float, default=420.0, help="no variant starts after it (s)")
    args = parse.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    started = time.perf_counter()
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    name = torch.cuda.get_device_name() if device.type == "cuda" else "cpu"
    results: dict[str, Any] = {"torch": torch.__version__, "device": name, "train": []}
    variants, warm, iters = VARIANTS, 15, 30
    if args.smoke:
        variants, warm, iters = [((8, 6, 7), False, False), ((8, 6, 7), False, True)], 1, 2
    for (b, s, t), compiled, with_mask in variants:
        if time.perf_counter() - started > args.time_budget:
            print(f"skip B={b} compiled={compiled} mask={with_mask}: time budget", flush=True)
            continue
        step_s = bench_train((b, s, t), compiled, with_mask, device, warm, iters)
        run = {"B": b, "S": s, "T": t, "compiled": compiled, "src_pad_mask": with_mask}
        results["train"].append(run | {"step_s": step_s, "tgt_tok_per_s": b * t / step_s})
        if device.type == "cuda":
            torch.cuda.empty_cache()
        shown = f"step {1000 * step_s:.2f} ms, {b * t / step_s:,.0f} target tok/s"
        print(f"train B={b} S={s} T={t} compiled={compiled} mask={with_mask}: {shown}", flush=True)
    n_sent, s_dec, steps = (16, 6, 5) if args.smoke else (1000, 40, 40)
    sent_per_s = bench_decode(n_sent, s_dec, steps, device)
    results["decode"] = {"greedy_kvcache": {"sent_per_s": sent_per_s, "n_sent": n_sent, "steps": steps}}
    print(f"decode greedy_kvcache: {n_sent} sentences × {steps} steps: {sent_per_s:,.0f} sent/s", flush=True)
    results["wall_s"] = time.perf_counter() - started
    print(json.dumps({k: v for k, v in results.items() if k not in ("train", "decode")}))
    if args.json:
        with open(args.json, "w") as file:
            json.dump(results, file, indent=1)


if __name__ == "__main__":
    main()
