#!/usr/bin/env python3
"""Speed-up against mask density, from chapter 07's (forward) or chapter 08's (backward) benchmark JSON.

    ./build/07_block_sparse/07_block_sparse_bench --benchmark_out=sparse.json --benchmark_out_format=json
    python3 scripts/plot_sparse.py sparse.json sparse.png
    (08: ./build/08_backward/08_backward_bench --benchmark_filter=/bf16/ ..., the same way)

For every (chapter, dtype, D, key block size, seqlen) the random-mask runs are compared with the
same kernel at density 1.0 (speed-up = ms at density 1.0 / ms), drawn against the mask's exact
density, with the ideal 1 / density. The table printed to stdout also gives each run against
the dense kernel on the same shape (07: chapter 06's forward, dense06/.../full; 08: the dense
backward, bwd/08_backward/.../full). Only measured numbers are drawn.
"""
import json
import re
import sys
from collections import defaultdict

SPARSE = re.compile(r"(?:bwd_)?sparse/(07_block_sparse|08_backward)/(\w+)/D(\d+)/blockk(\d+)/random/"
                    r"density:([\d.]+)/seqlen:(\d+)")
DENSE = {"07_block_sparse": re.compile(r"dense06/06_tensor_core/(\w+)/D(\d+)/full/seqlen:(\d+)"),
         "08_backward": re.compile(r"bwd/08_backward/(\w+)/D(\d+)/full/seqlen:(\d+)")}


def load(path):
    with open(path) as f:
        runs = json.load(f)["benchmarks"]
    sparse = defaultdict(dict)  # (chapter, dtype, D, block_k, seqlen) -> {density: ms}
    dense = {}  # (chapter, dtype, D, seqlen) -> ms
    for run in runs:
        if run.get("run_type", "iteration") != "iteration" or "ms_median" not in run:
            continue
        name = run.get("run_name", run["name"])
        m = SPARSE.match(name)
        if m:
            chapter, dtype, d, bk, _, seqlen = m.groups()
            sparse[(chapter, dtype, int(d), int(bk), int(seqlen))][run["density"]] = run["ms_median"]
            continue
        for chapter, pattern in DENSE.items():
            m = pattern.match(name)
            if m:
                dtype, d, seqlen = m.groups()
                dense[(chapter, dtype, int(d), int(seqlen))] = run["ms_median"]
    return sparse, dense


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sparse, dense = load(sys.argv[1])
    if not sparse:
        sys.exit(f"{sys.argv[1]}: no sparse/07_block_sparse/... or bwd_sparse/08_backward/... random runs with ms_median")

    print("chapter dtype D block_k seqlen density ms x_density1 x_dense")
    for key in sorted(sparse):
        chapter, dtype, d, bk, seqlen = key
        runs = sparse[key]
        full = runs.get(max(runs)) if max(runs) >= 0.999 else None
        base = dense.get((chapter, dtype, d, seqlen))
        for density in sorted(runs, reverse=True):
            ms = runs[density]
            x1 = f"{full / ms:.2f}" if full else "-"
            xd = f"{base / ms:.2f}" if base else "-"
            print(f"{chapter} {dtype} {d} {bk} {seqlen} {density:.4f} {ms:.4f} {x1} {xd}")

    try:
        import matplotlib
    except ImportError:
        sys.exit("matplotlib is needed for the plot (pip install matplotlib); the table above is complete")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dims = sorted({k[2] for k in sparse})
    rows = sorted({(k[0], k[3]) for k in sparse}, key=lambda r: (r[0], -r[1]))  # (chapter, block_k)
    fig, axes = plt.subplots(len(rows), len(dims), figsize=(5.5 * len(dims), 4.5 * len(rows)), squeeze=False)
    for r, (chapter, bk) in enumerate(rows):
        for c, d in enumerate(dims):
            ax = axes[r][c]
            lowest = 1.0
            for key in sorted(k for k in sparse if k[0] == chapter and k[2] == d and k[3] == bk):
                runs = sparse[key]
                if max(runs) < 0.999:
                    continue  # no density-1.0 run to compare with
                full = runs[max(runs)]
                xs = sorted(runs)
                lowest = min(lowest, xs[0] if xs[0] > 0 else lowest)
                ax.plot(xs, [full / runs[x] for x in xs], "o-", label=f"{key[1]} seqlen {key[4]}")
            ideal = [x / 100 for x in range(int(lowest * 100), 101)]
            ax.plot(ideal, [1 / x for x in ideal], "k--", label="ideal: 1 / density")
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("mask density (active blocks / all)")
            ax.set_ylabel("speed-up over density 1.0")
            what = "forward" if chapter == "07_block_sparse" else "backward"
            ax.set_title(f"{chapter} ({what}), D = {d}, blocks 128 x {bk}")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=120)
    print(f"wrote {sys.argv[2]}")


if __name__ == "__main__":
    main()
