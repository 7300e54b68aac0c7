"""flash_tutorial.ring_attention (ring.py) against attention() on the whole sequence (pytest).

Each test starts W processes (torch.multiprocessing, the Gloo backend on the CPU, W = 1 to 4), gives
every rank its zig-zag shard of one seeded float64 problem, runs the ring forward and backward, and
compares the ranks' outputs, put back in sequence order, with the op's float64 reference on the
whole sequence: O, LSE, dQ, dK and dV within 1e-10 of the largest reference value (float64 sums in
another order). The shapes: uneven chunks (37 tokens in 2W chunks), more chunks than tokens (5
tokens, some chunks empty), GQA, causal and not. On GPUs the same function runs over NCCL with the
chapters' kernels: test_ring_on_gpus_by_torchrun runs python/examples/bench_ring.py's check under
torchrun where there are two or more GPUs.
"""
import os

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import flash_tutorial as ft

CASES = [  # batch, heads, kv_heads, seqlen, head_dim, causal
    (2, 4, 2, 37, 16, True),
    (2, 4, 2, 37, 16, False),
    (1, 2, 1, 5, 8, True),
    (1, 3, 3, 64, 32, True),
]
TOL = 1e-10


def make(b, h, hkv, s, d, seed):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, s, h, d, generator=g, dtype=torch.float64)
    k = torch.randn(b, s, hkv, d, generator=g, dtype=torch.float64)
    v = torch.randn(b, s, hkv, d, generator=g, dtype=torch.float64)
    dout = torch.randn(b, s, h, d, generator=g, dtype=torch.float64)
    return q, k, v, dout


def worker(rank, world, init_file, out_dir):
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        results = []
        for n, (b, h, hkv, s, d, causal) in enumerate(CASES):
            q, k, v, dout = (ft.zigzag_shard(t, 1, rank, world) for t in make(b, h, hkv, s, d, seed=n))
            q, k, v = (t.requires_grad_() for t in (q, k, v))
            out, lse = ft.ring_attention(q, k, v, causal=causal, return_lse=True)
            dq, dk, dv = torch.autograd.grad(out, (q, k, v), dout)
            results.append([t.detach() for t in (out, lse, dq, dk, dv)])
        torch.save(results, os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_ring_matches_the_whole_sequence(world, tmp_path):
    mp.start_processes(worker, args=(world, str(tmp_path / "init"), str(tmp_path)), nprocs=world, join=True,
                       start_method="spawn")
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in range(world)]
    for n, (b, h, hkv, s, d, causal) in enumerate(CASES):
        q, k, v, dout = make(b, h, hkv, s, d, seed=n)
        q, k, v = (t.requires_grad_() for t in (q, k, v))
        want, want_lse = ft.attention(q, k, v, causal=causal, return_lse=True)
        wants = [want, want_lse, *torch.autograd.grad(want, (q, k, v), dout)]
        for i, name in enumerate(("O", "LSE", "dQ", "dK", "dV")):
            dim = 2 if name == "LSE" else 1  # LSE is [B, H, L]; the others [B, L, H, D]
            got = ft.zigzag_unshard([ranks[r][n][i] for r in range(world)], dim)
            scale = want.abs().max().item() if name != "LSE" else wants[1].abs().max().item()
            err = (got - wants[i].detach()).abs().max().item()
            assert err <= TOL * max(scale, 1.0), f"case {n} (W={world}): {name} off by {err:.3g}"


def test_zigzag_shard_round_trip_and_balance():
    # Every token lands on exactly one rank and comes back in order; under causal masking every
    # rank's two chunks see 2W + 1 chunks of keys between them.
    x = torch.arange(37)
    for world in (1, 2, 3, 4):
        shards = [ft.zigzag_shard(x, 0, r, world) for r in range(world)]
        assert torch.equal(ft.zigzag_unshard(shards, 0), x)
        for r in range(world):
            a, c = ft.ring.rank_chunks(r, world)
            assert (a + 1) + (c + 1) == 2 * world + 1


def test_refusals():
    q = torch.zeros(1, 4, 2, 8)
    with pytest.raises(ValueError, match="torch.distributed"):
        ft.ring_attention(q, q, q)
    with pytest.raises(ValueError, match="layout"):
        ft.ring_attention(q, q, q, layout="sbhd")


@pytest.mark.skipif(torch.cuda.device_count() < 2 or ft.ops._C is None,
                    reason="needs 2 or more CUDA GPUs and the built extension: the NCCL ring is not tested here")
def test_ring_on_gpus_by_torchrun(tmp_path):
    # The NCCL ring with the chapters' kernels, one process a GPU under torchrun: bench_ring.py's
    # check (bf16, the float64 reference, the same-precision rule, full and causal), which exits
    # with status 1 where an output fails.
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(torch.cuda.device_count()),
           str(root / "examples" / "bench_ring.py"), "--out", str(tmp_path), "--check-only"]
    run = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(root)})
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "FAIL" not in (tmp_path / "ring.md").read_text()
