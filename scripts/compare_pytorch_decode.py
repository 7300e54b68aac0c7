#!/usr/bin/env python3
"""Times PyTorch's scaled_dot_product_attention on chapter 10's decode rows (10_decoding/README.md).

bf16, 32 query heads sharing 8 KV heads (enable_gqa=True), D = 128, one query token, batch 1, 8 and 32,
seqlen_k 4k, 16k, 64k; the FLASH and CUDNN backends forced with sdpa_kernel. Before every timed run
a 256 MiB buffer is zeroed to evict K and V from the L2 cache (as triton.testing.do_bench does); the
CUDA events bracket the attention call only. GB/s = K and V bytes / median time. Also times a plain
read of 2 GiB (a sum) as the GPU's read bandwidth.

  python3 scripts/compare_pytorch_decode.py --out build/pytorch_decode.json
"""
import argparse
import json
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel

from compare_pytorch import BACKENDS, median_ms  # this script's folder is on sys.path


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backends", default="flash,cudnn")
    ap.add_argument("--batches", default="1,8,32")
    ap.add_argument("--seqlens-k", default="4096,16384,65536")
    ap.add_argument("--head-dim", type=int, default=128, help="chapter 10's results table is at 128")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    props = torch.cuda.get_device_properties(0)
    meta = {"gpu": props.name, "torch": torch.__version__, "cuda": torch.version.cuda}
    print(f"PyTorch {torch.__version__} (CUDA {torch.version.cuda}) on {props.name}", flush=True)
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    heads, kv_heads, head_dim, dtype = 32, 8, args.head_dim, torch.bfloat16
    records = []
    for batch in map(int, args.batches.split(",")):
        for seqlen_k in map(int, args.seqlens_k.split(",")):
            gen = torch.Generator(device="cuda").manual_seed(seqlen_k + batch)
            q = torch.randn(batch, heads, 1, head_dim, device="cuda", dtype=dtype, generator=gen)
            k = torch.randn(batch, kv_heads, seqlen_k, head_dim, device="cuda", dtype=dtype, generator=gen)
            v = torch.randn(batch, kv_heads, seqlen_k, head_dim, device="cuda", dtype=dtype, generator=gen)
            kv_bytes = 2 * k.numel() * k.element_size()
            for backend in args.backends.split(","):
                rec = dict(backend=backend, dtype="bf16", batch=batch, heads=heads, kv_heads=kv_heads,
                           seqlen_q=1, seqlen_k=seqlen_k, head_dim=head_dim)
                try:
                    with sdpa_kernel(BACKENDS[backend]):
                        ms = median_ms(lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True),
                                   before=flush.zero_)
                    rec.update(ms=ms, gbps=kv_bytes / (ms * 1e-3) / 1e9)
                    note = f"{ms:8.4f} ms {rec['gbps']:7.1f} GB/s"
                except (RuntimeError, torch.OutOfMemoryError) as e:
                    rec["error"] = str(e).splitlines()[0][:200]
                    note = "n/a: " + rec["error"][:70]
                records.append(rec)
                print(f"decode B={batch} Sk={seqlen_k:6d} D={head_dim} {backend:9s} {note}", flush=True)
    x = torch.ones(1 << 30, dtype=torch.bfloat16, device="cuda")  # 2 GiB
    ms = median_ms(lambda: x.sum(), before=flush.zero_)
    read = dict(what="read 2 GiB (sum)", ms=ms, gbps=x.numel() * x.element_size() / (ms * 1e-3) / 1e9)
    print(f"plain read: {read['gbps']:.1f} GB/s", flush=True)
    with open(args.out, "w") as f:
        json.dump({"meta": meta, "results": records, "read": read}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
