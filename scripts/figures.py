#!/usr/bin/env python3
"""Draws the chapter figures from the project's own rules: python3 scripts/figures.py [09 ...]

Writes docs/figures/*.png (committed; each chapter README shows its own). No GPU, no build: where a
figure follows a rule that lives in C++ (tile ownership, tile skipping, the swizzle, the block mask
generator), the rule is ported below in a small function whose comment names the C++ function and
file it mirrors, so that a reader can check one against the other. Every random input is seeded,
so the PNGs are the same on every run (up to the matplotlib version).
Needs matplotlib and numpy (python3 -m pip install matplotlib); the build and the tests do not.
"""

import math
import os
import sys

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Patch, Rectangle  # noqa: E402
from matplotlib.path import Path  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs", "figures")
DPI = 160  # 8-inch-wide figures come out 1280 px: sharp when a README shows them at ~800 px

# One palette for every figure (colour-blind safe, Okabe-Ito).
BLUE, ORANGE, GREEN, RED, PURPLE, SKY, YELLOW, GREY = (
    "#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#BBBBBB")

plt.rcParams.update({
    "font.size": 10, "axes.titlesize": 11, "axes.labelsize": 10, "legend.fontsize": 9,
    "axes.spines.top": False, "axes.spines.right": False, "figure.dpi": DPI, "savefig.dpi": DPI,
})


def save(fig, name):
    path = os.path.join(OUT, name)
    fig.savefig(path, bbox_inches="tight", pad_inches=0.08, metadata={"Software": None})
    plt.close(fig)
    print("wrote", os.path.relpath(path))


def grid_axes(ax, rows, cols, xlabel, ylabel, major=1):
    """An axes for a (rows, cols) grid of unit cells, row 0 at the top."""
    ax.set_xlim(0, cols)
    ax.set_ylim(rows, 0)
    ax.set_aspect("equal")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_xticks(np.arange(0, cols, major) + 0.5, [str(c) for c in range(0, cols, major)])
    ax.set_yticks(np.arange(0, rows, major) + 0.5, [str(r) for r in range(0, rows, major)])
    ax.tick_params(length=0)
    for side in ("top", "right", "bottom", "left"):
        ax.spines[side].set_visible(False)


def cell(ax, r, c, color, text=None, fontsize=8, textcolor="black", edge="white", lw=0.8):
    ax.add_patch(Rectangle((c, r), 1, 1, facecolor=color, edgecolor=edge, linewidth=lw))
    if text is not None:
        ax.text(c + 0.5, r + 0.5, text, ha="center", va="center", fontsize=fontsize, color=textcolor)


# ------------------------------------------------------------------------------------------------
# Ports of C++ rules.

def ceil_div(a, b):
    """common/device/tiles.h: ceil_div."""
    return (a + b - 1) // b


def causal_visible(i, j, seqlen_q, seqlen_k):
    """common/host/problem.h: causal_visible. Bottom-right aligned: query i sees key j iff j <= i + Sk - Sq."""
    return j <= i + (seqlen_k - seqlen_q)


def key_tile_end(i_tile, Br, Bc, seqlen_q, seqlen_k, causal):
    """common/device/tiles.h: key_tile_end. Query tile i_tile visits key tiles 0 .. end - 1."""
    Tc = ceil_div(seqlen_k, Bc)
    if not causal:
        return Tc
    last_row = (i_tile + 1) * Br - 1 if (i_tile + 1) * Br < seqlen_q else seqlen_q - 1
    last_key = last_row + (seqlen_k - seqlen_q)  # the last key that row sees
    if last_key < 0:
        return 0
    # C++ integer division truncates toward zero; last_key >= 0 here, so // is the same.
    return last_key // Bc + 1 if last_key // Bc + 1 < Tc else Tc


def needs_mask(i_tile, j_tile, Br, Bc, seqlen_q, seqlen_k, causal):
    """common/device/tiles.h: needs_mask. Past Sk, or some row of the tile misses some key of it."""
    last_col = (j_tile + 1) * Bc - 1
    if last_col >= seqlen_k:
        return True
    return causal and not causal_visible(i_tile * Br, last_col, seqlen_q, seqlen_k)


def tiled_owner(row, col):
    """02_tiled/tiled.cu: scores_kernel and output_kernel. ty = threadIdx.x / 16, tx = threadIdx.x % 16;
    thread (ty, tx) owns rows ty + 16 r and columns tx + 16 c (r, c < 4) of the 64 x 64 tile."""
    ty, tx = row % 16, col % 16
    return ty * 16 + tx  # threadIdx.x


kChunkElems = 8  # common/device/swizzle.h: a 16-byte chunk holds 8 fp16 / bf16 elements


def swizzle_key(row, row_chunks):
    """common/device/swizzle.h: swizzle_key."""
    return row % 8 if row_chunks >= 8 else row // (8 // row_chunks) % row_chunks


def tile_offset(row, col, cols, swizzled):
    """common/device/swizzle.h: tile_offset. Element offset of (row, col) in a (rows, cols) tile."""
    chunk = col // kChunkElems
    placed = chunk ^ swizzle_key(row, cols // kChunkElems) if swizzled else chunk
    return row * cols + placed * kChunkElems + col % kChunkElems


def bank_group(element_offset):
    """32 banks of 4 bytes: a 16-byte chunk's bank group is its position in its 128-byte line
    (the rule stated in common/device/swizzle.h's header). Elements are 2 bytes."""
    return (2 * element_offset) % 128 // 16


MASK64 = (1 << 64) - 1


def splitmix64(x):
    """07_block_sparse/block_mask.cpp: splitmix64 (uint64 arithmetic, wrapping)."""
    x = (x + 0x9E3779B97F4A7C15) & MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK64
    return x ^ (x >> 31)


def random_pattern_row(density, seed, b, h, heads, num_q_blocks, qb, Tk):
    """07_block_sparse/block_mask.cpp: pattern_row, Pattern::random. round(density * Tk) distinct key
    blocks by a partial Fisher-Yates shuffle seeded by (seed, b, h, qb), returned ascending."""
    cols = list(range(Tk))
    count = int(math.floor(density * Tk + 0.5))  # std::lround (density * Tk >= 0)
    state = splitmix64(seed ^ splitmix64((b * heads + h) * num_q_blocks + qb))
    for n in range(count):
        state = splitmix64(state)
        k = n + state % (Tk - n)
        cols[n], cols[k] = cols[k], cols[n]
    return sorted(cols[:count])


def csr_from_rows(rows):
    """07_block_sparse/block_mask.h: BlockMask. Row r's key blocks are
    col_indices[row_offsets[r] .. row_offsets[r + 1]), ascending."""
    row_offsets, col_indices = [0], []
    for cols in rows:
        col_indices += cols
        row_offsets.append(len(col_indices))
    return row_offsets, col_indices


def packed_row(r, seqlen_q):
    """10_decoding/split_plan.h: packed_row. Row r of a packed tile: (query head in the group, position)."""
    return r // seqlen_q, r % seqlen_q


def plan_splits(tiles, key_blocks, slots, max_splits=128):
    """10_decoding/split_plan.cpp: plan_splits. (splits, key tiles per split): no split with 80% of the
    slots busy unsplit; else the most pieces one wave holds, then the fewest pieces of that length."""
    if key_blocks <= 1 or tiles >= 0.8 * slots:
        return 1, key_blocks
    most = min(max_splits, key_blocks, slots // tiles)
    blocks_per_split = ceil_div(key_blocks, most)
    return ceil_div(key_blocks, blocks_per_split), blocks_per_split


# ------------------------------------------------------------------------------------------------
# 1. 01_naive: the memory hierarchy, and the bytes each of the three kernels moves through HBM.

def fig_01_naive():
    B, H, N, D, f32 = 4, 16, 1024, 64, 4
    MiB = 2.0 ** 20
    qkvo = B * H * N * D * f32  # one of Q, K, V, O: [B, H, N, D] floats (Hkv = H)
    s = B * H * N * N * f32     # S (and P, which overwrites it): [B, H, N, N] floats
    lse = B * H * N * f32       # LSE: [B, H, N] floats
    # Bytes through HBM per kernel (01_naive/naive.cu), with Q, K, V read once each: the best any
    # cache could do for them. The passes over S and P cannot be cached: 256 MiB >> L2.
    #   scores_kernel : read Q, K;  write S                      = 2 qkvo + s
    #   softmax_kernel: read S three times (max, sum, normalize); write P over S; write LSE
    #                                                            = 3 s + s + lse
    #   output_kernel : read P, V;  write O                      = s + 2 qkvo
    # and the least a forward must move (common/host/problem.cpp: forward_min_bytes): Q, K, V, O, LSE once.
    kernels = ["1: S = scale QK$^T$", "2: P = softmax(S)", "3: O = PV", "minimum\n(Q,K,V,O,LSE once)"]
    sp = np.array([s, 4 * s, s, 0]) / MiB                         # through S / P
    io = np.array([2 * qkvo, lse, 2 * qkvo, 4 * qkvo + lse]) / MiB  # through Q, K, V, O, LSE

    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(9.5, 4.0), gridspec_kw={"width_ratios": [1, 1.55]})

    # Left: the hierarchy (H100 SXM figures), fastest and smallest at the top.
    ax0.set_xlim(0, 10)
    ax0.set_ylim(0, 10)
    ax0.axis("off")
    ax0.set_title("Where the data lives (H100 SXM)")
    levels = [("registers", "256 KB per SM", 3.0, SKY),
              ("shared memory / L1", "up to 228 KB per SM", 4.6, SKY),
              ("L2 cache", "50 MB per GPU", 6.4, GREY),
              ("HBM (global memory)", "80 GB per GPU, ~3.35 TB/s", 9.0, ORANGE)]
    for n, (name, size, width, color) in enumerate(levels):
        y = 7.7 - n * 2.3
        ax0.add_patch(FancyBboxPatch((5 - width / 2, y), width, 1.6, boxstyle="round,pad=0.05",
                                     facecolor=color, edgecolor="black", linewidth=0.8, alpha=0.85))
        ax0.text(5, y + 1.05, name, ha="center", va="center", fontsize=10, weight="bold")
        ax0.text(5, y + 0.45, size, ha="center", va="center", fontsize=9)
    ax0.text(5, -0.6, "S and P (256 MiB here) fit only in HBM", ha="center", fontsize=9, color=RED)

    # Right: the bars.
    x = np.arange(len(kernels))
    ax1.bar(x, io, color=BLUE, label="Q, K, V, O, LSE")
    ax1.bar(x, sp, bottom=io, color=ORANGE, label="S / P (N x N per head)")
    for xi, total in zip(x, io + sp):
        ax1.text(xi, total + 20, f"{total:,.0f}", ha="center", va="bottom", fontsize=9)
    ax1.set_xticks(x, kernels, fontsize=9)
    ax1.set_ylabel("HBM traffic (MiB)")
    ax1.set_ylim(0, (io + sp).max() * 1.12)
    ax1.set_title(f"Bytes moved per kernel, B={B} H={H} N={N} D={D} f32")
    ax1.legend(frameon=False, loc="upper right")
    fig.tight_layout()
    save(fig, "01_naive_traffic.png")


# ------------------------------------------------------------------------------------------------
# 2. 02_tiled: which thread owns which element of a 64 x 64 tile of S.

def fig_02_tiled():
    fig, ax = plt.subplots(figsize=(6.4, 6.4))
    grid_axes(ax, 64, 64, "column of the tile (key j - j0)", "row of the tile (query i - i0)", major=8)
    picks = {0: BLUE, 1: ORANGE, 16: GREEN, 16 * 9 + 5: PURPLE}  # threadIdx.x -> colour
    for r in range(64):
        for c in range(64):
            t = tiled_owner(r, c)
            if t in picks:
                ax.add_patch(Rectangle((c, r), 1, 1, facecolor=picks[t], edgecolor="none"))
            elif t < 32:  # warp 0: threads 0-31 are ty = 0 and 1
                ax.add_patch(Rectangle((c, r), 1, 1, facecolor=SKY, alpha=0.3, edgecolor="none"))
    for k in range(0, 65, 16):  # the 4 x 4 blocks of 16 x 16 elements, one element per thread each
        ax.axhline(k, color="black", linewidth=0.8)
        ax.axvline(k, color="black", linewidth=0.8)
    for k in range(0, 65, 1):
        ax.axhline(k, color="#EEEEEE", linewidth=0.3, zorder=0)
        ax.axvline(k, color="#EEEEEE", linewidth=0.3, zorder=0)
    handles = [Patch(color=col, label=f"thread {t}: ty={t // 16}, tx={t % 16}") for t, col in picks.items()]
    handles.append(Patch(color=SKY, alpha=0.3, label="the rest of warp 0 (threads 0-31)"))
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.08), ncol=2, frameon=False)
    ax.set_title("64 x 64 tile of S, 16 x 16 threads: thread (ty, tx)\n"
                 "owns rows ty + 16r, columns tx + 16c (r, c < 4)")
    save(fig, "02_tiled_ownership.png")


