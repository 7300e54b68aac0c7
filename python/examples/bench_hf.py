#!/usr/bin/env python3
"""Training tokens/s of a Hugging Face transformers model (Llama-style, or Mistral's sliding
window) with PyTorch's SDPA and with the tutorial's kernels, through transformers' attention
registry (flash_tutorial.hf). Random weights from a config, random tokens: nothing is downloaded.

    PYTHONPATH=python python3 python/examples/bench_hf.py --out hf/          # on a GPU
    PYTHONPATH=python python3 python/examples/bench_hf.py --out hf/ --device cpu --hidden 64 \\
        --layers 2 --heads 4 --kv-heads 2 --seq 64 --batch 2 --vocab 97     # a smoke test

Each attention gets its own copy of one model (same weights, same seed), its own AdamW and the same
batches. After --warmup steps each, --rounds rounds time --steps training steps of every attention
in turn (forward, backward, optimizer step; CUDA synchronised at both ends), so that a drift of the
machine's speed falls on all alike, and each round starts one attention later than the round
before, so that none always runs first or always after the same other; the table gives the median
round. The losses of the first and the last timed step show that the attentions train the same
model: in bf16 they agree to about a percent, as two runs of different but equally exact kernels do.

Attentions: sdpa_flash (F.scaled_dot_product_attention held to its FlashAttention-2 backend, the
anchor), sdpa_cudnn (held to its cuDNN backend, where the GPU and shape allow it), sdpa (PyTorch's
own choice) and tutorial. Writes <out>/bench_hf.md and <out>/bench_hf.json. --profile N adds, per
attention, N steps under the PyTorch profiler: the GPU time a step in attention kernels, copies
and the rest, and the kernels with the most time.
"""
import argparse
import contextlib
import copy
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import profile_gpt  # noqa: E402  (which kernels are attention's, which are copies)


def sdpa_context(attn):
    """The SDPA backend an attention holds PyTorch to while it runs a step (none for the others)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    backends = {"sdpa_flash": SDPBackend.FLASH_ATTENTION, "sdpa_cudnn": SDPBackend.CUDNN_ATTENTION}
    return sdpa_kernel(backends[attn]) if attn in backends else contextlib.nullcontext()


def make_config(args):
    import transformers
    common = dict(vocab_size=args.vocab, hidden_size=args.hidden, intermediate_size=args.intermediate,
                  num_hidden_layers=args.layers, num_attention_heads=args.heads,
                  num_key_value_heads=args.kv_heads, max_position_embeddings=args.seq, attention_dropout=0.0)
    if args.model == "mistral":
        return transformers.MistralForCausalLM, transformers.MistralConfig(**common, sliding_window=args.window)
    return transformers.LlamaForCausalLM, transformers.LlamaConfig(**common)


def build(args, device, dtype):
    """{attention: (model, optimizer)}: copies of one randomly initialised model."""
    import flash_tutorial.hf as hf
    cls, config = make_config(args)
    torch.manual_seed(args.seed)
    base = cls(config).to(device=device, dtype=dtype)
    name = hf.register()
    runs = {}
    for attn in args.attn:
        model = copy.deepcopy(base)
        model.set_attn_implementation(name if attn == "tutorial" else "sdpa")
        model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=args.lr, fused=device.type == "cuda")
        runs[attn] = (model, opt)
    del base
    return runs


def train_step(model, opt, ids, attn):
    with sdpa_context(attn):
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss.detach()


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def run(args, device, dtype):
    runs = build(args, device, dtype)
    gen = torch.Generator().manual_seed(args.seed + 1)
    n_batches = args.warmup + args.rounds * args.steps
    batches = [torch.randint(0, args.vocab, (args.batch, args.seq), generator=gen).to(device)
               for _ in range(n_batches)]
    losses = {attn: [] for attn in runs}
    for i in range(args.warmup):
        for attn, (model, opt) in runs.items():
            losses[attn].append(train_step(model, opt, batches[i], attn))
    times = {attn: [] for attn in runs}
    for r in range(args.rounds):
        for attn in profile_gpt.round_order(list(runs), r):
            model, opt = runs[attn]
            synchronize(device)
            t0 = time.perf_counter()
            for i in range(args.steps):
                losses[attn].append(train_step(model, opt, batches[args.warmup + r * args.steps + i], attn))
            synchronize(device)
            times[attn].append((time.perf_counter() - t0) / args.steps)
        print(f"round {r + 1}/{args.rounds}: " +
              ", ".join(f"{a} {t[-1] * 1e3:.1f} ms" for a, t in times.items()), flush=True)
    results = {attn: {"step_ms": statistics.median(t) * 1e3, "rounds_ms": [x * 1e3 for x in t],
                      "tokens_per_s": args.batch * args.seq / statistics.median(t),
                      "first_loss": losses[attn][0].item(), "last_loss": losses[attn][-1].item()}
               for attn, t in times.items()}
    if args.profile and device.type == "cuda":
        for attn, (model, opt) in runs.items():
            results[attn]["profile"] = profile_steps(model, opt, batches[-1], attn, args.profile)
    return results


def profile_steps(model, opt, ids, attn, steps):
    """GPU time a training step under the profiler (`steps` steps), split into attention kernels
    (profile_gpt.py's names, and cuDNN's), copies and the rest, and the kernels with the most time."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                            torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            train_step(model, opt, ids, attn)
        torch.cuda.synchronize()
    kernels = {}  # name -> us over the steps
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA and not getattr(e, "is_user_annotation", False) \
                and not e.name.startswith("Optimizer."):
            kernels[e.name] = kernels.get(e.name, 0.0) + e.device_time
    return split_kernels(kernels, steps)


