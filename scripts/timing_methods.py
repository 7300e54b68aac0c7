"""Times chapter 09's forward (through the PyTorch op, flash_tutorial.attention on [B, H, S, D])
against PyTorch SDPA's cuDNN and FLASH backends three ways, in one process, on the same tensors:

  sustained  compare_pytorch.py's median_ms: one call between two CUDA events, synchronised,
             0.1 s of untimed calls, then timed calls for at least 0.3 s; three rounds, the order
             reversed every round. The results files time PyTorch this way, as the chapters' Google
             Benchmark rows time theirs.
  burst      30 rounds of one call each, the three taking turns.
  queued     10 calls queued back to back between two events (the host's time overlaps the GPU's),
             5 rounds.

bf16, forward only (no_grad), FlashAttention-2's shapes (batch = 16384 / seqlen, heads = 2048 / D).
Prints one line a shape and writes the TFLOP/s to --out (JSON). 09_flash_v3/steps.md ("The timing
method under the power cap") says what the three disagree on.

    PYTHONPATH=python python3 scripts/timing_methods.py --out timing.json [--head-dims 64,128]
"""
import argparse
import contextlib
import json
import statistics

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import flash_tutorial as ft
from compare_pytorch import median_ms


def event_ms(fn, calls=1):
    """Milliseconds a call of fn, over `calls` calls queued between two events."""
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        fn()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) / calls


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--head-dims", default="64,128")
    p.add_argument("--seqlens", default="1024,2048,4096,8192,16384")
    args = p.parse_args()
    results = {}
    for d in (int(x) for x in args.head_dims.split(",")):
        for causal in (False, True):
            for s in (int(x) for x in args.seqlens.split(",")):
                b, h = 16384 // s, 2048 // d
                g = torch.Generator(device="cuda").manual_seed(s + d)
                q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
                sdpa = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)  # noqa: E731
                runs = {"ours": (lambda: ft.attention(q, k, v, causal=causal, layout="bhsd"), contextlib.nullcontext),
                        "cudnn": (sdpa, lambda: sdpa_kernel(SDPBackend.CUDNN_ATTENTION)),
                        "flash": (sdpa, lambda: sdpa_kernel(SDPBackend.FLASH_ATTENTION))}
                ms = {method: {name: [] for name in runs} for method in ("sustained", "burst", "queued")}
                with torch.no_grad():
                    for r in range(3):
                        for name in (runs if r % 2 == 0 else list(runs)[::-1]):
                            fn, ctx = runs[name]
                            with ctx():
                                ms["sustained"][name].append(median_ms(fn))
                    for _ in range(30):
                        for name, (fn, ctx) in runs.items():
                            with ctx():
                                ms["burst"][name].append(event_ms(fn))
                    for _ in range(5):
                        for name, (fn, ctx) in runs.items():
                            with ctx():
                                fn()
                                torch.cuda.synchronize()
                                ms["queued"][name].append(event_ms(fn, calls=10))
                gflop = 4 * b * h * s * s * d / (2 if causal else 1) / 1e9
                tf = {method: {name: gflop / statistics.median(t) for name, t in per.items()} for method, per in ms.items()}
                key = f"D{d} {'causal' if causal else 'full'} {s}"
                results[key] = tf
                print(f"{key:18s} " + " | ".join(
                    f"{method} ours {t['ours']:6.1f} cudnn {t['cudnn']:6.1f} flash {t['flash']:6.1f} "
                    f"ours/cudnn {t['ours'] / t['cudnn']:.3f}" for method, t in tf.items()), flush=True)
    with open(args.out, "w") as f:
        json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