# ------------------------------------------------------------------------------------------------
# 3. 03_online_softmax: the running max and sum of one row, key by key and block by block.

def fig_03_online_softmax():
    rng = np.random.default_rng(11)  # a seed whose max grows in three later blocks
    n, Bc = 128, 16
    s = rng.standard_normal(n)  # one row of scores s_j = scale * q . k_j, standard normal
    # Key by key: 03_online_softmax/model.cpp, step() (the kernel's loop in online_softmax.cu).
    m, l = -math.inf, 0.0
    m_key, l_key = [], []
    for x in s:
        if x > m:
            l *= math.exp(m - x)  # alpha = exp(m_old - m_new) < 1; exp(-inf) = 0 at the first key
            m = x
        l += math.exp(x - m)
        m_key.append(m)
        l_key.append(l)
    # Block by block, Bc keys at a time: 05_flash_v2/flash_v2.cu, the online softmax of
    # flash_v2_kernel: m_new = max(m_i, rowmax(S_ij)); alpha = exp(m_i - m_new); l_i = alpha l_i + sum P_ij.
    m, l = -math.inf, 0.0
    m_blk, l_blk, alphas = [], [], []
    for j in range(n // Bc):
        blk = s[j * Bc:(j + 1) * Bc]
        m_new = max(m, blk.max())
        alpha = math.exp(m - m_new)
        l = alpha * l + np.exp(blk - m_new).sum()
        m = m_new
        m_blk.append(m)
        l_blk.append(l)
        alphas.append(alpha)
    ends = np.arange(1, n // Bc + 1) * Bc - 0.5  # the x position after each block's last key

    fig, (ax0, ax1) = plt.subplots(2, 1, figsize=(8, 5.4), sharex=True, gridspec_kw={"hspace": 0.12})
    keys = np.arange(n)
    ax0.scatter(keys, s, s=8, color=GREY, label="score $s_j$", zorder=2)
    ax0.step(keys, m_key, where="post", color=BLUE, linewidth=1.2, alpha=0.6, label="$m$ key by key (03)")
    ax0.plot(ends, m_blk, "o", color=BLUE, label="$m_i$ after each key block (05)", zorder=3)
    ax1.step(keys, l_key, where="post", color=GREEN, linewidth=1.0, alpha=0.6, label="$l$ key by key (03)")
    ax1.plot(ends, l_blk, "o", color=GREEN, label="$l_i$ after each key block (05)", zorder=3)
    for j, (e, a) in enumerate(zip(ends, alphas)):
        if 0 < a < 1:  # block 0 has alpha = exp(-inf) = 0: nothing to rescale yet
            for ax in (ax0, ax1):
                ax.axvline(e, color=RED, linewidth=0.8, linestyle="--", zorder=1)
            ax1.text(e - 0.8, 0.6, f"$\\alpha$={a:.2f}", ha="right", va="bottom", fontsize=9, color=RED)
            ax0.annotate(f"+{m_blk[j] - m_blk[j - 1]:.2f}", (e, m_blk[j]), xytext=(-5, 4),
                         textcoords="offset points", ha="right", va="bottom", fontsize=9, color=RED)
    for k in range(0, n + 1, Bc):
        for ax in (ax0, ax1):
            ax.axvline(k - 0.5, color="#DDDDDD", linewidth=0.6, zorder=0)
    ax0.set_ylim(top=max(m_blk) + 0.7)  # room for the labels above the last growth
    ax0.set_ylabel("score / running max")
    ax1.set_ylabel("running sum")
    ax1.set_xlabel(f"key j  (grey lines: key blocks of Bc = {Bc}; red dashes: blocks where "
                   "$\\alpha = e^{m_{old} - m_{new}} < 1$ rescales $l_i$, $O_i$)")
    ax0.legend(frameon=False, loc="lower right", ncol=3, fontsize=8)
    ax1.legend(frameon=False, loc="upper left", fontsize=8)
    ax0.set_title("Online softmax of one row (seeded N(0,1) scores): the max grows, the sum is rescaled")
    ax1.set_xlim(-1, n)
    save(fig, "03_online_softmax_rescale.png")


# ------------------------------------------------------------------------------------------------
# 4. 04 vs 05: the order in which (query tile i, key tile j) pairs are visited.

def fig_04_05_loop_order():
    Tr, Tc = 4, 4
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(9, 4.6))
    # 04_flash_v1/flash_v1.cu: one block per (b, h); for j in 0..Tc-1 (outer), for i in 0..Tr-1 (inner).
    grid_axes(ax0, Tr, Tc, "key tile j", "query tile i")
    for j in range(Tc):
        for i in range(Tr):
            cell(ax0, i, j, plt.cm.Blues(0.25 + 0.55 * j / (Tc - 1)), str(j * Tr + i + 1), fontsize=12,
                 textcolor="white" if j >= 2 else "black", edge="white", lw=2)
    for j in range(Tc):
        ax0.annotate("", (j + 0.15, Tr - 0.08), (j + 0.15, 0.08),
                     arrowprops=dict(arrowstyle="->", color="black", lw=0.8, alpha=0.5))
    ax0.set_title("04 (FlashAttention-1): j outer, i inner\none block, 16 steps in a row")
    ax0.text(Tc / 2, Tr + 0.8, "each step loads and stores O_i, l_i, m_i in HBM", ha="center", fontsize=9,
             color=RED)
    # 05_flash_v2/flash_v2.cu: the grid has a block per query tile i; each walks j = 0..Tc-1 alone.
    grid_axes(ax1, Tr, Tc, "key tile j", "query tile i = block of the grid")
    colors = [BLUE, ORANGE, GREEN, PURPLE]
    for i in range(Tr):
        for j in range(Tc):
            cell(ax1, i, j, colors[i], str(j + 1), fontsize=12, textcolor="white", edge="white", lw=2)
        ax1.annotate("", (Tc - 0.08, i + 0.18), (0.08, i + 0.18),
                     arrowprops=dict(arrowstyle="->", color="black", lw=0.8, alpha=0.5))
    ax1.set_title("05 (FlashAttention-2): i in the grid, j inner\n4 blocks at once, 4 steps each")
    ax1.text(Tc / 2, Tr + 0.8, "O_i, l_i, m_i stay in registers; O_i stored once", ha="center",
             fontsize=9, color=GREEN)
    fig.tight_layout()
    save(fig, "04_05_loop_order.png")


# ------------------------------------------------------------------------------------------------
# 5. 05: which (i_tile, j_tile) pairs a causal forward skips, masks, or computes in full.

def fig_05_causal_tiles():
    Br = Bc = 64  # 05_flash_v2/flash_v2.cu: Traits<64>: Br = 16 * kWarps = 64, Bc = 64 (kD <= 64)
    fig, axes = plt.subplots(1, 2, figsize=(10, 5.2), gridspec_kw={"width_ratios": [16, 11]})
    colors = {"skipped": "#EEEEEE", "masked": ORANGE, "full": BLUE}
    for ax, (Sq, Sk) in zip(axes, [(1000, 1000), (300, 700)]):
        Tr, Tc = ceil_div(Sq, Br), ceil_div(Sk, Bc)
        grid_axes(ax, Tr, Tc, f"key tile j_tile (Bc = {Bc})", f"query tile i_tile (Br = {Br})",
                  major=1 if Tc <= 12 else 2)
        counts = dict.fromkeys(colors, 0)
        for i in range(Tr):
            end = key_tile_end(i, Br, Bc, Sq, Sk, True)
            for j in range(Tc):
                kind = "skipped" if j >= end else "masked" if needs_mask(i, j, Br, Bc, Sq, Sk, True) else "full"
                counts[kind] += 1
                cell(ax, i, j, colors[kind], edge="white", lw=1.2)
        # The causal boundary in tile units: key j = i + Sk - Sq (common/host/problem.h: causal_visible).
        rows = np.array([0, Sq])
        ax.plot((rows + Sk - Sq) / Bc, rows / Br, color="black", linewidth=1.2)
        ax.plot([Sk / Bc] * 2, [0, Tr], color="black", linewidth=0.8, linestyle=":")  # the end of the keys
        ax.set_title(f"Sq = {Sq}, Sk = {Sk}: " + ", ".join(f"{v} {k}" for k, v in counts.items()), fontsize=10)
    handles = [Patch(facecolor=c, edgecolor=GREY, label=k) for k, c in colors.items()]
    handles.append(plt.Line2D([], [], color="black", label="last visible key j = i + Sk - Sq"))
    handles.append(plt.Line2D([], [], color="black", linestyle=":", label="key Sk (end of the keys)"))
    fig.legend(handles=handles, loc="lower center", ncol=5, frameon=False, bbox_to_anchor=(0.5, -0.02))
    fig.suptitle("Causal tile map: key_tile_end skips, needs_mask masks (common/device/tiles.h)")
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    save(fig, "05_causal_tiles.png")


# ------------------------------------------------------------------------------------------------
# 6. 06: the m16n8k16 fragments, and the XOR swizzle that makes ldmatrix conflict free.

def fig_06_fragments_swizzle():
    fig = plt.figure(figsize=(10, 10.2))
    gs = fig.add_gridspec(2, 2, width_ratios=[16, 10], height_ratios=[16, 9.5], hspace=0.36, wspace=0.15)
    reg_colors = [BLUE, ORANGE, GREEN, PURPLE]

    # Panel A: the fragment layouts of common/device/mma.cuh's header (PTX ISA), g = lane / 4, t = lane % 4.
    axA = fig.add_subplot(gs[0, 0])
    grid_axes(axA, 16, 16, "column k", "row m")
    for lane in range(32):
        g, t = lane // 4, lane % 4
        #   a0: (g, 2t..2t+1)  a1: (g+8, 2t..2t+1)  a2: (g, 2t+8..2t+9)  a3: (g+8, 2t+8..2t+9)
        for reg, (r, c) in enumerate([(g, 2 * t), (g + 8, 2 * t), (g, 2 * t + 8), (g + 8, 2 * t + 8)]):
            for e in range(2):
                cell(axA, r, c + e, reg_colors[reg], str(lane), fontsize=8, textcolor="white")
    axA.set_title("A fragment (16 x 16): lane holding each element")
    axC = fig.add_subplot(gs[0, 1])
    grid_axes(axC, 16, 8, "column n", "row m")
    for lane in range(32):
        g, t = lane // 4, lane % 4
        #   c0, c1: (g, 2t), (g, 2t+1)    c2, c3: (g+8, 2t), (g+8, 2t+1)
        for reg, (r, c) in enumerate([(g, 2 * t), (g, 2 * t + 1), (g + 8, 2 * t), (g + 8, 2 * t + 1)]):
            cell(axC, r, c, reg_colors[reg], str(lane), fontsize=8, textcolor="white")
    axC.set_title("C fragment (16 x 8, fp32)")
    axA.legend(handles=[Patch(color=reg_colors[k], label=f"a{k}") for k in range(4)], ncol=4, frameon=False,
               loc="upper center", bbox_to_anchor=(0.5, -0.07))
    axC.legend(handles=[Patch(color=reg_colors[k], label=f"c{k}") for k in range(4)], ncol=4, frameon=False,
               loc="upper center", bbox_to_anchor=(0.5, -0.07), columnspacing=0.8)

    # Panel B: a (rows, 64) fp16 tile, 128-byte rows, read by ldmatrix at one column: 8 rows' chunks.
    cols = 64
    read_col = 0  # ldmatrix reads columns 0..7 (chunk 0) of rows 0..7
    for n, swizzled in enumerate([False, True]):
        ax = fig.add_subplot(gs[1, n])
        grid_axes(ax, 8, 8, "bank group (16-byte position in the 128-byte line)", "tile row")
        for r in range(8):
            for c in range(cols // kChunkElems):  # logical chunk c of row r
                grp = bank_group(tile_offset(r, c * kChunkElems, cols, swizzled))
                hit = c == read_col // kChunkElems
                cell(ax, r, grp, RED if hit else "#F2F2F2", str(c), fontsize=9,
                     textcolor="white" if hit else "#777777", edge="white", lw=1.5)
        hits = {bank_group(tile_offset(r, read_col, cols, swizzled)) for r in range(8)}
        name = "swizzled: chunk ^ (row % 8)" if swizzled else "row-major"
        ax.set_title(f"{name}\nldmatrix, rows 0-7 of chunk 0: {len(hits)} bank group"
                     + ("s" if len(hits) > 1 else "") + (" (no conflict)" if len(hits) == 8 else " (8-way conflict)"),
                     fontsize=10)
    fig.text(0.5, 0.035, "A (rows, 64) fp16 tile in shared memory, 8 chunks of 16 bytes per row; number = logical "
             "chunk, red = the chunks one ldmatrix phase reads", ha="center", fontsize=9)
    fig.suptitle("mma.m16n8k16 fragments (common/device/mma.cuh) and the XOR swizzle "
                 "(common/device/swizzle.h)", y=0.95)
    save(fig, "06_fragments_swizzle.png")


def panel_offset(row, col, panel_rows):
    """common/device/swizzle.h: ldsm_panel_address, per element. The copy engine's 128-byte swizzle
    writes a box of 64 columns as one panel of 64-column rows; panel p (columns 64p .. 64p + 63)
    starts 64 * panel_rows elements after panel p - 1. Element offset of (row, col)."""
    return col // 64 * (64 * panel_rows) + tile_offset(row, col % 64, 64, True)


def fig_06_tma_panels():
    # K_j at D = 128 (16 chunks of 16 bytes a row), rows 0-7 of its Bc = 64: where each logical chunk
    # lands, as copy_tile writes it (128-column swizzled rows) and as the copy engine does (two panels).
    D, Bc, rows = 128, 64, 8
    chunks = D // kChunkElems
    colors = [BLUE if c < 8 else ORANGE for c in range(chunks)]
    fig = plt.figure(figsize=(10, 6.4))
    gs = fig.add_gridspec(2, 2, height_ratios=[1, 1], hspace=0.85, wspace=0.12)

    ax = fig.add_subplot(gs[0, :])
    grid_axes(ax, rows, chunks, "16-byte slot in the 256-byte row", "row of K_j")
    for r in range(rows):
        for c in range(chunks):
            slot = tile_offset(r, c * kChunkElems, D, True) % D // kChunkElems
            cell(ax, r, slot, colors[c], str(c), fontsize=8, textcolor="white")
    ax.set_title("cp.async (copy_tile): 256-byte rows, chunk ^ (row % 8); 16 cp.async a thread and tile\n"
                 "each 128-byte half holds its chunks in the same slots as the copy engine's panel below", fontsize=10)

    for p in range(2):
        ax = fig.add_subplot(gs[1, p])
        grid_axes(ax, rows, 8, "16-byte slot in the 128-byte row", "row of K_j" if p == 0 else "")
        for r in range(rows):
            for c in range(8 * p, 8 * p + 8):
                off = panel_offset(r, c * kChunkElems, Bc) - p * 64 * Bc
                assert off // 64 == r  # a panel row is 64 columns, 128 bytes
                cell(ax, r, off % 64 // kChunkElems, colors[c], str(c), fontsize=8, textcolor="white")
        start = "at byte 0 of the stage" if p == 0 else f"Bc x 128 = {Bc * 128} bytes after panel 0"
        ax.set_title(f"copy engine (TMA), panel {p}: columns {64 * p}-{64 * p + 63}\n{start}", fontsize=10)
    fig.text(0.5, -0.04, "number = logical 16-byte chunk of the row (8 bf16 / fp16 elements). With the copy engine "
             "one thread issues 4 loads a tile (K and V, 2 panels each) onto the stage's mbarrier;\n"
             "ldmatrix then reads panel c0 / 64 at ldsm_address(lane, r0, c0 % 64, 64) "
             "(ldsm_panel_address, common/device/swizzle.h)", ha="center", fontsize=8.5)
    fig.suptitle("06 on sm_90: K_j and V_j as the copy engine writes them (D = 128, rows 0-7 of Bc = 64)", y=0.99)
    save(fig, "06_tma_panels.png")


# ------------------------------------------------------------------------------------------------
# 7. 07: a random block mask, its CSR arrays, and one query block's walk.

def fig_07_block_mask():
    # The mask make_mask (07_block_sparse/block_mask.cpp) builds for B = H = 1, Sq = 1024, Sk = 768,
    # block_k = 64 (Tq = 1024 / kBlockQ = 8, Tk = 12) and HeadPattern{random, density 0.4, seed 7}.
    Tq, Tk, density, seed, walk = 8, 12, 0.4, 7, 5
    rows = [random_pattern_row(density, seed, 0, 0, 1, Tq, qb, Tk) for qb in range(Tq)]
    row_offsets, col_indices = csr_from_rows(rows)
    fig = plt.figure(figsize=(9, 7.4))
    gs = fig.add_gridspec(2, 1, height_ratios=[8, 4.2], hspace=0.32)

    ax = fig.add_subplot(gs[0])
    grid_axes(ax, Tq, Tk, "key block kb", "query block qb")
    for qb in range(Tq):
        for kb in range(Tk):
            on = kb in rows[qb]
            color = (ORANGE if qb == walk else BLUE) if on else "#EEEEEE"
            text = str(rows[qb].index(kb) + 1) if on and qb == walk else None
            cell(ax, qb, kb, color, text, fontsize=11, textcolor="white", edge="white", lw=1.5)
    ax.add_patch(Rectangle((0, walk), Tk, 1, fill=False, edgecolor="black", linewidth=1.5))
    ax.set_title(f"Random block mask, density {density} (seed {seed}): "
                 f"{len(col_indices)} of {Tq * Tk} blocks; query block {walk} visits its key blocks in order 1..{len(rows[walk])}",
                 fontsize=10)

    # The arrays, as boxes.
    axa = fig.add_subplot(gs[1])
    axa.axis("off")
    per_line = 20
    n_lines = ceil_div(len(col_indices), per_line)
    axa.set_xlim(-3.2, per_line + 0.2)
    axa.set_ylim(2.6 + 1.5 * n_lines, -0.6)

    def boxes(y, values, highlight, label):
        axa.text(-0.2, y + 0.5, label, ha="right", va="center", fontsize=10, family="monospace")
        for k, v in enumerate(values):
            x = k % per_line
            yy = y + 1.5 * (k // per_line)
            axa.add_patch(Rectangle((x, yy), 1, 1, facecolor=ORANGE if k in highlight else "white",
                                    edgecolor="black", linewidth=0.7))
            axa.text(x + 0.5, yy + 0.5, str(v), ha="center", va="center", fontsize=9)
            axa.text(x + 0.5, yy - 0.15, str(k), ha="center", va="bottom", fontsize=6.5, color="#888888")

    lo, hi = row_offsets[walk], row_offsets[walk + 1]
    boxes(0, row_offsets, {walk, walk + 1}, "row_offsets")
    boxes(2, col_indices, set(range(lo, hi)), "col_indices")
    axa.text(per_line / 2, 2.3 + 1.5 * n_lines,
             f"query block {walk}: col_indices[row_offsets[{walk}] .. row_offsets[{walk + 1}]) = "
             f"col_indices[{lo} .. {hi}) = {rows[walk]}", ha="center", fontsize=10)
    save(fig, "07_block_mask_csr.png")


# ------------------------------------------------------------------------------------------------
# 8. 08: the backward's data flow for one key tile.

def fig_08_backward():
    # The loop of 08_backward/backward.cu (backward_kernel) and 08_backward/README.md's Algorithm.
    fig, ax = plt.subplots(figsize=(10, 7.0))
    ax.set_xlim(0, 22)
    ax.set_ylim(0, 15)
    ax.axis("off")

    def box(x, y, w, h, text, color, fontsize=9.5, weight="normal", alpha=1.0, tag=None):
        ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.08", facecolor=color,
                                    edgecolor="black", linewidth=0.8, alpha=alpha))
        if tag is None:
            ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=fontsize, weight=weight)
        else:  # an operation on the left, what it is on the right
            ax.text(x + 0.3, y + h / 2, text, ha="left", va="center", fontsize=fontsize)
            ax.text(x + w - 0.3, y + h / 2, tag, ha="right", va="center", fontsize=fontsize - 0.5, style="italic")

    def arrow(p, q, color="black", rad=0.0):
        ax.add_patch(FancyArrowPatch(p, q, arrowstyle="-|>", mutation_scale=12, color=color, linewidth=1.1,
                                     connectionstyle=f"arc3,rad={rad}", shrinkA=2, shrinkB=2))

    # Global memory: inputs on the left, outputs on the right.
    ax.text(2.3, 14.5, "global memory", ha="center", fontsize=10, weight="bold")
    ax.text(19.7, 14.5, "global memory", ha="center", fontsize=10, weight="bold")
    box(0.2, 12.2, 4.2, 1.1, "K_j, V_j", ORANGE)
    box(0.2, 8.9, 4.2, 1.6, "Q_i, dO_i\n(every query tile i)", ORANGE)
    box(0.2, 6.4, 4.2, 1.6, "LSE_i\n(saved by the forward)", ORANGE)
    box(0.2, 3.9, 4.2, 1.6, "D_i = rowsum(dO_i ∘ O_i)\n(preprocessing kernel)", ORANGE, fontsize=8.5)
    box(17.6, 8.3, 4.2, 2.2, "dQ (fp32)\natomicAdd, or key tiles\nin turn order\n(deterministic mode)", RED,
        fontsize=9, alpha=0.8)
    box(17.6, 1.0, 4.2, 1.3, "dK_j, dV_j\nwritten once", GREEN, alpha=0.8)

    # The block.
    ax.add_patch(FancyBboxPatch((5.0, 0.5), 11.8, 13.6, boxstyle="round,pad=0.1", facecolor="#F7F7F7",
                                edgecolor="black", linewidth=1.0))
    ax.text(10.9, 13.65, "one block per key tile j (and batch, KV head)", ha="center", fontsize=10.5,
            weight="bold")
    box(5.5, 11.95, 10.8, 1.25, "load K_j, V_j once  →  shared memory\ndK_j = dV_j = 0  (registers)", SKY,
        alpha=0.7)
    ax.add_patch(FancyBboxPatch((5.4, 3.2), 11.0, 8.4, boxstyle="round,pad=0.1", facecolor="white",
                                edgecolor=GREY, linewidth=1.0, linestyle="--"))
    ax.text(10.9, 11.2, "for each query tile i ≥ query_tile_begin(j):  load Q_i, dO_i",
            ha="center", fontsize=9.5, style="italic")
    steps = [  # (operation, where it lives, colour)
        ("S = scale · Q_i K_jᵀ", "recomputed", SKY),
        ("P = exp(S − LSE_i)", "recomputed: no max, no sum", SKY),
        ("dV_j += Pᵀ dO_i", "registers", GREEN),
        ("dP = dO_i V_jᵀ", "per tile", SKY),
        ("dS = P ∘ (dP − D_i)", "per tile", SKY),
        ("dK_j += scale · dSᵀ Q_i", "registers", GREEN),
        ("dQ_i += scale · dS K_j", "global fp32", RED),
    ]
    y0, dy = 9.6, 1.0
    ys = []
    for n, (text, tag, color) in enumerate(steps):
        y = y0 - n * dy
        ys.append(y + 0.4)
        box(5.8, y, 10.2, 0.8, text, color, fontsize=9.5, alpha=0.5, tag=tag)
    box(5.5, 1.0, 10.8, 1.3, "after the last query tile:  store dK_j, dV_j", GREEN, alpha=0.5)

    # Arrows: inputs to the steps that first use them, outputs from the steps that make them.
    arrow((4.4, 12.75), (5.5, 12.6))               # K_j, V_j -> the load
    arrow((4.4, 9.9), (5.8, ys[0]))                # Q_i -> S
    arrow((4.4, 9.5), (5.8, ys[2]), rad=0.15)      # dO_i -> dV_j
    arrow((4.4, 7.2), (5.8, ys[1]))                # LSE_i -> P
    arrow((4.4, 4.7), (5.8, ys[4]))                # D_i -> dS
    arrow((16.0, ys[6]), (17.6, 8.9), color=RED)   # dQ_i -> global
    arrow((16.3, 1.65), (17.6, 1.65), color=GREEN) # dK_j, dV_j -> global
    ax.legend(handles=[Patch(facecolor=SKY, alpha=0.6, label="recomputed per tile"),
                       Patch(facecolor=GREEN, alpha=0.6, label="accumulated in registers"),
                       Patch(facecolor=RED, alpha=0.5, label="accumulated in global memory"),
                       Patch(facecolor=ORANGE, label="read from global memory")],
              loc="lower center", bbox_to_anchor=(0.5, -0.06), ncol=4, frameon=False)
    ax.set_title("The backward pass for one key tile: what it recomputes, and where it accumulates",
                 fontsize=11)
    save(fig, "08_backward_dataflow.png")


# ------------------------------------------------------------------------------------------------
# 9. 09: FlashAttention-3's forward: the producer / consumer pipeline, and the ping-pong schedule.

def fig_09_flash_v3():
    # 09_flash_v3/config.cuh: WsConfig (384 threads, Br = Bc = 128, setmaxnreg 24 / 240, Q in
    # kQSlots = 2 slots when persistent), produce, consume (turns on named barriers 1 + g), and
    # flash_v3_kernel (the mbarriers: full = 1 arrival + the bytes, empty = kConsumerWarps = 8).
    fig = plt.figure(figsize=(12, 9.4))
    gs = fig.add_gridspec(2, 1, height_ratios=[12.8, 5.5], hspace=0.06)
    ax = fig.add_subplot(gs[0])
    axb = fig.add_subplot(gs[1])

    def box(a, x, y, w, h, text, color, fontsize=9, weight="normal", alpha=1.0, edge="black"):
        a.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.08", facecolor=color, edgecolor=edge,
                                   linewidth=0.8, alpha=alpha))
        a.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=fontsize, weight=weight)

    def arrow(a, p, q, color="black", rad=0.0, lw=1.1, scale=12):
        a.add_patch(FancyArrowPatch(p, q, arrowstyle="-|>", mutation_scale=scale, color=color, linewidth=lw,
                                    connectionstyle=f"arc3,rad={rad}", shrinkA=1, shrinkB=1))

    def elbow(a, points, color="black", lw=1.1, ls="-"):
        """An arrow along straight segments through `points`, its head at the last one."""
        a.add_patch(FancyArrowPatch(path=Path(points), arrowstyle="-|>", mutation_scale=12, color=color,
                                    linewidth=lw, linestyle=ls, shrinkA=0, shrinkB=1))

    # ---- (a) the pipeline: global -> TMA -> shared memory -> consumers -> global.
    ax.set_xlim(0, 26)
    ax.set_ylim(0, 12.8)
    ax.axis("off")
    ax.set_title("(a) Producer / consumer pipeline (warp specialization)", fontsize=11, loc="left")
    ax.text(1.2, 9.05, "global\nmemory", ha="center", va="bottom", fontsize=10, weight="bold")
    for n, name in enumerate(["Q", "K", "V"]):
        box(ax, 0.2, 7.6 - 1.5 * n, 2.0, 1.0, name, ORANGE, fontsize=10)
    ax.text(25.0, 3.05, "global\nmemory", ha="center", va="bottom", fontsize=10, weight="bold")
    box(ax, 24.2, 1.95, 1.6, 0.8, "O", ORANGE, fontsize=10)
    box(ax, 24.2, 0.75, 1.6, 0.8, "LSE", ORANGE, fontsize=10)

    # The SM: its TMA unit and the block's three warpgroups.
    ax.add_patch(FancyBboxPatch((2.6, 0.15), 21.2, 12.35, boxstyle="round,pad=0.1", facecolor="#F7F7F7",
                                edgecolor="black", linewidth=1.0))
    ax.text(13.2, 12.08, "one SM: one thread block of 384 threads = 3 warpgroups", ha="center", fontsize=10.5,
            weight="bold")
    box(ax, 2.9, 4.4, 2.7, 4.5, "TMA\ncopy engine\n\ncopies whole\ntiles, counts\nthe bytes that\nland on an\nmbarrier",
        GREY, fontsize=8.5, alpha=0.8)
    for n in range(3):
        arrow(ax, (2.2, 8.1 - 1.5 * n), (2.9, 8.1 - 1.5 * n))
    box(ax, 6.4, 10.05, 11.9, 1.35, "warpgroup 0: producer (128 threads)\nsetmaxnreg.dec → 24 registers a thread\n"
        "one thread issues every TMA copy; the other 127 exit", YELLOW, fontsize=9, alpha=0.55)
    elbow(ax, [(6.4, 10.7), (4.25, 10.7), (4.25, 9.0)])
    ax.text(4.35, 9.75, "issues\ncopies", ha="left", va="center", fontsize=8)

    # Shared memory: two Q slots and the K/V ring.
    ax.add_patch(FancyBboxPatch((6.4, 4.15), 11.9, 5.4, boxstyle="round,pad=0.08", facecolor=SKY, alpha=0.15,
                                edgecolor="black", linewidth=0.8))
    ax.text(6.55, 9.25, "shared memory", ha="left", va="center", fontsize=10, weight="bold")
    arrow(ax, (5.6, 6.65), (6.4, 6.65), lw=2.2, scale=16)
    box(ax, 6.7, 6.75, 2.7, 1.9, "Q[0]\nQ_i (128 × D)", SKY, fontsize=8.5, alpha=0.8)
    box(ax, 6.7, 4.45, 2.7, 1.9, "Q[1]\nnext tile's Q_i:\nloads under\nthis one", SKY, fontsize=8.5, alpha=0.4)
    for s in range(2):  # stage s of the ring; K/V tile n goes to stage n % kStages
        x0 = 9.85 + 4.2 * s
        ax.add_patch(FancyBboxPatch((x0, 4.35), 3.9, 4.65, boxstyle="round,pad=0.05", facecolor="white",
                                    edgecolor=GREY, linewidth=1.0, linestyle="--"))
        ax.text(x0 + 0.5, 8.6, f"stage {s}", ha="left", va="center", fontsize=9.5, weight="bold")
        j = "j" if s == 0 else "{j+1}"
        box(ax, x0 + 0.5, 6.7, 2.9, 1.35, f"K_{j}\n128 × D\n128-byte swizzle", SKY, fontsize=8.5, alpha=0.8)
        box(ax, x0 + 0.5, 5.15, 2.9, 1.35, f"V_{j}\n128 × D\n128-byte swizzle", SKY, fontsize=8.5, alpha=0.8)
        box(ax, x0 + 2.3, 8.35, 1.1, 0.45, "full", PURPLE, fontsize=8.5, alpha=0.8)
        box(ax, x0 + 0.5, 4.5, 1.1, 0.45, "empty", "white", fontsize=8.5, edge=PURPLE)
        arrow(ax, (x0 + 2.85, 10.05), (x0 + 2.85, 8.85), color=PURPLE)                       # producer -> full
        elbow(ax, [(x0 + 3.48, 8.575), (x0 + 3.7, 8.575), (x0 + 3.7, 3.55)], color=PURPLE, ls="--")  # full -> consumers
        arrow(ax, (x0 + 1.05, 3.55), (x0 + 1.05, 4.4), color=PURPLE)                          # consumers -> empty
        elbow(ax, [(x0 + 0.42, 4.725), (x0 + 0.2, 4.725), (x0 + 0.2, 10.0)], color=PURPLE, ls="--")  # empty -> producer
    ax.text(18.6, 9.2, "a ring of kStages stages\n(2 at D = 128, the chapter's\nkernel; 4 at D = 64 in the steps);\nK/V tile n → stage n % kStages",
            ha="left", va="top", fontsize=8.2)
    ax.text(18.6, 7.6, "two mbarriers a stage:", ha="left", va="top", fontsize=8.2, weight="bold")
    ax.text(18.6, 7.15, "full: the producer arms it\n(expect_tx); the TMA's bytes\ncomplete it; consumers wait\n"
            "empty: the 8 consumer warps\neach arrive after reading;\nthe producer waits, then refills",
            ha="left", va="top", fontsize=8.2, linespacing=1.25)
    ax.text(18.6, 4.3, "solid: arrive   dashed: wait", ha="left", va="bottom", fontsize=8.2, color=PURPLE)

    # The consumers, and the epilogue.
    ax.add_patch(FancyBboxPatch((2.9, 0.35), 20.4, 3.2, boxstyle="round,pad=0.05", facecolor="white",
                                edgecolor=GREY, linewidth=1.0, linestyle="--"))
    ax.text(3.05, 3.2, "warpgroups 1 and 2: consumers (256 threads), setmaxnreg.inc → 240 registers a thread",
            ha="left", va="center", fontsize=9, weight="bold")
    box(ax, 3.1, 1.65, 3.3, 1.0, "WG1: rows 0-63\nof Q_i", GREEN, fontsize=8.5, alpha=0.25)
    box(ax, 3.1, 0.5, 3.3, 1.0, "WG2: rows 64-127\nof Q_i", GREEN, fontsize=8.5, alpha=0.25)
    ax.text(7.0, 2.8, "each, per key tile j:", ha="left", va="center", fontsize=8.5, style="italic")
    steps = [(7.0, "S = Q K_jᵀ\nwgmma SS\n(smem × smem)", BLUE),
             (11.4, "softmax\nin registers (exp2,\nrow max, row sum)", GREEN),
             (15.8, "O += P V_j\nwgmma RS\n(P from registers)", BLUE)]
    for x, text, color in steps:
        box(ax, x, 1.0, 3.6, 1.45, text, color, fontsize=8.5, alpha=0.35)
    arrow(ax, (10.68, 1.72), (11.32, 1.72))
    arrow(ax, (15.08, 1.72), (15.72, 1.72))
    arrow(ax, (17.6, 0.92), (8.8, 0.92), rad=-0.1)
    ax.text(13.2, 0.78, "next key tile j", ha="center", va="center", fontsize=8, style="italic")
    box(ax, 20.3, 1.0, 2.45, 1.45, "epilogue:\nnormalize O,\nstore O, LSE", GREEN, fontsize=8.5, alpha=0.25)
    arrow(ax, (19.48, 1.72), (20.22, 1.72))
    arrow(ax, (22.83, 2.0), (24.2, 2.35))
    arrow(ax, (22.83, 1.6), (24.2, 1.15))

    # ---- (b) the ping-pong: each consumer's GEMMs, then its softmax while the other's GEMMs run.
    T, iters = 2.2, 4  # one GEMM turn and one softmax take about as long
    axb.set_xlim(-3.4, 23.6)
    axb.set_ylim(-0.5, 5.0)
    axb.axis("off")
    axb.set_title("(b) Ping-pong schedule (two consumer warpgroups, named barriers)", fontsize=11, loc="left")
    rows = {"consumer WG1": 3.3, "consumer WG2": 2.2, "tensor cores": 0.75}
    for name, y in rows.items():
        axb.text(-0.25, y + 0.4, name, ha="right", va="center", fontsize=9.5, weight="bold")

    def block(y, t0, text, color, textcolor="white", **kw):
        axb.add_patch(Rectangle((t0 + 0.03, y), T - 0.06, 0.8, facecolor=color, edgecolor="white", linewidth=0.8,
                                **kw))
        axb.text(t0 + T / 2, y + 0.4, text, ha="center", va="center", fontsize=8, color=textcolor)

    gemm, soft = "S = QKᵀ\nO += PV", "softmax"
    for k in range(iters):
        block(rows["consumer WG1"], 2 * k * T, gemm, BLUE)
        block(rows["consumer WG1"], (2 * k + 1) * T, soft, GREEN)
        block(rows["consumer WG2"], (2 * k + 1) * T, gemm, SKY, textcolor="black")
        block(rows["consumer WG2"], (2 * k + 2) * T, soft, GREEN)
        block(rows["tensor cores"], 2 * k * T, "WG1", BLUE)
        block(rows["tensor cores"], (2 * k + 1) * T, "WG2", SKY, textcolor="black")
    block(rows["consumer WG2"], 0, "waits\nits turn", "white", textcolor="#555555", hatch="///")
    axb.add_patch(Rectangle((0.03, rows["consumer WG2"]), T - 0.06, 0.8, fill=False, edgecolor=GREY, linewidth=0.8))
    for k in range(1, 2 * iters + 1):  # the hand-offs: a turn ends with bar.arrive, the next starts at bar.sync
        axb.plot([k * T, k * T], [rows["consumer WG2"] - 0.12, rows["consumer WG1"] + 0.92], color="black",
                 linewidth=1.2)
    axb.annotate("hand-offs: bar.sync / bar.arrive (named barriers 1, 2)", (2 * T, rows["consumer WG1"] + 0.92),
                 xytext=(2 * T + 0.3, 4.65), ha="left", va="center", fontsize=8.5,
                 arrowprops=dict(arrowstyle="-", color="black", lw=0.7))
    axb.text(2 * iters * T + 0.4, rows["tensor cores"] + 0.4, "one warpgroup's softmax runs\nunder the other's GEMMs",
             ha="left", va="center", fontsize=9.5, style="italic", color=BLUE)
    arrow(axb, (0, 0.2), (2 * (iters + 1) * T + 0.4, 0.2), lw=0.9)
    axb.text(2 * (iters + 1) * T + 0.5, 0.2, "time", ha="left", va="center", fontsize=9)
    axb.legend(handles=[Patch(facecolor=BLUE, label="WG1's GEMMs (wgmma: tensor cores)"),
                        Patch(facecolor=SKY, label="WG2's GEMMs"),
                        Patch(facecolor=GREEN, label="softmax: exp2, row max / sum (CUDA cores)")],
               loc="lower center", bbox_to_anchor=(0.5, -0.1), ncol=3, frameon=False)
    save(fig, "09_flash_v3_pipeline.png")


