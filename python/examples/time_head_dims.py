"""Times flash_tutorial.attention's forward + backward at each head dim against PyTorch's
scaled_dot_product_attention held to its FlashAttention-2 backend (FLASH) and to its cuDNN backend,
on the same [B, S, H, D] tensors (SDPA gets their [B, H, S, D] views, as a transformers model hands
them over). CUDA events, the median of 30 calls after 5 warm-up calls (time_layouts.py's time_ms),
the three taking turns over three rounds; TFLOP/s count the forward's 4 B H S^2 D (half of it
causal) and the backward's 2.5 times that. The table also names the chapters the op runs
(ops.chapters): on a Hopper GPU 09's forward and 11's backward at every head dim here.

    PYTHONPATH=python python3 python/examples/time_head_dims.py [--batch 4 --seqlen 4096 --heads 16]
"""
import argparse
import statistics

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import flash_tutorial as ft
from flash_tutorial import ops
from time_layouts import time_ms

BACKENDS = {"sdpa flash": SDPBackend.FLASH_ATTENTION, "sdpa cudnn": SDPBackend.CUDNN_ATTENTION}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seqlen", type=int, default=4096)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--head-dims", default="64,96,128,192,256")
    p.add_argument("--dtype", choices=("bf16", "f16"), default="bf16")
    args = p.parse_args()
    dtype = {"bf16": torch.bfloat16, "f16": torch.float16}[args.dtype]
    b, s, h = args.batch, args.seqlen, args.heads
    print(f"{torch.cuda.get_device_name()}, PyTorch {torch.__version__} (CUDA {torch.version.cuda}), {args.dtype}, "
          f"[B, S, H, D] = [{b}, {s}, {h}, D], forward + backward, TFLOP/s")
    print("| D | causal | chapters | tutorial | sdpa flash | sdpa cudnn | / flash | / cudnn |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    for d in (int(x) for x in args.head_dims.split(",")):
        for causal in (False, True):
            g = torch.Generator(device="cuda").manual_seed(d)
            q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=dtype, generator=g).requires_grad_()
                       for _ in range(3))
            dout = torch.randn(b, s, h, d, device="cuda", dtype=dtype, generator=g)

            def tutorial():
                torch.autograd.grad(ft.attention(q, k, v, causal=causal), (q, k, v), dout)

            def sdpa():
                out = F.scaled_dot_product_attention(*(t.transpose(1, 2) for t in (q, k, v)), is_causal=causal)
                torch.autograd.grad(out.transpose(1, 2), (q, k, v), dout)

            rounds = {"tutorial": [], **{name: [] for name in BACKENDS}}
            for _ in range(3):
                rounds["tutorial"].append(time_ms(tutorial))
                for name, backend in BACKENDS.items():
                    with sdpa_kernel(backend):
                        rounds[name].append(time_ms(sdpa))
            flops = 3.5 * 4 * b * h * s * s * d / (2 if causal else 1)
            tf = {name: flops / statistics.median(ms) / 1e9 for name, ms in rounds.items()}
            fwd, bwd = ops.chapters(q.transpose(1, 2))
            print(f"| {d} | {causal} | {fwd} + {bwd} | {tf['tutorial']:.1f} | {tf['sdpa flash']:.1f} | "
                  f"{tf['sdpa cudnn']:.1f} | {tf['tutorial'] / tf['sdpa flash']:.2f}x | "
                  f"{tf['tutorial'] / tf['sdpa cudnn']:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
