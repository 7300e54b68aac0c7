#!/usr/bin/env python3
"""Reads the chapters' benchmark JSON (Google Benchmark) and PyTorch's (compare_pytorch.py) from
one folder and writes summary.md (TFLOP/s per chapter per shape next to the PyTorch backends,
and memory against seqlen) plus PNG plots when matplotlib is available.

  python3 scripts/summarize.py OUTDIR
"""
import glob
import json
import os
import sys
from collections import defaultdict


def load_chapters(folder):
    fwd, mem, context = {}, {}, {}
    for path in sorted(glob.glob(os.path.join(folder, "bench_*.json"))):
        with open(path) as f:
            data = json.load(f)
        context = data.get("context", context)
        for b in data.get("benchmarks", []):
            parts = b["name"].split("/")
            if b.get("error_occurred"):
                continue
            if parts[0] == "fwd":  # fwd/<chapter>/<dtype>/D<d>/<full|causal>/seqlen:<n>/...
                key = (parts[2], int(parts[3][1:]), parts[4] == "causal", int(parts[5].split(":")[1]))
                fwd.setdefault(key, {})[parts[1]] = b
            elif parts[0] == "mem":  # mem/<chapter>/<dtype>/seqlen:<n>/...
                mem.setdefault(int(parts[3].split(":")[1]), {})[parts[1]] = b
    return fwd, mem, context


def load_torch(folder):
    path = os.path.join(folder, "pytorch.json")
    if not os.path.exists(path):
        return {}, {}
    with open(path) as f:
        data = json.load(f)
    table = {}
    for r in data["results"]:
        if r["direction"] == "fwd":
            key = (r["dtype"], r["head_dim"], r["causal"], r["seqlen"])
            table.setdefault(key, {})[r["backend"]] = r
    return table, data["meta"]


def fmt(x):
    return "-" if x is None else f"{x:.1f}"


def main():
    folder = sys.argv[1]
    fwd, mem, context = load_chapters(folder)
    torch_fwd, meta = load_torch(folder)
    chapters = sorted({c for row in fwd.values() for c in row})
    backends = [b for b in ("math", "efficient", "flash", "cudnn")
                if any(b in row and "tflops" in row[b] for row in torch_fwd.values())]
    last = chapters[-1] if chapters else None
    lines = [f"GPU: {meta.get('gpu', '?')}; PyTorch {meta.get('torch', '?')} (CUDA {meta.get('cuda', '?')}); "
             f"benchmark host: {context.get('host_name', '?')}; TFLOP/s from the median run; "
             "FLOPs = 4*B*H*S*S*D (halved for causal); batch = 16384/seqlen, heads = 2048/D.", ""]
    head = ["dtype", "D", "mask", "seqlen"] + chapters + [f"torch {b}" for b in backends]
    head += [f"{last} / torch {b}" for b in backends]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for key in sorted(fwd):
        dtype, d, causal, seqlen = key
        row = fwd[key]
        ours = [row[c]["TFLOPS"] if c in row else None for c in chapters]
        theirs = [torch_fwd.get(key, {}).get(b, {}).get("tflops") for b in backends]
        ratios = [(ours[-1] / t) if (ours[-1] and t) else None for t in theirs]
        cells = [dtype, str(d), "causal" if causal else "full", str(seqlen)] + [fmt(x) for x in ours + theirs]
        cells += ["-" if r is None else f"{r:.2f}x" for r in ratios]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Device memory (MiB) held by one forward, batch 1, 16 heads, D 64 (peak; in brackets: "
              "beyond Q, K, V, O, LSE):", ""]
    mem_chapters = sorted({c for row in mem.values() for c in row})
    lines += ["| seqlen | " + " | ".join(mem_chapters) + " |", "|---|" + "---|" * len(mem_chapters)]
    for seqlen in sorted(mem):
        cells = [f"{mem[seqlen][c]['peak_mem_MiB']:.0f} ({mem[seqlen][c]['extra_mem_MiB']:.0f})"
                 if c in mem[seqlen] else "-" for c in mem_chapters]
        lines.append(f"| {seqlen} | " + " | ".join(cells) + " |")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(folder, "summary.md"), "w") as f:
        f.write(text)
    print(text)
    plot(folder, fwd, torch_fwd, mem, chapters, backends, meta)


def plot(folder, fwd, torch_fwd, mem, chapters, backends, meta):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not found: no plots")
        return
    groups = defaultdict(list)
    for key in fwd:
        groups[key[:3]].append(key[3])
    for (dtype, d, causal), seqlens in sorted(groups.items()):
        seqlens = sorted(seqlens)
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for c in chapters:
            pts = [(s, fwd[(dtype, d, causal, s)][c]["TFLOPS"]) for s in seqlens if c in fwd[(dtype, d, causal, s)]]
            if pts:
                ax.plot(*zip(*pts), marker="o", label=c)
        for b in backends:
            pts = [(s, torch_fwd[(dtype, d, causal, s)][b]["tflops"]) for s in seqlens
                   if "tflops" in torch_fwd.get((dtype, d, causal, s), {}).get(b, {})]
            if pts:
                ax.plot(*zip(*pts), linestyle="--", marker="x", label=f"PyTorch SDPA {b}")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("sequence length (batch = 16k / seqlen)")
        ax.set_ylabel("TFLOP/s")
        ax.set_title(f"forward, {dtype}, D={d}, {'causal' if causal else 'non-causal'} - {meta.get('gpu', '')}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(os.path.join(folder, f"tflops_{dtype}_D{d}_{'causal' if causal else 'full'}.png"), dpi=110)
        plt.close(fig)
    if mem:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for c in sorted({c for row in mem.values() for c in row}):
            pts = [(s, mem[s][c]["peak_mem_MiB"]) for s in sorted(mem) if c in mem[s]]
            ax.plot(*zip(*pts), marker="o", label=c)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", base=2)
        ax.set_xlabel("sequence length (batch 1, 16 heads, D 64)")
        ax.set_ylabel("peak device memory (MiB)")
        ax.set_title(f"memory of one forward - {meta.get('gpu', '')}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(os.path.join(folder, "memory_vs_seqlen.png"), dpi=110)
        plt.close(fig)


if __name__ == "__main__":
    main()
