#!/usr/bin/env python3
"""Where a training step of train_gpt.py's model spends its time, with SDPA and with the tutorial's
kernels: one PyTorch-profiler trace of a few steps for each attention, and a summary table.

    PYTHONPATH=python python3 python/examples/profile_gpt.py --out prof/      # on a GPU

For each attention it builds the model of train_gpt.py (same defaults, same seed) and runs
--warmup training steps; then it times --steps steps of each attention in turn, --rounds times,
without the profiler (CUDA synchronised at both ends: the wall time a step takes, the median
round; a drift of the machine's speed falls on both alike), and records --steps steps of each
under torch.profiler. It writes
<out>/trace_<attn>.json (open in chrome://tracing or https://ui.perfetto.dev) and prints, and
writes to <out>/profile.md:

- per step: wall time, GPU busy time (the sum of kernel times), and the kernels' time split into
  attention (the kernels of the attention calls, forward and backward), copies (aten::copy_ and
  the elementwise kernels it launches: layout changes) and everything else;
- the CPU time per step spent inside the attention calls: the forward from the model's call of the
  attention function to its return (Python, checks, copies, the op's dispatch, the launches), the
  backward inside the attention's autograd node (ours: the custom op's; SDPA's: its flash
  backward's); what the GPU waits for when the model is launch-bound;
- the ten kernels with the most GPU time and the ten operators with the most CPU time.
"""
import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import train_gpt  # noqa: E402  (the model, the optimizer, the training step)

# The profiler's names for the work of an attention call: the custom ops (ours), SDPA's ops (PyTorch's).
FORWARD_RANGE = "attention call"  # a record_function around each forward call (the Python included)


def is_backward_node(key):
    """The autograd nodes of the attention's backward (ours: the custom op's, or the C++ Attention
    function's on the eager fast path; SDPA's), inclusive of everything they run, without the
    engine's wrapper of the same node (counted once)."""
    return ("evaluate_function" not in key and
            ("GeneratedBackwardFor_flash_tutorial" in key or "CppNode<" in key and "Attention" in key
             or key.startswith("ScaledDotProduct") and "Backward" in key))

ATTENTION_KERNELS = ("flash_v3", "backward_v3", "prepare_kernel", "convert_dq", "tensor_core", "flash_fwd",
                     "flash_bwd", "flash::", "pytorch_flash::", "backward::")


def kernel_is_attention(name):
    return any(part in name for part in ATTENTION_KERNELS)


def kernel_is_copy(name):
    return "copy" in name.lower()  # at::native's direct_copy_kernel_cuda and its relatives


def model_args(attn, args):
    """train_gpt.py's arguments for the model (its --seed, --batch, --context, --layers, --d-model,
    --heads, --dtype as given to this script, its defaults otherwise)."""
    return train_gpt.parse_args(["--attn", attn, "--out", "/dev/null", *args.model_argv])


def make_step(attn, args, device):
    """train_gpt.py's model, optimizer and batches for one attention; returns step(i), which runs
    training step i (batch i modulo the batches made)."""
    attend = train_gpt.ATTENTIONS[attn]

    def timed_attention(q, k, v):
        with torch.profiler.record_function(FORWARD_RANGE):
            return attend(q, k, v)

    train_gpt.ATTENTIONS[attn] = timed_attention  # the model below looks it up when built
    targs = model_args(attn, args)
    amp_dtype = train_gpt.DTYPES[targs.dtype] if device.type == "cuda" else None  # the CPU runs float32
    train_data, _, vocab = train_gpt.load_text()
    torch.manual_seed(targs.seed)
    model = train_gpt.GPT(len(vocab), targs).to(device)
    train_gpt.ATTENTIONS[attn] = attend
    opt = train_gpt.make_optimizer(model, targs, device)
    scaler = torch.amp.GradScaler(device.type, enabled=amp_dtype == torch.float16)
    gen = torch.Generator().manual_seed(targs.seed)
    batches = [train_gpt.get_batch(train_data, targs.batch, targs.context, gen, device)
               for _ in range(args.warmup + args.steps)]

    def step(i):
        x, y = batches[i % len(batches)]
        train_gpt.train_step(model, opt, scaler, x, y, i, targs, device, amp_dtype)

    for i in range(args.warmup):
        step(i)
    train_gpt.synchronize(device)
    return step


def round_order(names, r):
    """The attentions in round r's order: each round starts one later than the round before, so
    that none always runs first or always after the same other."""
    k = r % len(names)
    return names[k:] + names[:k]


def time_rounds(steps, args, device):
    """ms a step of each attention: --rounds rounds, each timing --steps steps of every attention in
    turn (so that a drift of the machine's speed falls on all alike), in round_order; the median
    round and all."""
    times = {attn: [] for attn in steps}
    for r in range(args.rounds):
        for attn in round_order(list(steps), r):
            step = steps[attn]
            train_gpt.synchronize(device)
            t0 = time.perf_counter()
            for i in range(args.steps):
                step(args.warmup + r * args.steps + i)
            train_gpt.synchronize(device)
            times[attn].append((time.perf_counter() - t0) * 1e3 / args.steps)
    return {attn: (statistics.median(ms), ms) for attn, ms in times.items()}


