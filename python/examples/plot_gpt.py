#!/usr/bin/env python3
"""Plot the loss curves of several train_gpt.py runs and print a markdown table of them.

    python3 python/examples/plot_gpt.py --out docs/gpt_loss_h100.png gpt_sdpa_0.json gpt_sdpa_1.json \
        gpt_tutorial_0.json gpt_tutorial_1.json

Top panel: validation loss (solid) and training loss (dashed, lighter) against step, one color
per (attention, seed). Bottom panel: each run's validation loss minus the first SDPA run's, at
the same steps: the differences between SDPA seeds show the run-to-run noise that a difference
between the tutorial's kernels and SDPA has to be judged against.

The table (stdout): attention, seed, final val loss, train and inference tokens/s; with two or
more SDPA runs, the largest |val-loss difference| at any eval step between SDPA seeds, and between
the tutorial and SDPA at the same seed.
"""
import argparse
import itertools
import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def load(paths):
    runs = []
    for path in paths:
        run = json.loads(Path(path).read_text())
        run["path"] = str(path)
        runs.append(run)
    return runs


def label(run):
    return f"{run['attn']} seed {run['seed']}"


def val_by_step(run):
    return {p["step"]: p["val_loss"] for p in run["curve"]}


def max_val_diff(a, b):
    """Largest |val loss of a - val loss of b| over the eval steps both have (None if none)."""
    va, vb = val_by_step(a), val_by_step(b)
    common = va.keys() & vb.keys()
    return max((abs(va[s] - vb[s]) for s in common), default=None)


def title(runs):
    c = runs[0]["config"]
    size = (f"{c['layers']} layers, d_model {c['d_model']}, {c['heads']} heads, "
            f"{c['params'] / 1e6:.1f}M params, batch {c['batch']} x context {c['context']}")
    dtype = c.get("compute_dtype", c["dtype"])
    gpus = sorted({r["config"]["gpu"] for r in runs})
    return f"char-level GPT on Genesis+Exodus: {', '.join(gpus)}, {dtype}\n{size}"


def styles(runs):
    """One color per (attention, seed): SDPA in blues, drawn wide, the tutorial in oranges, drawn
    narrow on top, so that a tutorial curve lying on its SDPA twin leaves the blue showing."""
    families = {"sdpa": (plt.cm.Blues, 2.6), "tutorial": (plt.cm.Oranges, 1.2)}
    out = []
    for run in runs:
        cmap, width = families.get(run["attn"], (plt.cm.Greys, 1.5))
        same = [r for r in runs if r["attn"] == run["attn"]]
        shade = 0.9 - 0.4 * same.index(run) / max(1, len(same) - 1)
        out.append({"color": cmap(shade), "lw": width})
    return out


def plot(runs, out):
    reference = next((r for r in runs if r["attn"] == "sdpa"), runs[0])
    ref_val = val_by_step(reference)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 8), sharex=True, height_ratios=(3, 2))
    order = sorted(range(len(runs)), key=lambda i: runs[i]["attn"] != "sdpa")  # SDPA first, underneath
    style = styles(runs)
    for i in order:
        run, st = runs[i], style[i]
        steps = [p["step"] for p in run["curve"]]
        top.plot(steps, [p["val_loss"] for p in run["curve"]], **st, label=f"{label(run)} (val)")
        top.plot(steps, [p["train_loss"] for p in run["curve"]], **st, alpha=0.4, ls="--",
                 label=f"{label(run)} (train)")
        val = val_by_step(run)
        common = [s for s in steps if s in ref_val]
        bottom.plot(common, [val[s] - ref_val[s] for s in common], **st, marker=".", label=label(run))
    top.set_ylabel("loss (nats / character)")
    top.set_title(title(runs))
    top.legend(fontsize=8, ncol=2)
    top.grid(alpha=0.3)
    bottom.axhline(0, color="black", lw=0.8)
    bottom.set_xlabel("step")
    bottom.set_ylabel(f"val loss - {label(reference)}")
    bottom.legend(fontsize=8, ncol=2)
    bottom.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    print(f"wrote {out}", file=sys.stderr)  # stdout is the table


def fmt_rate(x):
    return "n/a" if x is None else f"{x:,.0f}"


def table(runs):
    lines = ["| attention | seed | final val loss | train tokens/s | inference tokens/s |",
             "|---|---:|---:|---:|---:|"]
    for r in runs:
        lines.append(f"| {r['attn']} | {r['seed']} | {r['final_val_loss']:.4f} | "
                     f"{fmt_rate(r['train_tokens_per_s'])} | {fmt_rate(r['infer_tokens_per_s'])} |")
    return "\n".join(lines)


def noise_summary(runs):
    """Lines comparing SDPA seeds with each other and the tutorial with SDPA seed for seed."""
    sdpa = [r for r in runs if r["attn"] == "sdpa"]
    if len(sdpa) < 2:
        return []
    pairs = [max_val_diff(a, b) for a, b in itertools.combinations(sdpa, 2)]
    pairs = [d for d in pairs if d is not None]
    lines = [f"Largest |val-loss difference| between SDPA seeds at any eval step: "
             f"{max(pairs):.3g}" if pairs else "SDPA runs share no eval step."]
    same_seed = [max_val_diff(t, s) for t in runs if t["attn"] == "tutorial"
                 for s in sdpa if s["seed"] == t["seed"]]
    same_seed = [d for d in same_seed if d is not None]
    lines.append(f"Largest |val-loss difference| between tutorial and SDPA at the same seed: {max(same_seed):.3g}"
                 if same_seed else "No tutorial run has an SDPA run with the same seed.")
    return lines


def kernel_notes(runs):
    return [f"Note: {r['path']} ({label(r)}) ran flash_tutorial's PyTorch reference, not the kernels: "
            f"{r.get('kernel_reason')}" for r in runs if r["attn"] == "tutorial" and r.get("kernel_reason")]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="the PNG to write")
    p.add_argument("runs", nargs="+", help="JSON files written by train_gpt.py")
    args = p.parse_args()
    runs = load(args.runs)
    plot(runs, args.out)
    print()
    print(table(runs))
    for line in noise_summary(runs) + kernel_notes(runs):
        print()
        print(line)


if __name__ == "__main__":
    main()
