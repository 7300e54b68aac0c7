"""flash_tutorial.ring_attention on several GPUs, one process a GPU (torchrun, NCCL): a check against
attention() on one GPU, then the ring's throughput and its scaling efficiency.

    torchrun --nproc-per-node 2 python/examples/bench_ring.py --out OUT [--tokens-per-gpu 131072]

Check: one seeded bf16 problem of --check-tokens tokens a GPU, every rank its zig-zag shard; the
ring's O, dQ, dK and dV, gathered on rank 0, against the float64 reference on the whole sequence,
held to the chapters' same-precision rule (check() says how); the script exits with status 1 where
one fails. --check-only stops there (python/tests/test_ring.py runs it so under torchrun).
Scaling: every GPU holds --tokens-per-gpu tokens of one sequence of W times that; the ring's
forward and forward + backward are timed with CUDA events (median of --iters after a warm-up).
TFLOP/s counts the whole sequence's FLOPs (4 S^2 H D, halved for causal; the backward 2.5 times
the forward) over the time. The one-GPU yardstick is attention() on --tokens-per-gpu tokens on the
same GPU in the same run, and efficiency = ring TFLOP/s / (W x one-GPU TFLOP/s): ring attention on
W GPUs does W times one GPU's work on its block, so 100% means the ring's transfers and merges
cost nothing. Rank 0 writes ring.json and ring.md into --out.
"""
import argparse
import json
import os
import sys
import warnings
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # flash_tutorial from the source tree
sys.path.insert(0, str(Path(__file__).resolve().parent))
import flash_tutorial as ft  # noqa: E402
from time_layouts import time_ms  # noqa: E402  (CUDA events, the median of the timed calls)


def median_ms(fn, iters):
    """time_ms with the ranks lined up first; the ring's transfers keep them in step after that."""
    dist.barrier()
    return time_ms(fn, iters=iters, warmup=1)


def shards(batch, tokens, heads, kv_heads, head_dim, dtype, seed, rank, world):
    g = torch.Generator(device="cuda").manual_seed(seed)
    whole = [torch.randn(batch, tokens, h, head_dim, device="cuda", dtype=dtype, generator=g)
             for h in (heads, kv_heads, kv_heads, heads)]
    return whole, [ft.zigzag_shard(t, 1, rank, world) for t in whole]


