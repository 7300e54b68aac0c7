#!/usr/bin/env python3
"""Times PyTorch's scaled_dot_product_attention backends on the tutorial's benchmark shapes.

FlashAttention-2's shapes: seqlen 512..16k, batch = 16k / seqlen, heads = 2048 / D, D = 64 and
128, causal and not. Each backend (math, efficient, flash, cudnn) is forced with sdpa_kernel;
a backend that refuses a dtype or runs out of memory is recorded with its error. Times are the
median of CUDA-event-timed runs after warm-up; FLOPs are counted as the tutorial counts them
(4*B*H*S*S*D, halved for causal; backward 2.5x the forward).

  python3 scripts/compare_pytorch.py --dtypes f32,bf16 --out build/pytorch.json
"""
import argparse
import json
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

BACKENDS = {
    "math": SDPBackend.MATH,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
    "flash": SDPBackend.FLASH_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
}
DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


# BACKWARD_AHEAD: a backward through PyTorch spends about 0.2 ms of host time a call (autograd;
# cuDNN's graph lookup). Timed one call at a time from an idle GPU, that time lands inside the
# events: on an H200, bf16, D = 128, seqlen 1024, cuDNN's backward measured 0.96 ms so (1.11 ms
# through out.backward, which also adds into .grad), against 0.78 ms of its kernels in the
# profiler. So each timed backward follows an untimed one, queued first: the host prepares the
# timed call while the GPU runs the untimed one, and the events time the GPU's work, as in a
# training step, where the host runs ahead. The chapters' backward benchmarks time theirs the same
# way (08_backward/harness/backward_bench.cpp).
#
# SUSTAINED: under the H200's 700 W cap the SM clock falls within a fraction of a second of steady
# load, and further for a kernel that draws more power. The chapters' rows run on end (Google
# Benchmark's probe runs, then at least 0.3 s of timed calls, row after row), and so do these. With
# a cap on the number of calls instead, a 0.24 ms call would be timed for 24 ms just after the
# script's idle moments, at a clock the chapters' rows never see. 09_flash_v3/steps.md ("The timing
# method under the power cap") has the measurement.


def median_ms(fn, min_iters=5, min_seconds=0.3, warmup_seconds=0.1, before=None):
    """Median of fn's times (CUDA events), timed as the chapters' Google Benchmark rows time theirs
    (MinTime(0.3)): calls for warmup_seconds first (at least two: kernel selection, workspace
    allocation), then timed calls until they add up to min_seconds and number at least min_iters.
    No cap on the count: SUSTAINED says why. before: untimed work queued ahead of each call
    (compare_pytorch_decode.py's L2 flush; BACKWARD_AHEAD)."""
    calls, t0 = 0, time.perf_counter()
    while calls < 2 or time.perf_counter() - t0 < warmup_seconds:
        if before is not None:
            before()
        fn()
        torch.cuda.synchronize()
        calls += 1
    times = []
    while len(times) < min_iters or sum(times) < min_seconds * 1e3:
        if before is not None:
            before()
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times)


def time_case(backend, dtype, batch, heads, seqlen, head_dim, causal, direction, head_dim_v=None, group=1,
              layout="bhsd"):
    """group > 1: GQA, K and V with heads / group heads (enable_gqa). layout "bshd": the tensors are
    [B, S, H, D] and SDPA gets their [B, H, S, D] views, as a transformers model hands them over."""
    gen = torch.Generator(device="cuda").manual_seed(seqlen * 1000 + head_dim)

    def make(h, d):
        shape = (batch, seqlen, h, d) if layout == "bshd" else (batch, h, seqlen, d)
        t = torch.randn(shape, device="cuda", dtype=dtype, generator=gen)
        return t.transpose(1, 2) if layout == "bshd" else t

    q, k = make(heads, head_dim), make(heads // group, head_dim)
    v = make(heads // group, head_dim_v or head_dim)
    gqa = {"enable_gqa": True} if group > 1 else {}
    with sdpa_kernel(BACKENDS[backend]):
        if direction == "fwd":
            return median_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, **gqa))
        for t in (q, k, v):
            t.requires_grad_(True)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=causal, **gqa)
        dout = torch.randn_like(out)
        # torch.autograd.grad: the gradients alone, none added into .grad; BACKWARD_AHEAD says why
        # an untimed call goes first.
        bwd = lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)  # noqa: E731
        return median_ms(bwd, before=bwd)