# ------------------------------------------------------------------------------------------------
# 10. 10_decoding: GQA packing, split-KV over one wave of CTAs, and the combine by LSE.

def fig_10_decoding():
    # The README's case: batch 1, H = 32 query heads on Hkv = 8 KV heads (G = 4), seqlen_q = 1,
    # seqlen_k = 16384, D = 128, 132 SMs. 10_decoding/launch.cuh: key_warps and plan_for (Bc = 64,
    # Br = 16 when the packed rows fit one warp, else 64; one CTA an SM); decoding.cuh: WarpShare,
    # split_kv_kernel (kStages = 3), merge_key_warps and combine_kernel (one warp per output row).
    B, H, Hkv, Sq, Sk, D, sms, Bc, kStages = 1, 32, 8, 1, 16384, 128, 132, 64, 3
    G = H // Hkv
    rows = G * Sq  # packed_rows
    key_warps = 4 if rows <= 16 else 1  # launch.cuh: key_warps
    Br = 64 // key_warps
    tiles = B * Hkv * ceil_div(rows, Br)
    key_tiles = ceil_div(Sk, Bc)
    splits, per_split = plan_splits(tiles, key_tiles, sms)  # 16 pieces of 16 key tiles
    keys = per_split * Bc
    head_colors = [BLUE, ORANGE, GREEN, PURPLE]

    fig, ax = plt.subplots(figsize=(13, 5.2))
    ax.set_xlim(0, 28)
    ax.set_ylim(0.4, 10.8)
    ax.axis("off")

    def box(x, y, w, h, text, color, fontsize=8.5, alpha=1.0, edge="black", textcolor="black"):
        ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.05", facecolor=color, edgecolor=edge,
                                    linewidth=0.8, alpha=alpha))
        if text:
            ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=fontsize, color=textcolor)

    def arrow(p, q, color="black", rad=0.0, lw=1.1, scale=12):
        ax.add_patch(FancyArrowPatch(p, q, arrowstyle="-|>", mutation_scale=scale, color=color, linewidth=lw,
                                     connectionstyle=f"arc3,rad={rad}", shrinkA=1, shrinkB=1))

    ax.set_title(f"Decoding, batch {B}: {H} query heads on {Hkv} KV heads (G = {G}), {Sq} query token, "
                 f"seqlen_k = {Sk}, D = {D}, {sms} SMs", fontsize=11)

    # ---- (a) GQA packing: the G heads of one KV head's group as the packed rows of one 64-row tile.
    ax.text(0.1, 10.2, "(a) GQA packing", ha="left", va="center", fontsize=11)
    rh_total = 4.16  # the tile's height on the page, whatever its rows
    ax.text(0.1, 9.55, f"one KV head's group:\n{G} query heads x {Sq} position",
            ha="left", va="center", fontsize=8.5)
    zx, zy, zw, zh = 0.2, 7.15, 5.2, 0.42  # the real rows 0 .. G Sq - 1, enlarged
    for r in range(rows):
        g, i = packed_row(r, Sq)
        y = zy + (rows - 1 - r) * zh
        ax.add_patch(Rectangle((zx, y), zw, zh, facecolor=head_colors[g], alpha=0.75, edgecolor="white",
                               linewidth=1.2))
        ax.text(zx + 0.15, y + zh / 2, f"r = {r}:  head {g}, position {i}", ha="left", va="center",
                fontsize=8.5, color="white")
    tx, ty, tw, rh = 1.2, 6.65, 1.9, rh_total / Br  # the Br-row tile at scale, row 0 at the top
    for r in range(Br):
        real = r < rows
        ax.add_patch(Rectangle((tx, ty - (r + 1) * rh), tw, rh,
                               facecolor=head_colors[packed_row(r, Sq)[0]] if real else GREY,
                               alpha=0.75 if real else 0.22, edgecolor="white", linewidth=0.3))
    ax.add_patch(Rectangle((tx, ty - Br * rh), tw, Br * rh, fill=False, edgecolor="black", linewidth=0.8))
    for x0, x1 in ((zx, tx), (zx + zw, tx + tw)):  # the zoom: the tile's real rows -> the enlarged ones
        ax.plot([x0, x1], [zy, ty], color=GREY, linewidth=0.8, linestyle="--")
    ax.annotate(f"rows 0-{rows - 1}: real", (tx + tw, ty - rows * rh / 2), xytext=(tx + tw + 0.35, ty - 0.4),
                ha="left", va="center", fontsize=8.5, arrowprops=dict(arrowstyle="-", color="black", lw=0.7))
    ax.text(tx + tw + 0.35, ty - (Br / 2) * rh + 0.5, f"rows {rows}-{Br - 1}:\npadding (faded),\nzero-filled",
            ha="left", va="center", fontsize=8.5, color="#555555")
    ax.text(tx + tw / 2, ty - Br * rh - 0.15, f"Q tile ({Br} x {D})", ha="center", va="top", fontsize=8.5)
    ax.text(0.1, 1.45, "packed row r =\n(query head in group) x Sq + position", ha="left", va="center", fontsize=9)
    ax.text(0.1, 0.7, f"the {G} heads read one copy of K, V", ha="left", va="center", fontsize=9,
            style="italic", color=BLUE)
    if key_warps > 1:
        ax.text(tx + tw + 0.35, ty - Br * rh + 0.75, f"{rows} rows fit one\nwarp's 16: the {key_warps}\nwarps split "
                f"each\nkey tile ({Bc // key_warps} keys\neach)", ha="left", va="center", fontsize=8.5, color=BLUE)

    # ---- (b) split-KV: one KV head's keys cut into `splits` pieces, one CTA each.
    bx, bw, by, bh = 7.0, 10.8, 8.0, 0.6  # the key axis of one KV head
    cw = bw / splits
    ax.text(bx - 0.1, 10.2, "(b) split-KV", ha="left", va="center", fontsize=11)
    ax.text(bx - 0.1, 9.55, f"one KV head's keys: {Sk} = {key_tiles} key tiles of {Bc},\ncut into {splits} "
            f"pieces of {per_split} tiles, one CTA each", ha="left", va="center", fontsize=8.5)
    zoom = 5
    for s in range(splits):
        box(bx + s * cw + 0.04, by, cw - 0.08, bh, str(s), BLUE if s == zoom else SKY, fontsize=8,
            alpha=0.9 if s == zoom else 0.5, textcolor="white" if s == zoom else "black")
    for s in (0, splits - 1):
        ax.text(bx + (s + 0.5) * cw, by + bh + 0.3, f"CTA {s}", ha="center", va="center", fontsize=8.5)
    ax.text(bx + (zoom + 0.5) * cw, by + bh + 0.3, "CTA s", ha="center", va="center", fontsize=8.5, weight="bold")
    for s in (2.5, 10.5):
        ax.text(bx + s * cw, by + bh + 0.3, "...", ha="center", va="center", fontsize=8.5)
    for s in (0, splits):
        ax.text(bx + s * cw, by - 0.08, f"key {s * keys}", ha="center", va="top", fontsize=7.5, color="#555555")

    # The zoomed CTA: its piece's key tiles, the ring, what it writes.
    cx, cy, cwid, top = bx, 2.35, bw, 7.45
    ax.add_patch(FancyBboxPatch((cx, cy), cwid, top - cy, boxstyle="round,pad=0.05", facecolor="#F7F7F7",
                                edgecolor="black", linewidth=1.0))
    for x0, x1 in ((bx + zoom * cw, cx + 0.6), (bx + (zoom + 1) * cw, cx + cwid - 0.6)):
        ax.plot([x0, x1], [by, top + 0.05], color=GREY, linewidth=0.8, linestyle="--")
    ax.text(cx + 0.2, top - 0.3, f"CTA s (one SM): keys {keys}s ... {keys}s + {keys - 1}", ha="left",
            va="center", fontsize=9, weight="bold")
    n = 6  # the key tile being computed
    kx, ky, kw_, kh = cx + 0.3, top - 1.5, 0.55, 0.5
    for t in range(per_split):
        if t < n:
            color, alpha, hatch = GREEN, 0.35, None
        elif t == n:
            color, alpha, hatch = BLUE, 0.9, None
        elif t < n + kStages:
            color, alpha, hatch = SKY, 0.6, "///"
        else:
            color, alpha, hatch = "white", 1.0, None
        ax.add_patch(Rectangle((kx + t * kw_, ky), kw_, kh, facecolor=color, alpha=alpha, edgecolor="black",
                               linewidth=0.6, hatch=hatch))
    ax.text(kx + n * kw_ / 2, ky + kh / 2, "done", ha="center", va="center", fontsize=8.5,
            bbox=dict(boxstyle="round,pad=0.1", facecolor="white", edgecolor="none"))
    ax.text(kx + (n + kStages + per_split) * kw_ / 2, ky + kh / 2, "not loaded yet", ha="center", va="center",
            fontsize=8.5, color="#555555", bbox=dict(boxstyle="round,pad=0.1", facecolor="white", edgecolor="none"))
    ax.text(kx + (n + 0.5) * kw_, ky + kh + 0.2, "n", ha="center", va="center", fontsize=8.5)
    ax.text(kx + (n + 1) * kw_ + 0.05, ky + kh + 0.2, "n+1, n+2", ha="left", va="center", fontsize=8.5)
    ax.annotate("", (kx, ky - 0.15), (kx + per_split * kw_, ky - 0.15),
                arrowprops=dict(arrowstyle="<->", color="black", lw=0.8, shrinkA=0, shrinkB=0))
    ax.text(kx + n * kw_ / 2, ky - 0.27, f"{per_split} tiles = {keys} keys", ha="center", va="top", fontsize=8.5)
    # The K/V ring in shared memory: key tile m in stage m % kStages.
    rx, ry, rw, rhh, gap = cx + 4.1, ky - 1.8, 1.6, 0.7, 0.12
    ax.text(cx + 0.3, ry + rhh / 2 + 0.12,
            f"K/V ring in shared\nmemory, {kStages} stages:\ntile m in stage m % {kStages}", ha="left", va="center",
            fontsize=8.5)
    for m in range(n, n + kStages):
        st = m % kStages
        x = rx + st * (rw + gap)
        computing = m == n
        ax.add_patch(Rectangle((x, ry), rw, rhh, facecolor=BLUE if computing else SKY, alpha=0.9 if computing else 0.6,
                               edgecolor="black", linewidth=0.6, hatch=None if computing else "///"))
        tag = "n" if computing else f"n+{m - n}"
        ax.text(x + rw / 2, ry + rhh / 2, f"stage {st}\ntile {tag}", ha="center", va="center", fontsize=8,
                color="white" if computing else "black",
                bbox=None if computing else dict(boxstyle="round,pad=0.1", facecolor="white", edgecolor="none",
                                                 alpha=0.85))
        arrow((kx + (m + 0.5) * kw_, ky - 0.18), (x + rw / 2, ry + rhh), lw=0.7, scale=8, color="#555555")
    ax.text(cx + 0.3, ry - 0.2, f"computing tile n ({key_warps} warps x {Bc // key_warps} keys), n+1, n+2 in flight (cp.async)"
            if key_warps > 1 else
            "computing tile n, tiles n+1, n+2 in flight (cp.async)", ha="left", va="top", fontsize=8.5)
    box(cx + 0.2, cy + 0.15, cwid - 0.4, 0.95,
        ("online softmax over its piece, each warp on its keys; warp 0\n"
         "merges the warps, writes O_s (fp32, / l_s) and LSE_s per row" if key_warps > 1 else
         "online softmax over its piece; then, per row, writes a partial\n"
         "O_s (fp32, already divided by its l_s), LSE_s = m_s + log l_s"), GREEN, fontsize=8.5, alpha=0.3)
    ax.text(bx + bw / 2, 1.75, f"{Hkv} KV heads x {splits} pieces = {tiles * splits} CTAs: one wave on {sms} SMs",
            ha="center", va="center", fontsize=9.5, weight="bold", color=BLUE)

    # ---- (c) combine: one warp per output row merges the row's pieces by their LSE.
    px = 18.7
    ax.text(px, 10.2, "(c) combine (one warp per output row)", ha="left", va="center", fontsize=11)
    ax.text(px, 9.55, f"{H * Sq} output rows ({H} heads x {Sq} token);\none row's {splits} partials "
            "(fp32 workspace in global memory):", ha="left", va="center", fontsize=8.5)
    sx, sy0, sh = px + 0.5, 8.95, 0.265  # the row's partials, s = 0 at the top
    ox, oy, ow, oh = 23.7, 6.4, 3.9, 0.9
    for s in range(splits):
        y = sy0 - (s + 1) * sh
        ax.add_patch(Rectangle((sx, y), 1.9, sh, facecolor=SKY, alpha=0.5, edgecolor="white", linewidth=0.8))
        ax.add_patch(Rectangle((sx + 1.95, y), 1.1, sh, facecolor=ORANGE, alpha=0.6, edgecolor="white",
                               linewidth=0.8))
        ax.text(sx + 0.95, y + sh / 2, f"$O_{{{s}}}$", ha="center", va="center", fontsize=7)
        ax.text(sx + 2.5, y + sh / 2, f"$\\mathrm{{LSE}}_{{{s}}}$", ha="center", va="center", fontsize=7)
        ax.add_patch(FancyArrowPatch((sx + 3.1, y + sh / 2), (ox - 0.5, oy + oh / 2), arrowstyle="-",
                                     color="#777777", linewidth=0.6, shrinkA=0, shrinkB=0))
    arrow((ox - 0.5, oy + oh / 2), (ox - 0.05, oy + oh / 2), lw=0.9)
    box(ox, oy, ow, oh, f"output row:\nO ({D} values), LSE", GREEN, fontsize=8.5, alpha=0.35)
    ax.text(ox + ow / 2, oy + oh + 0.5, "chapter 03's rescaling,\nacross CTAs", ha="center", va="bottom",
            fontsize=8.5, style="italic", color=BLUE)
    ax.text(ox + ow / 2, oy - 0.35, "a piece with no visible key\nwrote LSE = +inf: weight 0", ha="center",
            va="top", fontsize=8.5, color=RED)
    fx = px + 0.35
    box(fx, 2.25, 27.85 - fx, 1.75, None, "white", edge=GREY)
    formulas = [r"$M = \mathrm{max}_s\ \mathrm{LSE}_s$", r"$w_s = \exp(\mathrm{LSE}_s - M)$",
                r"$O = \Sigma_s\, w_s O_s\ /\ \Sigma_s\, w_s$", r"$\mathrm{LSE} = M + \log\, \Sigma_s\, w_s$"]
    for k, f in enumerate(formulas):
        ax.text(fx + 0.3 + 4.4 * (k % 2), 3.55 - 0.85 * (k // 2), f, ha="left", va="center", fontsize=10)
    ax.text(fx, 1.3, "launched as a programmatic dependent launch: its blocks\nstart while the split kernel's "
            "last blocks finish", ha="left", va="center", fontsize=8.5)
    # The partials: from the split CTAs' writes to the workspace.
    arrow((cx + cwid + 0.1, cy + 0.65), (sx - 0.1, sy0 - splits * sh + 0.3), rad=0.3, lw=1.2)
    save(fig, "10_decoding_split_combine.png")


# 10, step: the paged KV cache (10_decoding/steps/paged_cache.{h,cuh}): a block table naming pages
# of one pool, and one key tile gathered from pages of 16 tokens.

def fig_10_paged_cache():
    # Three sequences after this step's token: 40, 17 and 100 tokens, pages of 16 (the tests' smallest);
    # physical pages drawn from a shuffled pool of 15 (12 used, 3 spare), as test_paged_cache.cpp does.
    P, Bc, lengths, num_pages = 16, 64, [40, 17, 100], 15
    pages_per_seq = max(ceil_div(n, P) for n in lengths) + 1
    rng = np.random.default_rng(7)
    pool = list(rng.permutation(num_pages))
    table, owner, nxt = [], {}, 0
    for b, n in enumerate(lengths):
        row = []
        for i in range(pages_per_seq):
            if i < ceil_div(n, P):
                row.append(int(pool[nxt]))
                owner[int(pool[nxt])] = (b, i)
                nxt += 1
            else:
                row.append(-1)
        table.append(row)
    seq_colors = [BLUE, ORANGE, GREEN]

    fig = plt.figure(figsize=(13, 3.9))
    ax = fig.add_axes([0, 0, 1, 1])
    ax.set_xlim(0, 30)
    ax.set_ylim(1.8, 10.5)
    ax.axis("off")
    ax.text(15, 10.0, f"A paged KV cache: pages of {P} tokens from one pool, named per sequence by a block table",
            ha="center", va="center", fontsize=11)

    # (a) the block table
    ax.text(0.3, 9.1, "(a) block_table[b][n]: the pool page of tokens 16n .. 16n + 15", ha="left", fontsize=9.5)
    cw, ch, x0, y0 = 1.05, 0.9, 2.2, 7.6
    for n in range(pages_per_seq):
        ax.text(x0 + n * cw + cw / 2, y0 + ch + 0.25, f"n={n}", ha="center", fontsize=7.5)
    for b, row in enumerate(table):
        y = y0 - b * (ch + 0.15)
        ax.text(x0 - 0.15, y + ch / 2, f"seq {b}\n({lengths[b]} tok)", ha="right", va="center", fontsize=7.5)
        for n, page in enumerate(row):
            color = seq_colors[b] if page >= 0 else "white"
            ax.add_patch(Rectangle((x0 + n * cw, y), cw, ch, facecolor=color, alpha=0.75 if page >= 0 else 1,
                                   edgecolor=GREY, linewidth=0.8))
            ax.text(x0 + n * cw + cw / 2, y + ch / 2, str(page), ha="center", va="center", fontsize=8.5,
                    color="white" if page >= 0 else GREY)
    ax.text(0.3, 3.9, "-1: not used (not read). The host checks every used entry:\ninside the pool, "
            "no page named twice, the row long enough.", ha="left", va="center", fontsize=8)

    # (b) the pool
    ax.text(11.0, 9.1, "(b) k_pages, v_pages: [num_pages, Hkv, 16, D]", ha="left", fontsize=9.5)
    pw, ph, px0, py0 = 1.05, 1.0, 11.0, 7.4
    for page in range(num_pages):
        r, c = divmod(page, 5)
        x, y = px0 + c * (pw + 0.12), py0 - r * (ph + 0.35)
        b, i = owner.get(page, (None, None))
        ax.add_patch(Rectangle((x, y), pw, ph, facecolor=seq_colors[b] if b is not None else "white",
                               alpha=0.75 if b is not None else 1, edgecolor=GREY, linewidth=0.8))
        ax.text(x + pw / 2, y + ph - 0.22, f"page {page}", ha="center", va="center", fontsize=7,
                color="white" if b is not None else GREY)
        ax.text(x + pw / 2, y + 0.3, f"s{b} n{i}" if b is not None else "spare", ha="center", va="center",
                fontsize=7, color="white" if b is not None else GREY)
    ax.text(px0, 3.9, "Sequences grow a page at a time; their pages need\nnot be contiguous or in order.",
            ha="left", va="center", fontsize=8)

    # (c) one key tile of sequence 2: 64 keys = 4 runs of 16 rows, each from its own page
    ax.text(19.6, 9.1, f"(c) key tile j0 = {Bc} of seq 2 into shared memory ({Bc} rows)", ha="left", fontsize=9.5)
    tx, ty, tw, th = 25.2, 3.6, 3.2, 4.8
    ax.add_patch(Rectangle((tx, ty), tw, th, facecolor="white", edgecolor="black", linewidth=1.0))
    run_h = th / (Bc // P)
    rows = lengths[2] - Bc  # valid rows of this tile (keys 64 .. 99)
    for k in range(Bc // P):
        n = (Bc + k * P) // P
        page = table[2][n]
        y = ty + th - (k + 1) * run_h
        valid = min(max(rows - k * P, 0), P)
        if valid:
            ax.add_patch(Rectangle((tx, y + run_h * (P - valid) / P), tw, run_h * valid / P, facecolor=GREEN,
                                   alpha=0.45 + 0.15 * k, edgecolor="white", linewidth=1.0))
            label = f"rows {k * P}-{k * P + valid - 1}" + (f" (+{P - valid} zero)" if valid < P else "")
            ax.text(tx - 0.25, y + run_h / 2, f"table[2][{n}] = page {page}: copy_tile<C, 16>", ha="right",
                    va="center", fontsize=8)
        else:
            label = "zero-filled"
            ax.text(tx - 0.25, y + run_h / 2, f"keys {Bc + k * P}.. past the sequence: table not read", ha="right",
                    va="center", fontsize=8, color="#777777")
        ax.add_patch(Rectangle((tx, y), tw, run_h, facecolor="none", edgecolor=GREY, linewidth=0.6))
        ax.text(tx + tw / 2, y + run_h / 2, label, ha="center", va="center", fontsize=8)
    ax.text(tx + tw / 2, ty - 0.45, "K_j (and V_j) in the K/V ring", ha="center", fontsize=8)
    ax.text(19.6, 2.55, "Paged<16>::Kv::copy: one block-table load per run; the swizzle repeats every 8 rows,\n"
            "so a run lands exactly as that part of a 64-row copy. Pages of 64 tokens or more hold whole\n"
            "key tiles: one lookup, one copy_tile, as the contiguous cache.", ha="left", va="center", fontsize=8)
    save(fig, "10_decoding_paged_cache.png")


# ------------------------------------------------------------------------------------------------
# 11. 11_backward_v3: one step of the backward block, lane by lane.

def fig_11_backward_v3():
    # 11_backward_v3/backward_v3.cuh at D = 128, Br = 64 (Config: kOverlap, kEarlyDV, kStages = 2):
    # produce (warp 0 of warpgroup 0, one thread: wait empty[s], then TMA Q_i and dO_i into stage s,
    # counted on full[s]), consume (two commit groups, the wgmma waits, stmatrix, bar 1, the dQ
    # partial into the group's buffer) and write_dq (warp 1 of warpgroup 0: per group, the copy
    # engine's add of that buffer into dQ_accum). Both consumer warpgroups run the same
    # instructions on their own 64 keys, so their lanes are the same. The writer's lane wraps
    # around: at the left it adds the previous step's partials, while the consumers start this one.
    fig, ax = plt.subplots(figsize=(8, 6.5))
    fig.subplots_adjust(left=0.01, right=0.99, top=0.94, bottom=0.06)
    ax.set_xlim(-0.4, 27.5)
    ax.set_ylim(-1.6, 11.1)
    ax.axis("off")
    ax.set_title("One step of 11_backward_v3 (D = 128, Br = 64, Bc = 128): what overlaps what", fontsize=10.5)
    TC, CC, TMA = BLUE, GREEN, ORANGE  # tensor cores, CUDA cores, copy engine; synchronization in black
    h = 0.95  # the height of a box
    LABEL_BG = dict(facecolor="#F7F7F7", edgecolor="none", pad=0.3)  # a label over a dashed line hides it

    def light(color):  # the colour at 45 % on white, opaque, so that lines behind a box stay hidden
        return tuple(0.45 * c + 0.55 for c in matplotlib.colors.to_rgb(color))

    def lane(y_top, y_bottom, title):
        ax.add_patch(FancyBboxPatch((-0.3, y_bottom), 27.7, y_top - y_bottom, boxstyle="round,pad=0.05",
                                    facecolor="#F7F7F7", edgecolor=GREY, linewidth=0.8))
        ax.text(-0.2, y_top - 0.28, title, ha="left", va="center", fontsize=8.5, weight="bold", zorder=4,
                bbox=LABEL_BG)

    def box(x0, x1, y, text, color, fontsize=6.5):
        ax.add_patch(FancyBboxPatch((x0 + 0.05, y), x1 - x0 - 0.1, h, boxstyle="round,pad=0.03",
                                    facecolor=light(color), edgecolor="black", linewidth=0.6, zorder=3))
        ax.text((x0 + x1) / 2, y + h / 2, text, ha="center", va="center", fontsize=fontsize, zorder=4)

    def idle(x0, x1, y, text, height=h - 0.4):
        """A thread waiting: a hatched bar at mid-height of the sub-lane at y, with what it waits for."""
        ax.add_patch(Rectangle((x0, y + (h - height) / 2), x1 - x0, height, facecolor="white", edgecolor=GREY,
                               hatch="///", linewidth=0.6, zorder=3))
        ax.text((x0 + x1) / 2, y + h / 2, text, ha="center", va="center", fontsize=6.5, zorder=4,
                bbox=dict(facecolor="white", edgecolor="none", pad=1))

    def sync(x, y, label="", marker="|", ha="center"):
        """A wait (|) or an arrive (^) at time x on the sub-lane at y, labelled below it."""
        ax.plot([x], [y + h / 2], marker=marker, color="black", markersize=12 if marker == "|" else 6,
                markeredgewidth=2, zorder=5)
        dx = {"center": 0, "left": -0.1, "right": 0.1}[ha]
        ax.text(x + dx, y - 0.1, label, ha=ha, va="top", fontsize=6.5, zorder=5, bbox=LABEL_BG)

    def dashed(points):
        """A barrier's phase passing from one lane to another: a dashed arrow along the points."""
        ax.add_patch(FancyArrowPatch(path=Path(points), arrowstyle="-|>", mutation_scale=9, color="#555555",
                                     linewidth=0.9, linestyle="--", shrinkA=0, shrinkB=0, zorder=2))

    def note(x, y, text, ha="center"):
        ax.text(x, y, text, ha=ha, va="center", fontsize=6.5, style="italic", zorder=4, bbox=LABEL_BG)

    # The producer: one thread issues the loads; the copy engine moves the bytes and completes full[s].
    py = 9.4
    lane(10.95, 9.0, "producer (warpgroup 0, warp 0: one thread)")
    sync(0.05, py, "wait empty[s]", ha="left")
    box(0.1, 2.9, py, "TMA Q_i, dO_i\n→ stage s", TMA)
    sync(3.05, py, "wait empty[1 − s]", ha="left")
    box(3.1, 5.9, py, "TMA Q_{i+1},\ndO_{i+1}\n→ stage 1 − s", TMA)
    idle(5.95, 21.35, py, "waits on empty[s]: a ring of 2 stages, so it runs one stage ahead")
    box(21.4, 24.2, py, "TMA Q_{i+2},\ndO_{i+2}\n→ stage s", TMA)

    # The consumer warpgroups: the tensor cores (wgmma, asynchronous) above, the threads below.
    c1y, c2y = 8.6, 5.0  # the tops of their lanes
    for y_top, title in [(c1y, "consumer warpgroup 1 (group w = 0: keys 0-63 of the tile)"),
                         (c2y, "consumer warpgroup 2 (group w = 1: keys 64-127)")]:
        ty, cy = y_top - 1.5, y_top - 2.65  # the tensor-core and the CUDA-core sub-lanes
        lane(y_top, y_top - 3.15, title)
        ax.text(2.75, ty + h / 2, "tensor cores", ha="right", va="center", fontsize=7, style="italic")
        ax.text(2.75, cy + h / 2, "CUDA cores", ha="right", va="center", fontsize=7, style="italic")
        # The tensor cores run the commit groups in the order the warpgroup issues them.
        box(3.1, 6.0, ty, "Sᵀ = K_w Q_iᵀ\n(SS, group 1)", TC)
        box(6.0, 9.4, ty, "dPᵀ = V_w dO_iᵀ\n(SS, group 2)", TC)
        box(9.4, 12.7, ty, "dV_w += Pᵀ dO_i\n(RS, after Pᵀ)", TC)
        box(14.3, 17.6, ty, "dK_w += dSᵀ Q_i\n(RS)", TC)
        box(17.6, 21.1, ty, "dQ partial = dS K_j\n(SS, A = dSᵀ\nread transposed)", TC)
        # The threads: Pᵀ under dPᵀ, dSᵀ under dV, then their dQ partial to the group's buffer.
        sync(3.0, cy, "wait full[s]")
        sync(6.05, cy, "wait<1>")
        box(6.15, 9.3, cy, "Pᵀ = exp2(\nSᵀ·scale·log2e\n− LSE·log2e)", CC)
        sync(9.45, cy, "wait<1>")
        box(9.55, 12.0, cy, "dSᵀ = Pᵀ ∘\n(dPᵀ − D_i)", CC)
        box(12.0, 14.2, cy, "stmatrix\ndSᵀ → smem", CC)
        ax.text(17.85, cy + h / 2, "issues dK, meets bar 1 (then warp 0\nstores the next LSE, D_i), issues dQ,\n"
                "then waits for both", ha="center", va="center", fontsize=6.5, style="italic", color="#444444")
        sync(21.2, cy)
        sync(21.45, cy, marker="^")
        ax.text(21.55, cy - 0.1, "wait<0>, arrive empty[s]", ha="right", va="top", fontsize=6.5, zorder=5,
                bbox=LABEL_BG)
        sync(21.95, cy)  # the buffer is free: the writer has read the previous step's partial
        box(22.05, 24.85, cy, "sync empty(w),\ndQ → smem,\narrive full(w)", CC)
        sync(24.95, cy, marker="^")  # and on to the next step, without waiting for the copy engine
    c1, c2 = c1y - 2.65 + h / 2, c2y - 2.65 + h / 2  # the middles of their CUDA-core sub-lanes

    # The dQ writer: one warp, lane 0 issuing; its buffers' barriers are named barriers shared with
    # one group each. At the left it adds the previous step's partials (group 0, then group 1).
    wy, bus = -0.1, 1.62  # the writer's sub-lane; the height of the line carrying its empty(w)
    lane(1.4, -0.9, "dQ writer (warpgroup 0, warp 1)")
    ax.text(2.75, wy + h / 2, "step i − 1's\npartials", ha="right", va="center", fontsize=7, style="italic")
    sync(3.0, wy, "wait full(0)")
    idle(3.1, 8.2, wy, "deterministic mode: before\neach add, waits for its turn\n"
         "(a counter in global memory),\npasses it once the add is done", height=h)
    box(8.3, 11.7, wy, "bulk reduce-add:\nbuffer 0 → fp32\ndQ_accum (16 KiB)", TMA)
    sync(11.8, wy)
    sync(12.05, wy, "read done, arrive\nempty(0), wait full(1)", marker="^")
    sync(12.3, wy)
    box(12.4, 15.8, wy, "bulk reduce-add:\nbuffer 1 → fp32\ndQ_accum (16 KiB)", TMA)
    sync(15.9, wy)
    sync(16.15, wy, "read done,\narrive empty(1)", marker="^")
    idle(16.4, 24.8, wy, "waits on full(0): this step's partials")
    sync(24.95, wy)
    box(25.05, 27.3, wy, "step i's\npartials, as\nat the left", TMA)

    # full[s] down to both consumers; their arrivals on empty[s] up to the producer; bar 1 across both.
    dashed([(2.95, py), (2.95, c2)])
    dashed([(21.45, c2), (21.45, py)])
    note(2.85, 8.85, "full[s]", ha="right")
    note(21.55, 8.85, "empty[s]", ha="left")
    ax.plot([14.6, 14.6], [c2y - 3.0, c1y - 0.3], color="black", linewidth=2.0, zorder=2)
    ax.text(14.45, (c1y - 3.15 + c2y) / 2, "bar 1 (256 threads): both halves of dSᵀ stored", ha="right",
            va="center", fontsize=7.5, weight="bold")
    # The writer's arrivals on empty(w) up to the consumers' next sync, which finds the buffer free;
    # the consumers' arrivals on full(w) down to the writer (the heads stop short of the markers).
    dashed([(12.05, wy + h / 2), (12.05, bus), (21.95, bus), (21.95, c1 - 0.2)])  # empty(0): group 0 ...
    dashed([(21.95, bus), (21.95, c2 - 0.2)])  # ... empty(1): group 1
    ax.plot([16.15, 16.15], [wy + h / 2, bus], color="#555555", linewidth=0.9, linestyle="--", zorder=2)
    note(19.05, bus - 0.33, "empty(0), empty(1): the buffers are free again")
    dashed([(24.95, c1), (24.95, wy + h / 2 + 0.2)])
    note(25.05, bus, "full(0), full(1)", ha="left")

    ax.add_patch(FancyArrowPatch((0, -1.2), (27.3, -1.2), arrowstyle="-|>", mutation_scale=10, color="black",
                                 linewidth=0.9))
    ax.text(0, -1.5, "time (box widths schematic, not measured)", ha="left", va="center", fontsize=7, style="italic")
    ax.text(27.3, -1.5, "full(w), empty(w): named barriers 4 + w, 6 + w (160 threads: the group's 128 + the "
            "writer's 32)", ha="right", va="center", fontsize=7, style="italic")
    ax.legend(handles=[Patch(facecolor=light(TC), edgecolor="black", label="tensor cores (wgmma)"),
                       Patch(facecolor=light(CC), edgecolor="black", label="CUDA cores"),
                       Patch(facecolor=light(TMA), edgecolor="black", label="TMA / copy engine"),
                       plt.Line2D([], [], color="black", marker="|", markersize=9, markeredgewidth=2,
                                  linestyle="none", label="wait (mbarrier, wgmma, bar.sync)"),
                       plt.Line2D([], [], color="black", marker="^", markersize=6, linestyle="none",
                                  label="arrive (mbarrier, bar.arrive)"),
                       plt.Line2D([], [], color="black", linewidth=2.0, label="named barrier (bar.sync)")],
              loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=3, frameon=False, fontsize=8)
    save(fig, "11_backward_v3_step.png")


# ------------------------------------------------------------------------------------------------
# python/flash_tutorial/ring.py: which rank attends which (query chunk, key chunk) pair under causal
# masking, with contiguous blocks and with the zig-zag split, and the work that leaves each rank.

def ring_rank_chunks(rank, world, zigzag):
    # ring.py: rank_chunks (zig-zag: chunks r and 2W - 1 - r); contiguous: chunks 2r and 2r + 1.
    return (rank, 2 * world - 1 - rank) if zigzag else (2 * rank, 2 * rank + 1)


def fig_ring_zigzag():
    world = 4
    n = 2 * world
    colors = [BLUE, ORANGE, GREEN, PURPLE]
    fig, axes = plt.subplots(1, 3, figsize=(12, 4.3), gridspec_kw={"width_ratios": [1, 1, 0.9]})
    work = {}
    for ax, zigzag in zip(axes[:2], (False, True)):
        owner = {c: r for r in range(world) for c in ring_rank_chunks(r, world, zigzag)}
        load = [0.0] * world
        grid_axes(ax, n, n, "key chunk", "query chunk", major=1)
        for qc in range(n):
            for kc in range(n):
                if kc > qc:  # ring.py: _pair -> None, every key after every query: skipped
                    continue
                r = owner[qc]  # the rank that keeps query chunk qc attends the pair
                load[r] += 0.5 if kc == qc else 1.0  # the diagonal pair: half its scores are masked
                cell(ax, qc, kc, colors[r], edge="white", lw=1.2)
                if kc == qc:
                    ax.add_patch(Rectangle((kc, qc), 1, 1, facecolor="none", edgecolor="white", hatch="///", lw=0))
        work["zig-zag" if zigzag else "contiguous"] = load
        ax.set_title(("zig-zag: rank r keeps chunks r and 2W - 1 - r" if zigzag else
                      "contiguous: rank r keeps chunks 2r and 2r + 1"), fontsize=10)
    ax = axes[2]
    x = np.arange(world)
    for i, (name, load) in enumerate(work.items()):
        ax.bar(x + (i - 0.5) * 0.38, load, width=0.36, color=GREY if i == 0 else BLUE, label=name)
    ax.set_xticks(x, [f"rank {r}" for r in range(world)])
    ax.set_ylabel("chunk pairs attended (diagonal = 1/2)")
    ax.set_title("work per rank, W = 4 (causal)", fontsize=10)
    ax.legend(frameon=False, loc="upper left")
    handles = [Patch(facecolor=c, edgecolor=GREY, label=f"rank {r}") for r, c in enumerate(colors)]
    handles.append(Patch(facecolor="white", edgecolor=GREY, hatch="///", label="diagonal pair: causal mask"))
    fig.legend(handles=handles, loc="lower center", ncol=5, frameon=False, bbox_to_anchor=(0.4, -0.03))
    fig.suptitle("Ring attention under causal masking: a sequence in 2W = 8 chunks over W = 4 ranks "
                 "(python/flash_tutorial/ring.py)")
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    save(fig, "ring_attention_zigzag.png")


FIGURES = [fig_01_naive, fig_02_tiled, fig_03_online_softmax, fig_04_05_loop_order, fig_05_causal_tiles,
           fig_06_fragments_swizzle, fig_06_tma_panels, fig_07_block_mask, fig_08_backward, fig_09_flash_v3,
           fig_10_decoding, fig_10_paged_cache, fig_11_backward_v3, fig_ring_zigzag]


def main():
    # No argument: every figure. Arguments: the figures whose function name contains one of them,
    # e.g. python3 scripts/figures.py 09 (only fig_09_flash_v3).
    picks = sys.argv[1:]
    chosen = [f for f in FIGURES if not picks or any(p in f.__name__ for p in picks)]
    if not chosen:
        sys.exit("no figure matches " + " ".join(picks) + "; the figures: " + ", ".join(f.__name__ for f in FIGURES))
    os.makedirs(OUT, exist_ok=True)
    for f in chosen:
        f()


if __name__ == "__main__":
    main()
