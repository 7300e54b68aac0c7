"""Times flash_tutorial.attention's forward + backward on [B, S, H, D] inputs two ways: read in
place by the kernels (06's forward, 08's backward), and with the copies into [B, H, S, D] that the
op made before they took that layout (reads_bshd switched off). CUDA events, the median of 30
after 5 warm-up calls, the two ways taking turns over three rounds.

    PYTHONPATH=python python3 python/examples/time_layouts.py
"""
import statistics

import torch

import flash_tutorial as ft
from flash_tutorial import ops


def time_ms(fn, iters=30, warmup=5):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main():
    in_place = ops.reads_bshd
    print("| dtype | B | S | H | D | causal | in place ms | copies ms | copies / in place |")
    print("|---|---|---|---|---|---|---|---|---|")
    for dtype in (torch.bfloat16,):
        for b, s, h, d in ((64, 256, 6, 64), (4, 4096, 16, 64), (4, 4096, 16, 128)):
            for causal in (False, True):
                g = torch.Generator(device="cuda").manual_seed(0)
                q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=dtype, generator=g).requires_grad_()
                           for _ in range(3))
                dout = torch.randn(b, s, h, d, device="cuda", dtype=dtype, generator=g)

                def step():
                    out = ft.attention(q, k, v, causal=causal, layout="bshd")
                    torch.autograd.grad(out, (q, k, v), dout)

                rounds = {"in place": [], "copies": []}
                for _ in range(3):
                    ops.reads_bshd = in_place
                    rounds["in place"].append(time_ms(step))
                    ops.reads_bshd = lambda *args, **kwargs: False  # the op before the kernels took bshd
                    rounds["copies"].append(time_ms(step))
                ops.reads_bshd = in_place
                a, c = statistics.median(rounds["in place"]), statistics.median(rounds["copies"])
                print(f"| {str(dtype).split('.')[-1]} | {b} | {s} | {h} | {d} | {causal} | {a:.3f} | {c:.3f} | {c / a:.2f}x |",
                      flush=True)


if __name__ == "__main__":
    main()