def check(args, rank, world, causal):
    """The ring's O, dQ, dK and dV, gathered on rank 0, against the float64 reference on the whole
    sequence by the chapters' same-precision rule: the ring's largest error at most twice that of
    attention() on the whole sequence in the same dtype on one GPU (the same kernels, unsplit), plus
    1e-5 of the largest reference value (the C++ harness's slack per unit of the largest value).
    Returns {name: {ring, one_gpu, bound}} on rank 0, None on the others."""
    whole, (q, k, v, dout) = shards(1, args.check_tokens * world, args.heads, args.kv_heads, args.head_dim,
                                    torch.bfloat16, 1, rank, world)
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    out = ft.ring_attention(q, k, v, causal=causal)
    got = [out.detach(), *torch.autograd.grad(out, (q, k, v), dout)]
    gathered = []
    for t in got:  # [B, L, H, D] views of [B, H, L, D]: contiguous ones travel, into contiguous parts
        t = t.contiguous()
        parts = [torch.empty_like(t) for _ in range(world)] if rank == 0 else None
        dist.gather(t, parts, dst=0)
        gathered.append(parts)
    if rank != 0:
        return None

    def attend(dtype):  # O, dQ, dK, dV of attention() on the whole sequence
        wq, wk, wv = (t.to(dtype).requires_grad_() for t in whole[:3])
        o = ft.attention(wq, wk, wv, causal=causal)
        return [o.detach(), *torch.autograd.grad(o, (wq, wk, wv), whole[3].to(dtype))]

    with warnings.catch_warnings():  # float64 runs the PyTorch reference, as it should here
        warnings.simplefilter("ignore")
        want = attend(torch.float64)
    one_gpu = attend(torch.bfloat16)
    errors = {}
    for name, parts, w, one in zip(("O", "dQ", "dK", "dV"), gathered, want, one_gpu):
        ring_err = (ft.zigzag_unshard(parts, 1).double() - w).abs().max().item()
        one_err = (one.double() - w).abs().max().item()
        errors[name] = dict(ring=ring_err, one_gpu=one_err, bound=2 * one_err + 1e-5 * w.abs().max().item())
    return errors


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--tokens-per-gpu", type=int, default=131072)
    p.add_argument("--check-tokens", type=int, default=2048)
    p.add_argument("--check-only", action="store_true", help="the check alone, no timing (python/tests/test_ring.py)")
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--kv-heads", type=int, default=16)
    p.add_argument("--head-dim", type=int, default=128)
    p.add_argument("--iters", type=int, default=3)
    args = p.parse_args()
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    rows, errors = [], {}
    for causal in (False, True):
        errors["causal" if causal else "full"] = check(args, rank, world, causal)
        if args.check_only:
            continue
        _, (q, k, v, dout) = shards(1, args.tokens_per_gpu * world, args.heads, args.kv_heads, args.head_dim,
                                    torch.bfloat16, 2, rank, world)
        q, k, v = (t.requires_grad_() for t in (q, k, v))
        flops = 4.0 * (args.tokens_per_gpu * world) ** 2 * args.heads * args.head_dim / (2 if causal else 1)
        # seqlen given: no all_reduce and host sync for it inside the timed calls
        seqlen = args.tokens_per_gpu * world
        fwd = median_ms(lambda: ft.ring_attention(q, k, v, causal=causal, seqlen=seqlen), args.iters)
        both = median_ms(lambda: ft.ring_attention(q, k, v, causal=causal, seqlen=seqlen).backward(dout), args.iters)
        # One GPU on the same block: attention() over this rank's tokens alone.
        lq, lk, lv, ld = (t.detach().clone().requires_grad_(i < 3) for i, t in enumerate((q, k, v, dout)))
        one_flops = 4.0 * args.tokens_per_gpu ** 2 * args.heads * args.head_dim / (2 if causal else 1)
        one_fwd = median_ms(lambda: ft.attention(lq, lk, lv, causal=causal), args.iters)
        one_both = median_ms(lambda: ft.attention(lq, lk, lv, causal=causal).backward(ld), args.iters)
        for what, ms, one_ms, f in (("fwd", fwd, one_fwd, flops), ("fwd+bwd", both, one_both, 3.5 * flops)):
            one_f = f / flops * one_flops
            tf, one_tf = f / ms / 1e9, one_f / one_ms / 1e9
            rows.append(dict(pass_=what, mask="causal" if causal else "full", gpus=world,
                             tokens=args.tokens_per_gpu * world, ms=ms, tflops=tf, one_gpu_tflops=one_tf,
                             efficiency=tf / (world * one_tf)))
    failed = []
    if rank == 0:
        args.out.mkdir(parents=True, exist_ok=True)
        probe = torch.empty(1, args.heads, 1, args.head_dim, device="cuda", dtype=torch.bfloat16)
        meta = dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, cuda=torch.version.cuda,
                    gpus=world, heads=args.heads, kv_heads=args.kv_heads, head_dim=args.head_dim,
                    tokens_per_gpu=args.tokens_per_gpu, chapters=ft.ops.chapters(probe))
        (args.out / "ring.json").write_text(json.dumps(dict(meta=meta, check=errors, rows=rows), indent=1))
        lines = [f"# Ring attention on {world} x {meta['gpu']} (PyTorch {meta['torch']}, CUDA {meta['cuda']}, bf16, "
                 f"{args.heads} / {args.kv_heads} heads, D {args.head_dim}, {args.tokens_per_gpu:,} tokens a GPU)", "",
                 f"Check against the float64 reference ({args.check_tokens:,} tokens a GPU): the ring's largest "
                 "error, attention()'s on one GPU, and the bound (2 x one GPU + 1e-5 x the largest value):", ""]
        for mask, e in errors.items():
            for name, x in e.items():
                ok = x["ring"] <= x["bound"]
                failed += [] if ok else [f"{mask} {name}"]
                lines.append(f"- {mask} {name}: {x['ring']:.3g} against {x['one_gpu']:.3g} (bound {x['bound']:.3g}): "
                             + ("pass" if ok else "FAIL"))
        if rows:
            lines += ["", "| pass | mask | GPUs | tokens | ms | TFLOP/s | one GPU TFLOP/s | efficiency |",
                      "|---|---|---:|---:|---:|---:|---:|---:|"]
            lines += [f"| {r['pass_']} | {r['mask']} | {r['gpus']} | {r['tokens']:,} | {r['ms']:.1f} | "
                      f"{r['tflops']:.1f} | {r['one_gpu_tflops']:.1f} | {100 * r['efficiency']:.1f}% |" for r in rows]
        (args.out / "ring.md").write_text("\n".join(lines) + "\n")
        print("\n".join(lines))
    dist.destroy_process_group()
    if failed:
        sys.exit(f"bench_ring.py: the check failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