def kernel_is_attention(name):
    """profile_gpt.py's attention kernels (the chapters', FlashAttention's), and cuDNN's."""
    return profile_gpt.kernel_is_attention(name) or "cudnn" in name.lower() or "fmha" in name.lower()


def split_kernels(kernels, steps, top=12):
    """{kernel name: microseconds over `steps` steps} -> ms a step: all, attention, copies (not
    attention), the rest, and the `top` kernels with the most time (name, ms, is attention)."""
    busy = sum(kernels.values())
    attn_us = sum(t for k, t in kernels.items() if kernel_is_attention(k))
    copy_us = sum(t for k, t in kernels.items() if profile_gpt.kernel_is_copy(k) and not kernel_is_attention(k))
    ranked = sorted(kernels.items(), key=lambda kv: -kv[1])[:top]
    return {"busy_ms": busy / 1e3 / steps, "attention_ms": attn_us / 1e3 / steps, "copies_ms": copy_us / 1e3 / steps,
            "other_ms": (busy - attn_us - copy_us) / 1e3 / steps,
            "top_kernels": [(k, t / 1e3 / steps, kernel_is_attention(k)) for k, t in ranked]}


def report(results, args, device):
    gpu = torch.cuda.get_device_name() if device.type == "cuda" else "CPU (a smoke test)"
    anchor = "sdpa_flash" if "sdpa_flash" in results else next(iter(results))  # the ratios' denominator
    shape = (f"{args.model}, {args.layers} layers, hidden {args.hidden}, {args.heads} heads / {args.kv_heads} KV heads "
             f"(D {args.hidden // args.heads}), intermediate {args.intermediate}, vocab {args.vocab}"
             + (f", sliding window {args.window}" if args.model == "mistral" else "") +
             f"; batch {args.batch} x {args.seq} tokens, {args.dtype}")
    lines = [f"# transformers training step ({gpu}, PyTorch {torch.__version__}, CUDA {torch.version.cuda})", "",
             shape, "",
             f"| attention | step ms | tokens/s | vs {anchor} | loss, first step | loss, last step |",
             "|---|---:|---:|---:|---:|---:|"]
    for attn, r in results.items():
        ratio = f"{results[anchor]['step_ms'] / r['step_ms']:.3f}x"
        lines.append(f"| {attn} | {r['step_ms']:.1f} | {r['tokens_per_s']:,.0f} | {ratio} | "
                     f"{r['first_loss']:.4f} | {r['last_loss']:.4f} |")
    lines += ["", f"Step: the median of {args.rounds} rounds of {args.steps} training steps (forward, backward, "
              f"AdamW), the attentions in turn in each round, the order rotated by one each round, after "
              f"{args.warmup} warm-up steps each. Rounds (ms a step): " + "; ".join(f"{a} " + ", ".join(f"{x:.1f}" for x in r["rounds_ms"]) for a, r in results.items())]
    profiled = {attn: r["profile"] for attn, r in results.items() if "profile" in r}
    if profiled:
        lines += ["", f"Under the profiler ({args.profile} steps each, ms a step): the GPU's kernels, split into "
                  "attention (the chapters', FlashAttention's and cuDNN's), copies and the rest.", "",
                  "| attention | GPU busy | attention kernels | copies | other kernels |", "|---|---:|---:|---:|---:|"]
        lines += [f"| {a} | {p['busy_ms']:.2f} | {p['attention_ms']:.2f} | {p['copies_ms']:.2f} | {p['other_ms']:.2f} |"
                  for a, p in profiled.items()]
        for a, p in profiled.items():
            lines += ["", f"{a}: the kernels with the most GPU time (ms a step; * attention)", "", "| kernel | ms |",
                      "|---|---:|"]
            lines += [f"| {'* ' if att else ''}`{k if len(k) <= 90 else k[:87] + '...'}` | {t:.3f} |"
                      for k, t, att in p["top_kernels"]]
    text = "\n".join(lines) + "\n"
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench_hf.md").write_text(text)
    meta = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    (args.out / "bench_hf.json").write_text(json.dumps({"gpu": gpu, "torch": torch.__version__, "args": meta,
                                                        "results": results}, indent=1))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True, help="folder for bench_hf.md and bench_hf.json")
    p.add_argument("--attn", nargs="+", choices=("sdpa_flash", "sdpa_cudnn", "sdpa", "tutorial"),
                   default=["sdpa_flash", "tutorial"])
    p.add_argument("--model", choices=("llama", "mistral"), default="llama")
    p.add_argument("--window", type=int, default=1024, help="Mistral's sliding window (--model mistral)")
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--intermediate", type=int, default=5632)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--seq", type=int, default=4096)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--dtype", choices=("bf16", "f16"), default="bf16")
    p.add_argument("--steps", type=int, default=3, help="training steps a round and attention")
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--profile", type=int, default=0, metavar="STEPS",
                   help="after the timing, STEPS steps of each attention under the PyTorch profiler: GPU time by kernel")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                   help="cpu: a smoke test (float32; the op runs its reference)")
    args = p.parse_args(argv)
    try:
        import transformers  # noqa: F401
    except ImportError:
        p.error("bench_hf.py needs the transformers package (pip install transformers)")
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("no CUDA device here (--device cpu for a smoke test)")
    if args.hidden % args.heads or args.heads % args.kv_heads:
        p.error("--hidden must be a multiple of --heads, and --heads of --kv-heads")
    if min(args.steps, args.rounds, args.batch, args.seq, args.layers) < 1 or args.warmup < 0:
        p.error("--steps, --rounds, --batch, --seq and --layers must be >= 1, --warmup >= 0")
    device = torch.device(args.device)
    if device.type == "cpu":
        args.attn = list(dict.fromkeys("sdpa" if a.startswith("sdpa") else a for a in args.attn))  # no backends
        args.dtype = "f32"
        dtype = torch.float32
    else:
        dtype = {"bf16": torch.bfloat16, "f16": torch.float16}[args.dtype]
    results = run(args, device, dtype)
    report(results, args, device)
    return 0


if __name__ == "__main__":
    sys.exit(main())
