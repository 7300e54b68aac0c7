#!/usr/bin/env python3
"""Draws and sums up a ring's timeline, the spans that 12_ring_attention_bench --timeline writes.

    ./build/12_ring_attention/12_ring_attention_bench --timeline timeline.json --rank-seqlen 131072
    python3 scripts/plot_ring_timeline.py timeline.json [figure.png]

Each rank has two lanes: its compute stream and its communication stream. A span is what one
stream ran in one ring step, timed by CUDA events on that stream (Ring::record_timeline); each
GPU's times count from its own origin event, and the origins are recorded together on idle
streams. The table printed to stdout gives, for each rank and pass (forward, backward): the
pass's time on the compute stream, the time its compute stream was busy, the time it waited
(the rest), the communication stream's time and how much of that ran while the compute stream
attended a block (hidden). Drawing needs matplotlib; the table does not.
"""
import json
import sys

COMPUTE_WORK = ("forward", "backward")  # the spans of the attention itself
COLOURS = {"forward": "#0072B2", "backward": "#009E73", "pass K,V": "#E69F00", "pass dK,dV": "#CC79A7",
           "start": "#BBBBBB", "finish": "#BBBBBB"}  # Okabe-Ito, as scripts/figures.py


def phases(spans):
    """Each span with its pass, 'forward' or 'backward': a rank's backward begins at its second
    'start' span (the forward's comes first, then the backward's)."""
    out = []
    for rank in sorted({s["rank"] for s in spans}):
        mine = sorted((s for s in spans if s["rank"] == rank), key=lambda s: s["start_ms"])
        starts = [s["start_ms"] for s in mine if s["what"] == "start" and s["stream"] == "compute"]
        if len(starts) != 2:
            raise ValueError(f"rank {rank}: expected a forward's and a backward's 'start' span, found {len(starts)}")
        for s in mine:
            out.append(dict(s, phase="backward" if s["start_ms"] >= starts[1] else "forward"))
    return out


def overlap(a, b):
    """Time in both of two lists of (start, end) intervals (each list's intervals disjoint)."""
    return sum(max(0.0, min(e1, e2) - max(s1, s2)) for s1, e1 in a for s2, e2 in b)


def summarize(spans):
    """Rows (rank, phase, wall, busy, waiting, comm, hidden), times in ms."""
    rows = []
    tagged = phases(spans)
    for rank in sorted({s["rank"] for s in tagged}):
        for phase in ("forward", "backward"):
            mine = [s for s in tagged if s["rank"] == rank and s["phase"] == phase]
            compute = [(s["start_ms"], s["end_ms"]) for s in mine if s["stream"] == "compute"]
            work = [(s["start_ms"], s["end_ms"]) for s in mine if s["stream"] == "compute" and s["what"] in COMPUTE_WORK]
            comm = [(s["start_ms"], s["end_ms"]) for s in mine if s["stream"] == "comm"]
            wall = max(e for _, e in compute) - min(b for b, _ in compute)
            busy = sum(e - b for b, e in compute)
            rows.append(dict(rank=rank, phase=phase, wall=wall, busy=busy, waiting=wall - busy,
                             comm=sum(e - b for b, e in comm), hidden=overlap(comm, work)))
    return rows


def table(meta, rows):
    lines = [f"Ring of {meta['ranks']} ({meta['transport']}) on {meta['gpu']}: causal forward + backward, "
             f"{meta['dtype']}, D {meta['head_dim']}, {meta['heads']} heads, {meta['rank_seqlen']:,} tokens a rank",
             "",
             "| rank | pass | time (ms) | compute busy (ms) | waiting (ms) | communication (ms) | hidden under attention |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        hidden = f"{100 * r['hidden'] / r['comm']:.1f}%" if r["comm"] > 0 else "-"
        lines.append(f"| {r['rank']} | {r['phase']} | {r['wall']:.2f} | {r['busy']:.2f} | {r['waiting']:.2f} | "
                     f"{r['comm']:.2f} | {hidden} |")
    return "\n".join(lines)


def draw(meta, spans, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    ranks = sorted({s["rank"] for s in spans})
    lanes = [(r, stream) for r in ranks for stream in ("compute", "comm")]
    fig, ax = plt.subplots(figsize=(9, 0.55 * len(lanes) + 1.4), dpi=160)
    end = max(s["end_ms"] for s in spans)
    for y, (rank, stream) in enumerate(lanes):
        for s in spans:
            if s["rank"] != rank or s["stream"] != stream:
                continue
            width = s["end_ms"] - s["start_ms"]
            ax.broken_barh([(s["start_ms"], width)], (y - 0.36, 0.72), facecolor=COLOURS[s["what"]],
                           edgecolor="white", linewidth=0.6)
            if s["what"] in COMPUTE_WORK and width > 0.04 * end:
                ax.text(s["start_ms"] + width / 2, y, f"step {s['step']}", ha="center", va="center", fontsize=8,
                        color="white")
    ax.set_yticks(range(len(lanes)), [f"GPU {r} {stream}" for r, stream in lanes])
    ax.set_ylim(len(lanes) - 0.4, -0.6)
    ax.set_xlim(0, end * 1.01)
    ax.set_xlabel("ms (CUDA events on each stream; each GPU's clock from an origin recorded on all at once)")
    ax.set_title(f"Ring attention on {meta['ranks']} x {meta['gpu']} ({meta['transport']}): causal forward + "
                 f"backward, {meta['dtype']}, D {meta['head_dim']}, {meta['rank_seqlen'] // 1024}k tokens a GPU",
                 fontsize=10)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.legend(handles=[Patch(color=COLOURS[k], label=k) for k in ("forward", "backward", "pass K,V", "pass dK,dV")]
              + [Patch(color=COLOURS["start"], label="start, finish (zeroing, rounding)")],
              loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=5, frameon=False, fontsize=8)
    fig.savefig(path, bbox_inches="tight", pad_inches=0.08, metadata={"Software": None})
    print("wrote", path)


def main(argv):
    if len(argv) not in (2, 3):
        print(__doc__)
        return 2
    with open(argv[1]) as f:
        meta = json.load(f)
    print(table(meta, summarize(meta["spans"])))
    if len(argv) == 3:
        draw(meta, meta["spans"], argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