def profile_one(attn, step, timing, args, device):
    wall_ms, rounds_ms = timing
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as prof:
        for i in range(args.steps):
            step(i)
        train_gpt.synchronize(device)
    prof.export_chrome_trace(str(args.out / f"trace_{attn}.json"))

    n = args.steps
    kernels = {}  # name -> total us
    for e in prof.events():
        # GPU events, less the GPU spans of record_function ranges (user annotations: not kernels)
        if e.device_type == torch.autograd.DeviceType.CUDA and not getattr(e, "is_user_annotation", False) \
                and e.name not in (FORWARD_RANGE,) and not e.name.startswith("Optimizer."):
            kernels[e.name] = kernels.get(e.name, 0.0) + e.device_time
    busy = sum(kernels.values())
    attn_us = sum(t for k, t in kernels.items() if kernel_is_attention(k))
    copy_us = sum(t for k, t in kernels.items() if kernel_is_copy(k) and not kernel_is_attention(k))
    averages = prof.key_averages()
    attn_cpu = sum(a.cpu_time_total for a in averages if a.key == FORWARD_RANGE)
    attn_cpu_bwd = sum(a.cpu_time_total for a in averages if is_backward_node(a.key))
    top_kernels = sorted(kernels.items(), key=lambda kv: -kv[1])[:10]
    top_cpu = sorted((a for a in averages if not a.key.startswith("ProfilerStep")),
                     key=lambda a: -a.self_cpu_time_total)[:10]
    return {"attn": attn, "wall_ms": wall_ms, "rounds_ms": rounds_ms, "busy_ms": busy / 1e3 / n, "attn_ms": attn_us / 1e3 / n,
            "copy_ms": copy_us / 1e3 / n, "other_ms": (busy - attn_us - copy_us) / 1e3 / n,
            "attn_cpu_fwd_ms": attn_cpu / 1e3 / n, "attn_cpu_bwd_ms": attn_cpu_bwd / 1e3 / n,
            "tokens_per_s": args.model.batch * args.model.context / (wall_ms / 1e3),
            "top_kernels": [(k, t / 1e3 / n) for k, t in top_kernels],
            "top_cpu": [(a.key, a.self_cpu_time_total / 1e3 / n, a.count // n) for a in top_cpu]}


def short(name, width=90):
    return name if len(name) <= width else name[:width - 3] + "..."


def report(results, args):
    gpu = torch.cuda.get_device_name() if args.device == "cuda" else "CPU (a smoke test: no kernels)"
    m = args.model
    lines = [f"# One training step of train_gpt.py's model ({gpu}, PyTorch {torch.__version__}, CUDA "
             f"{torch.version.cuda}, {m.dtype if args.device == 'cuda' else 'f32'}, batch {m.batch} x {m.context} tokens, {m.layers} layers, "
             f"d_model {m.d_model}, {m.heads} heads; mean of {args.steps} steps)", "",
             "| attention | wall ms | tokens/s | GPU busy ms | attention kernels ms | copies ms | other kernels ms "
             "| CPU in attention fwd ms | CPU in attention bwd ms |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        lines.append(f"| {r['attn']} | {r['wall_ms']:.3f} | {r['tokens_per_s']:,.0f} | {r['busy_ms']:.3f} | "
                     f"{r['attn_ms']:.3f} | {r['copy_ms']:.3f} | {r['other_ms']:.3f} | {r['attn_cpu_fwd_ms']:.3f} | "
                     f"{r['attn_cpu_bwd_ms']:.3f} |")
    lines += ["", "Wall time a step: the median of " + str(args.rounds) + " rounds of " + str(args.steps) +
              " steps, the attentions timed in turn in each round (the order rotated by one each round), without "
              "the profiler; the rest of the table from one profiled run of " + str(args.steps) + " steps. Rounds (ms a step): " +
              "; ".join(f"{r['attn']} " + ", ".join(f"{x:.2f}" for x in r["rounds_ms"]) for r in results)]
    if len(results) == 2:
        a, b = results
        lines.append(f"{b['attn']} / {a['attn']} tokens/s: {a['wall_ms'] / b['wall_ms']:.3f}")
    for r in results:
        lines += ["", f"## {r['attn']}: the kernels with the most GPU time (ms a step)", "",
                  "| kernel | ms |", "|---|---:|"]
        lines += [f"| `{short(k)}` | {t:.3f} |" for k, t in r["top_kernels"]]
        lines += ["", f"## {r['attn']}: the operators with the most CPU time of their own (ms a step, calls a step)",
                  "", "| operator | ms | calls |", "|---|---:|---:|"]
        lines += [f"| `{short(k)}` | {t:.3f} | {c} |" for k, t, c in r["top_cpu"]]
    text = "\n".join(lines) + "\n"
    print(text)
    (args.out / "profile.md").write_text(text)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True, help="folder for the traces and profile.md")
    p.add_argument("--attn", nargs="+", choices=tuple(train_gpt.ATTENTIONS), default=["sdpa", "tutorial"])
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--rounds", type=int, default=5, help="timing rounds, the attentions in turn")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                   help="cpu: a smoke test of the script (float32, no kernels to time)")
    # The rest are train_gpt.py's model arguments (--seed, --batch, --context, --layers, --d-model,
    # --heads, --dtype), checked by its parser.
    args, model_argv = p.parse_known_args(argv)
    args.model_argv = model_argv
    args.model = model_args(args.attn[0], args)
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("profile_gpt.py profiles CUDA kernels: no CUDA device here (--device cpu for a smoke test)")
    if args.steps < 1 or args.warmup < 0:
        p.error("--steps must be >= 1 and --warmup >= 0")
    args.out.mkdir(parents=True, exist_ok=True)
    device = torch.device(args.device)
    steps = {attn: make_step(attn, args, device) for attn in args.attn}
    timing = time_rounds(steps, args, device)
    report([profile_one(attn, steps[attn], timing[attn], args, device) for attn in args.attn], args)


if __name__ == "__main__":
    main()