# The packed batch of common/harness/bench_harness.h (mixed_lengths_64k): 30 sequences, 65,536 tokens.
MIXED_LENGTHS_64K = [3851, 2531, 493, 225, 765, 457, 2870, 279, 646, 1085, 5245, 741, 251, 2505, 1286, 216, 5287,
                     7536, 3262, 5096, 288, 2208, 5014, 1768, 633, 104, 526, 1240, 5371, 3757]
# Its sliding-window row (bench_harness.h: kVarlenWindow): causal with the window (1024, 0).
VARLEN_WINDOW = 1024


def visible_pairs(n, causal, window_left):
    """Query-key pairs a sequence of n tokens computes, counted as common/host/problem.cpp's
    forward_flops counts them: n^2 (full), n^2 / 2 (causal, FlashAttention's convention), and with a
    causal window (L, 0) the exact count, row i seeing min(i, L) + 1 keys."""
    if window_left is None:
        return n * n / (2 if causal else 1)
    edge = min(n, window_left + 1)  # rows 0 .. edge - 1 see every key up to their own
    return edge * (edge + 1) / 2 + (n - edge) * (window_left + 1)


def time_varlen(args):
    """FlashAttention-2's varlen forward (torch.ops.aten._flash_attention_forward with cu_seqlens) on
    the packed batch, heads = 2048 / D, f16 and bf16 of --dtypes, full, causal, and causal with the
    window (VARLEN_WINDOW, 0) (window_size_left / window_size_right), and where --directions has bwd
    its backward (_flash_attention_backward on that forward's O, LSE and RNG state): records with
    varlen=True and mask "full", "causal" or "window1024"."""
    records = []
    cu = torch.tensor([0] + torch.tensor(MIXED_LENGTHS_64K).cumsum(0).tolist(), dtype=torch.int32, device="cuda")
    total, longest = int(cu[-1]), max(MIXED_LENGTHS_64K)
    for dtype_name in args.dtypes.split(","):
        if dtype_name not in ("f16", "bf16"):
            continue
        for head_dim in map(int, args.head_dims.split(",")):
            heads = 2048 // head_dim
            gen = torch.Generator(device="cuda").manual_seed(head_dim)
            q, k, v = (torch.randn(total, heads, head_dim, device="cuda", dtype=DTYPES[dtype_name], generator=gen)
                       for _ in range(3))
            dout = torch.randn(total, heads, head_dim, device="cuda", dtype=DTYPES[dtype_name], generator=gen)
            for mask, causal, left in (("full", False, None), ("causal", True, None),
                                       (f"window{VARLEN_WINDOW}", True, VARLEN_WINDOW)):
                fwd_flops = sum(4.0 * visible_pairs(n, causal, left) * head_dim * heads for n in MIXED_LENGTHS_64K)
                window = {} if left is None else dict(window_size_left=left, window_size_right=0)
                for direction in [d for d in ("fwd", "bwd") if d in args.directions.split(",") or d == "fwd"]:
                    flops = fwd_flops * (2.5 if direction == "bwd" else 1.0)
                    rec = dict(direction=direction, backend="flash_varlen", dtype=dtype_name, batch=1, heads=heads,
                               seqlen=total, head_dim=head_dim, causal=causal, mask=mask, varlen=True)
                    try:
                        fwd = lambda: torch.ops.aten._flash_attention_forward(  # noqa: E731
                            q, k, v, cu, cu, longest, longest, 0.0, causal, False, **window)
                        if direction == "fwd":
                            ms = median_ms(fwd)
                        else:
                            out, lse, rng, unused, _ = fwd()
                            bwd = lambda: torch.ops.aten._flash_attention_backward(  # noqa: E731
                                dout, q, k, v, out, lse, cu, cu, longest, longest, 0.0, causal, rng, unused,
                                **window)
                            ms = median_ms(bwd, before=bwd)  # BACKWARD_AHEAD
                        rec.update(ms=ms, tflops=flops / (ms * 1e-3) / 1e12)
                        note = f"{ms:9.3f} ms {rec['tflops']:7.2f} TFLOP/s"
                    except (RuntimeError, torch.OutOfMemoryError) as e:
                        rec["error"] = str(e).splitlines()[0][:200]
                        note = "n/a: " + rec["error"][:70]
                    records.append(rec)
                    print(f"varlen {direction} {dtype_name} D={head_dim} {mask:10s} flash_varlen {note}", flush=True)
    return records


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dtypes", default="f32")
    ap.add_argument("--backends", default="math,efficient,flash,cudnn")
    ap.add_argument("--head-dims", default="64,128")
    ap.add_argument("--head-dim-v", type=int, default=0,
                    help="V's head dim where it differs from Q and K's (MLA: --head-dims 576 --head-dim-v 512)")
    ap.add_argument("--directions", default="fwd")
    ap.add_argument("--max-seqlen", type=int, default=16384)
    ap.add_argument("--varlen", action="store_true",
                    help="also FlashAttention-2's varlen path on the packed batch of mixed lengths (f16, bf16; the "
                         "backward too where --directions has bwd)")
    ap.add_argument("--group", type=int, default=1,
                    help="GQA: query heads a KV head (a divisor of 2048 / D); rows carry group, which summarize.py keeps "
                         "out of its tables")
    ap.add_argument("--layout", choices=("bhsd", "bshd"), default="bhsd",
                    help="bshd: [B, S, H, D] tensors viewed as [B, H, S, D] (a transformers model's); rows carry layout")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    for head_dim in map(int, args.head_dims.split(",")):
        if (2048 // head_dim) % args.group:
            ap.error(f"--group {args.group} does not divide {2048 // head_dim} heads (head dim {head_dim})")

    props = torch.cuda.get_device_properties(0)
    meta = {"gpu": props.name, "torch": torch.__version__, "cuda": torch.version.cuda,
            "allow_tf32": torch.backends.cuda.matmul.allow_tf32}
    print(f"PyTorch {torch.__version__} (CUDA {torch.version.cuda}) on {props.name}", flush=True)
    records = []
    for direction in args.directions.split(","):
        for dtype_name in args.dtypes.split(","):
            for head_dim in map(int, args.head_dims.split(",")):
                for causal in (False, True):
                    seqlen = 512
                    while seqlen <= args.max_seqlen:
                        batch, heads = 16384 // seqlen, 2048 // head_dim
                        dv = args.head_dim_v or head_dim  # FLOPs: 2 Sq Sk (D + Dv), as common/host/problem.cpp
                        flops = 2.0 * batch * heads * seqlen * seqlen * (head_dim + dv) / (2 if causal else 1)
                        flops *= 2.5 if direction == "bwd" else 1.0
                        for backend in args.backends.split(","):
                            rec = dict(direction=direction, backend=backend, dtype=dtype_name, batch=batch,
                                       heads=heads, seqlen=seqlen, head_dim=head_dim, causal=causal)
                            if dv != head_dim:
                                rec["head_dim_v"] = dv
                            if args.group > 1:
                                rec["group"] = args.group
                            if args.layout != "bhsd":
                                rec["layout"] = args.layout
                            try:
                                begin = time.time()
                                ms = time_case(backend, DTYPES[dtype_name], batch, heads, seqlen, head_dim,
                                               causal, direction, dv, args.group, args.layout)
                                # The row's wall-clock window (seconds since the epoch), to read the GPU's
                                # clock and power sampled beside the run against it (summarize.py).
                                rec.update(ms=ms, tflops=flops / (ms * 1e-3) / 1e12, t_begin=begin, t_end=time.time())
                                note = f"{ms:9.3f} ms {rec['tflops']:7.2f} TFLOP/s"
                            except (RuntimeError, torch.OutOfMemoryError) as e:
                                rec["error"] = str(e).splitlines()[0][:200]
                                note = "n/a: " + rec["error"][:70]
                            torch.cuda.empty_cache()
                            records.append(rec)
                            print(f"[{len(records):4d}] {direction} {dtype_name} D={head_dim} "
                                  f"{'causal' if causal else 'full  '} seqlen={seqlen:5d} {backend:9s} {note}",
                                  flush=True)
                        seqlen *= 2
    if args.varlen:
        records += time_varlen(args)
    with open(args.out, "w") as f:
        json.dump({"meta": meta, "results": records}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
