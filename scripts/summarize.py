#!/usr/bin/env python3
"""Reads the chapters' benchmark JSON (Google Benchmark) and PyTorch's (compare_pytorch.py) from
one folder and writes summary.md (TFLOP/s per chapter per shape next to the PyTorch backends,
and memory against seqlen; chapter 10's decode rows in GB/s next to compare_pytorch_decode.py's)
plus PNG plots when matplotlib is available. With --readmes REPO it also rewrites the results
tables of REPO's READMEs between their <!-- results:begin --> and <!-- results:end --> markers
(the root README's chapter table only when the run has every chapter that runs on any GPU, 01-08).

  python3 scripts/summarize.py OUTDIR [--readmes .] [--results docs]   (docs/results_<gpu>.md)
"""
import argparse
import bisect
import datetime
import glob
import json
import os
import re
import statistics
from collections import defaultdict

# Per-dtype ceilings for "% of peak": fp32 is the H100 SXM datasheet's non-tensor FP32 rate;
# f16/bf16 is the register-only mma.sync rate measured on an H100 (chapter 06's README). The H200
# is the same GH100 chip (132 SMs, the same clocks) with more and faster memory: the same ceilings.
PEAK_TFLOPS = {"f32": 67.0, "f16": 645.0, "bf16": 645.0}
README_SEQLENS = (1024, 4096, 16384)
# Chapters timed on their own shapes, not in the forward table of FlashAttention-2's shapes.
OWN_TABLE = {"10_decoding"}


def load_chapters(folder):
    """fwd[(dtype, D, causal, seqlen)][chapter], mem[seqlen][chapter], bwd[...][chapter] and
    steps[chapter][(dtype, D, causal, seqlen)][step] from the Google Benchmark JSON files."""
    fwd, mem, bwd, steps, context = {}, {}, {}, {}, {}
    fp8 = {}  # (D, causal, seqlen) -> 09_flash_v3.v6_fp8's row
    sparse1 = {}  # 07 with every block active (128 x 128 blocks), for the root table's 07 row
    decode = {}   # chapter 10's decode rows: (batch, seqlen_k) -> benchmark
    varlen = {}   # <fwd|bwd>/<chapter>/<dtype>/D<d>/<mask>/varlen:64k: (direction, dtype, D, mask) -> {chapter: benchmark}
    decode_read = {}  # chapter 10's plain read (decode/plain_read), per stage as decode
    step_direction = {}  # chapter -> "fwd" or "bwd": which of PyTorch's tables its steps sit next to
    ring = []  # chapter 12's rows (ring/...), from every file: context is each file's own
    for path in sorted(glob.glob(os.path.join(folder, "bench_*.json")) + glob.glob(os.path.join(folder, "steps_*.json"))):
        try:
            with open(path) as f:
                data = json.load(f)
        except ValueError:  # a benchmark that ran no case leaves an empty file
            continue
        context = data.get("context", context)
        for b in data.get("benchmarks", []):
            parts = b["name"].split("/")
            if b.get("error_occurred"):
                continue
            if any(x.startswith(("group:", "layout:")) for x in parts):
                continue  # a backward bench's --group (GQA) or --layout bshd row: not what the tables compare
            if parts[0] == "ring":  # ring/<fwd|fwd_bwd>/<dtype>/D<d>/<mask>/<transport>/ranks:<r>/rank_seqlen:<n>
                ring.append(b)
                continue
            if parts[0] == "decode" and parts[1] == "plain_read":  # decode/plain_read/2GiB: the rows' ceiling
                stage = os.path.basename(path).startswith("bench_decode")
                decode_read.setdefault(stage, []).append(b)
                continue
            if parts[0] == "decode" and parts[1] != "10_decoding":
                continue  # a step's decode rows (10_decoding.stream_k): in the bench JSON, not the table
            if parts[0] == "decode":  # decode/<chapter>/<dtype>/H<h>x<hkv>/D<d>/B<b>/seqlen_k:<n>/...
                # The decode stage's rounds (bench_decode_<r>.json, PyTorch timed between them) when
                # there are any; the bench stage's run of 10_decoding_bench (bench_10_decoding.json) else.
                stage = os.path.basename(path).startswith("bench_decode")
                decode.setdefault(stage, {}).setdefault((int(parts[5][1:]), int(parts[6].split(":")[1])), []).append(b)
            elif parts[0] in ("fwd", "bwd") and parts[1] in OWN_TABLE:
                continue
            elif parts[0] in ("fwd", "bwd") and parts[5].startswith("varlen:"):  # the packed batch of mixed lengths
                varlen.setdefault((parts[0], parts[2], int(parts[3][1:]), parts[4]), {})[parts[1]] = b
            elif parts[0] in ("fwd", "bwd"):  # fwd/<chapter>/<dtype>/D<d>/<full|causal>/seqlen:<n>/...
                key = (parts[2], int(parts[3][1:]), parts[4] == "causal", int(parts[5].split(":")[1]))
                if parts[2] == "fp8":  # 09's FP8 step (09_flash_v3.v6_fp8): its column beside 09's bf16 rows
                    fp8[key[1:]] = b
                elif "." in parts[1]:  # a step of a chapter: 06_tensor_core.v2_swizzle, 11_backward_v3.v1_serial
                    chapter, step = parts[1].split(".", 1)
                    steps.setdefault(chapter, {}).setdefault(key, {})[step] = b
                    step_direction[chapter] = parts[0]
                else:
                    (fwd if parts[0] == "fwd" else bwd).setdefault(key, {})[parts[1]] = b
            elif parts[0] == "mem":  # mem/<chapter>/<dtype>/seqlen:<n>/...
                mem.setdefault(int(parts[3].split(":")[1]), {})[parts[1]] = b
            elif parts[0] == "sparse" and len(parts) > 7 and parts[4] == "blockk128" and parts[6] == "density:1.00":
                # sparse/07_block_sparse/<dtype>/D<d>/blockk128/random/density:1.00/seqlen:<n>/...
                sparse1[(parts[2], int(parts[3][1:]), False, int(parts[7].split(":")[1]))] = b
    context["sparse1"] = sparse1
    context["ring"] = ring
    context["varlen"] = varlen
    context["step_direction"] = step_direction
    context["fp8"] = fp8
    # Several rounds of the decode stage (gpu_check.sh: the chapter and PyTorch interleaved): the
    # round with the median GB/s stands for the row.
    decode = decode.get(True, decode.get(False, {}))
    context["decode"] = {k: sorted(runs, key=lambda b: b["GBps"])[len(runs) // 2] for k, runs in decode.items()}
    context["decode_rounds"] = max((len(runs) for runs in decode.values()), default=0)
    reads = sorted(decode_read.get(True, decode_read.get(False, [])), key=lambda b: b["GBps"])
    context["decode_read"] = reads[len(reads) // 2]["GBps"] if reads else None
    return fwd, mem, bwd, steps, context


def load_torch(folder):
    """({direction: {(dtype, D, causal, seqlen): {backend: record}}}, meta) from pytorch*.json."""
    tables, meta = {"fwd": {}, "bwd": {}}, {}
    for path in sorted(glob.glob(os.path.join(folder, "pytorch*.json"))):
        if os.path.basename(path).startswith("pytorch_decode"):
            continue  # decode rows: decode_table
        with open(path) as f:
            data = json.load(f)
        meta = data["meta"]
        for r in data["results"]:
            if r.get("varlen"):  # the packed batch (compare_pytorch.py --varlen): varlen_table
                mask = r.get("mask", "causal" if r["causal"] else "full")  # full, causal, window1024
                tables.setdefault("varlen", {})[(r["direction"], r["dtype"], r["head_dim"], mask)] = r
                continue
            if r.get("group", 1) > 1 or r.get("layout", "bhsd") != "bhsd":
                continue  # compare_pytorch.py --group / --layout: beside a bench's rows of the same flags, not in the tables
            key = (r["dtype"], r["head_dim"], r["causal"], r["seqlen"])
            tables[r["direction"]].setdefault(key, {})[r["backend"]] = r
    return tables, meta


def gpu_slug(name):
    """'NVIDIA H200' -> 'h200', 'NVIDIA H100 80GB HBM3' -> 'h100', '2 x NVIDIA H200' -> '2xh200' (a
    machine of several GPUs, results_header's name for it): the results file's name."""
    count = re.match(r"(\d+) x (.*)", name)
    if count:
        return count.group(1) + "x" + gpu_slug(count.group(2))
    m = re.search(r"\b([A-Z]{1,2}\d{2,4}[A-Z]?)\b", name.replace("NVIDIA", ""))
    return m.group(1).lower() if m else (re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_") or "gpu")


def results_header(folder, meta, context, readmes=True):
    """(GPU name, the results file's header): what ran, where, when and how, from the run's own records."""
    def read(name):
        path = os.path.join(folder, name)
        return open(path).read().strip() if os.path.exists(path) else ""
    env = read("env.txt")
    driver = re.search(r"Driver Version:\s*(\S+)", env)
    listed = re.search(r"^GPU 0: (.*?) \(UUID", env, re.M)  # nvidia-smi -L: where no PyTorch stage ran
    meta = dict(meta, gpu=meta.get("gpu") or (listed.group(1) if listed else "?"))
    gpus = len(re.findall(r"^GPU \d+: ", env, re.M))  # nvidia-smi -L: a machine of several GPUs
    if gpus > 1:  # its own results file (results_2xh200.md): the multi-GPU rows need all of them
        meta["gpu"] = f"{gpus} x {meta['gpu']}"
    nvcc = re.search(r"release (\d+\.\d+)", env)
    rows = [("date (UTC)", context.get("date", "?")), ("commit", read("commit.txt") or "?"),
            ("GPU", meta.get("gpu", "?")), ("driver", driver.group(1) if driver else "?"),
            ("CUDA", f"{nvcc.group(1) if nvcc else '?'} (nvcc); PyTorch's: {meta.get('cuda', '?')}"),
            ("PyTorch", meta.get("torch", "?")),
            ("command", f"`{read('command.txt') or 'bash scripts/gpu_check.sh OUTDIR'}`, then "
                        f"`python3 scripts/summarize.py OUTDIR{' --readmes .' if readmes else ''} --results docs`")]
    # The pytest stage's last line (python/tests on this GPU, the CUDA tests included), where it ran.
    pytest_lines = read("pytest.log").splitlines()
    if pytest_lines:
        rows.append(("python/tests", pytest_lines[-1].strip("= ")))
    sdpa = (" and PyTorch's `scaled_dot_product_attention` backends on the same shapes"
            if glob.glob(os.path.join(folder, "pytorch*.json")) else "")
    lines = [f"# Results on the {meta.get('gpu', '?')}", "",
             "Every number below comes from the one run this header names: the chapters' benchmarks "
             f"(Google Benchmark, CUDA events, median iteration){sdpa}, on the same "
             f"{'machine' if gpus > 1 else 'GPU'}.", "",
             "| run | |", "|---|---|"] + [f"| {k} | {v} |" for k, v in rows] + ["", ""]
    return meta["gpu"], "\n".join(lines)


def fmt(x):
    return "-" if x is None else f"{x:.1f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder")
    ap.add_argument("--readmes", metavar="REPO", help="rewrite the results tables of REPO's READMEs")
    ap.add_argument("--note", default="", help="a paragraph on how the run was made, first in summary.md")
    ap.add_argument("--results", metavar="DOCS_DIR",
                    help="also write DOCS_DIR/results_<gpu>.md: summary.md under a header naming the run "
                         "(date, commit, GPU, driver, CUDA, PyTorch, command: OUTDIR's env.txt, commit.txt, command.txt)")
    args = ap.parse_args()
    folder = args.folder
    fwd, mem, bwd, steps, context = load_chapters(folder)
    torch_tables, meta = load_torch(folder)
    torch_fwd, torch_bwd = torch_tables["fwd"], torch_tables["bwd"]
    ring_py = os.path.join(folder, "ring", "ring.json")  # bench_ring.py's versions, where no PyTorch stage ran
    if os.path.exists(ring_py) and not meta.get("torch"):
        with open(ring_py) as f:
            ring_meta = json.load(f).get("meta", {})
        meta = dict(meta, **{k: ring_meta[k] for k in ("torch", "cuda") if k in ring_meta})
    chapters = sorted({c for row in fwd.values() for c in row})
    backends = [b for b in ("math", "efficient", "flash", "cudnn")
                if any(b in row and "tflops" in row[b] for row in torch_fwd.values())]
    # The ratio columns: 06 (mma.sync, any GPU from sm_80) and 09 (Hopper) where they ran, else the last chapter.
    ratio_chapters = [c for c in ("06_tensor_core", "09_flash_v3") if c in chapters] or chapters[-1:]
    lines = [f"GPU: {meta.get('gpu', '?')}; PyTorch {meta.get('torch', '?')} (CUDA {meta.get('cuda', '?')}); "
             f"benchmark host: {context.get('host_name', '?')}; TFLOP/s from the median run; "
             "FLOPs = 4*B*H*S*S*D (halved for causal); batch = 16384/seqlen, heads = 2048/D.", ""]
    head = ["dtype", "D", "mask", "seqlen"] + chapters + [f"torch {b}" for b in backends]
    head += [f"{c} / torch {b}" for c in ratio_chapters for b in backends]
    fp8 = context.get("fp8", {})
    head += FP8_HEAD if fp8 else []
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for key in sorted(fwd):
        dtype, d, causal, seqlen = key
        row = fwd[key]
        ours = [row[c]["TFLOPS"] if c in row else None for c in chapters]
        theirs = [torch_fwd.get(key, {}).get(b, {}).get("tflops") for b in backends]
        mine = [row[c]["TFLOPS"] if c in row else None for c in ratio_chapters]
        ratios = [(m / t) if (m and t) else None for m in mine for t in theirs]
        cells = [dtype, str(d), "causal" if causal else "full", str(seqlen)] + [fmt(x) for x in ours + theirs]
        cells += ["-" if r is None else f"{r:.2f}x" for r in ratios]
        cells += fp8_cells(key, row, fp8) if fp8 else []
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Device memory (MiB) held by one forward, batch 1, 16 heads, D 64 (peak; in brackets: "
              "beyond Q, K, V, O, LSE):", ""]
    mem_chapters = sorted({c for row in mem.values() for c in row})
    lines += ["| seqlen | " + " | ".join(mem_chapters) + " |", "|---|" + "---|" * len(mem_chapters)]
    for seqlen in sorted(mem):
        cells = [f"{mem[seqlen][c]['peak_mem_MiB']:.0f} ({mem[seqlen][c]['extra_mem_MiB']:.0f})"
                 if c in mem[seqlen] else "-" for c in mem_chapters]
        lines.append(f"| {seqlen} | " + " | ".join(cells) + " |")
    if not fwd and not mem:  # a run of other stages only (the multi-GPU one: the ring's tables below)
        lines = []
    text = "\n".join(lines) + "\n"
    summary = head_dim_summary(fwd, torch_fwd, "09_flash_v3")
    if summary:
        text += ("\n09_flash_v3 against PyTorch, a line a head dim (bf16 and f16, seqlen 1k-16k; its ratios "
                 "as in the table above):\n\n" + summary)
    print(text)
    decode = decode_table(folder, context.get("decode", {}), context.get("decode_rounds", 1), context.get("decode_read"))
    step_torch = {c: torch_bwd if context.get("step_direction", {}).get(c) == "bwd" else torch_fwd for c in steps}
    extra = "".join(backward_table(family, torch_bwd, meta) for family in backward_families(bwd))
    extra += "".join(steps_table(c, steps[c], meta, step_torch[c]) for c in sorted(steps))
    extra += clock_table(folder, fwd, torch_fwd, fp8=context.get("fp8"))
    extra += ("\n## Decoding (10_decoding)\n\n" + decode) if decode else ""
    extra += varlen_table(context.get("varlen", {}), torch_tables.get("varlen", {}))
    extra += tokens_table(folder)
    extra += ring_table(context.get("ring", []))
    gpt = os.path.join(folder, "gpt_table.md")  # gpu_check.sh's python stage (python/examples/plot_gpt.py)
    if os.path.exists(gpt):
        with open(gpt) as f:
            extra += "\n## A small GPT trained with the PyTorch op (python/README.md)\n" + f.read()
    profile = os.path.join(folder, "gpt_profile", "profile.md")  # python/examples/profile_gpt.py
    if os.path.exists(profile):
        with open(profile) as f:
            extra += "\n## Where the GPT's training step spends its time (python/README.md)\n\n" + f.read().lstrip("# ")
    hf = os.path.join(folder, "hf", "bench_hf.md")  # python/examples/bench_hf.py
    if os.path.exists(hf):
        with open(hf) as f:
            extra += "\n## A transformers model's training step with the PyTorch op (python/README.md)\n\n" + \
                f.read().lstrip("# ")
    ring = os.path.join(folder, "ring", "ring.md")  # python/examples/bench_ring.py, on several GPUs
    if os.path.exists(ring):
        with open(ring) as f:
            extra += "\n## Ring attention over several GPUs (python/README.md)\n\n" + f.read().lstrip("# ")
    with open(os.path.join(folder, "summary.md"), "w") as f:
        f.write((args.note + "\n\n" if args.note else "") + text + extra)
    if args.results:
        gpu, header = results_header(folder, meta, context, readmes=bool(args.readmes))
        path = os.path.join(args.results, f"results_{gpu_slug(gpu)}.md")
        with open(path, "w") as f:
            f.write(header + (args.note + "\n\n" if args.note else "") + text + extra)
        print(f"{path}: written")
    print(extra)
    plot(folder, fwd, torch_fwd, mem, chapters, backends, meta)
    plot_decode(folder, context.get("decode", {}), own_read=context.get("decode_read"))
    if args.readmes:
        update_readmes(args.readmes, fwd, torch_fwd, chapters, backends, meta,
                       extra_rows=root_extra_rows(context.get("sparse1", {}), bwd, torch_fwd, torch_bwd, backends))
        for family in backward_families(bwd):  # 08's table into 08's README (11's README: a seqlen a column)
            chapter = next(iter(next(iter(family.values()))))
            if chapter.startswith("08_"):
                replace_between_markers(os.path.join(args.readmes, "08_backward", "README.md"),
                                        backward_table(family, torch_bwd, meta))
            if chapter.startswith("11_"):  # 11's README: a seqlen a column, from 2k
                replace_between_markers(os.path.join(args.readmes, "11_backward_v3", "README.md"),
                                        grid_table(family, torch_bwd, "11_backward_v3"))
        for chapter in sorted(steps):
            replace_between_markers(os.path.join(args.readmes, chapter, "README.md"),
                                    steps_table(chapter, steps[chapter], meta, step_torch[chapter]), marker="steps")
        if decode:
            replace_between_markers(os.path.join(args.readmes, "10_decoding", "README.md"), decode,
                                    marker="results-decode")
        if summary:
            replace_between_markers(os.path.join(args.readmes, "09_flash_v3", "README.md"), summary,
                                    marker="results-head-dims")


def tokens_table(folder):
    """Training tokens/s of the models gpu_check.sh's python stage runs, the op against SDPA in the
    same run: train_gpt.py (gpt_<attn>_s<seed>.json: the median over seeds; gpt_<attn>_pack.json:
    packed documents) and bench_hf.py (hf/bench_hf.json, against each SDPA backend it timed). ""
    without them."""
    def load(path):
        with open(path) as f:
            return json.load(f)
    rows = []
    for label, pattern in (("GPT (train_gpt.py)", "gpt_{}_s*.json"), ("GPT, packed documents (--pack)", "gpt_{}_pack.json")):
        speeds = {attn: sorted(load(p)["train_tokens_per_s"] for p in glob.glob(os.path.join(folder, pattern.format(attn))))
                  for attn in ("sdpa", "tutorial")}
        if speeds["sdpa"] and speeds["tutorial"]:
            mid = {a: statistics.median(v) for a, v in speeds.items()}  # of two seeds: their mean
            rows.append((label, "sdpa (FLASH)", mid["sdpa"], mid["tutorial"]))
    hf = os.path.join(folder, "hf", "bench_hf.json")
    if os.path.exists(hf):
        data = load(hf)
        results, model = data["results"], data.get("args", {}).get("model", "llama")
        for attn in ("sdpa_flash", "sdpa_cudnn", "sdpa"):
            if attn in results and "tutorial" in results:
                rows.append((f"transformers {model} (bench_hf.py)", attn, results[attn]["tokens_per_s"],
                             results["tutorial"]["tokens_per_s"]))
    if not rows:
        return ""
    lines = ["", "## Training tokens/s: the op against SDPA", "",
             "The models of python/README.md, each timed against SDPA in the same run (train_gpt.py: the "
             "median over its seeds, the two attentions training in turns in one process a seed; bench_hf.py: "
             "the median of rounds taking turns).", "",
             "| model | SDPA backend | SDPA tokens/s | tutorial tokens/s | tutorial / SDPA |", "|---|---|---:|---:|---:|"]
    lines += [f"| {m} | {b} | {s:,.0f} | {t:,.0f} | {t / s:.3f}x |" for m, b, s, t in rows]
    return "\n".join(lines) + "\n"


# 09's FP8 step (09_flash_v3.v6_fp8, E4M3 inputs): its TFLOP/s on the bf16 rows of the same shape,
# and its ratio to 09's bf16 there.
FP8_HEAD = ["09 fp8", "09 fp8 / 09"]


def fp8_cells(key, row, fp8):
    dtype, d, causal, seqlen = key
    got = fp8.get((d, causal, seqlen)) if dtype == "bf16" else None
    if not got:
        return ["-", "-"]
    base = row.get("09_flash_v3", {}).get("TFLOPS")
    return [fmt(got["TFLOPS"]), f"{got['TFLOPS'] / base:.2f}x" if base else "-"]


def ring_table(rows):
    """Chapter 12's benchmark (12_ring_attention_bench): TFLOP/s of the whole ring, per rank, and
    the scaling efficiency against one rank on the same per-rank block, by pass, dtype, D, mask,
    transport and ranks; "" without rows."""
    if not rows:
        return ""
    lines = ["", "## Ring attention (12_ring_attention)", "",
             "12_ring_attention_bench: each rank holds rank_seqlen tokens (two zig-zag chunks), so R ranks attend "
             "R x rank_seqlen; TFLOP/s of the whole sequence over the ring's median wall time; scaling efficiency = "
             "TFLOP/s on R ranks / (R x TFLOP/s of one rank on the same per-rank block). nccl: one GPU a rank; "
             "copy: simulated ranks sharing one GPU (efficiency about 1 / R by construction).", "",
             "| pass | dtype | D | mask | transport | rank seqlen | ranks | TFLOP/s | per rank | scaling efficiency |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    def key(b):
        parts = b["name"].split("/")
        return (parts[1], parts[2], int(parts[3][1:]), parts[4], parts[5], int(parts[7].split(":")[1]),
                int(parts[6].split(":")[1]))
    for b in sorted(rows, key=key):
        direction, dtype, d, mask, transport, rank_seqlen, ranks = key(b)
        eff = b.get("scaling_efficiency")
        lines.append(f"| {direction} | {dtype} | {d} | {mask} | {transport} | {rank_seqlen} | {ranks} | "
                     f"{fmt(b.get('TFLOPS'))} | {fmt(b.get('TFLOPS_per_rank'))} | "
                     f"{'-' if eff is None else f'{100 * eff:.0f}%'} |")
    return "\n".join(lines) + "\n"


def varlen_table(varlen, torch_varlen):
    """The packed batch of mixed lengths (bench_harness.h: mixed_lengths_64k), forward and backward
    TFLOP/s of each chapter that takes it against PyTorch's FlashAttention-2 varlen path; "" without
    rows."""
    if not varlen:
        return ""
    chapters = sorted({c for row in varlen.values() for c in row})
    lines = ["", "## A packed batch of mixed lengths (varlen)", "",
             "30 sequences of 104 to 7,536 tokens, 65,536 in all, heads = 2048 / D, TFLOP/s (FLOPs summed over "
             "the sequences; the backward's 2.5 times the forward's); torch flash varlen: "
             "torch.ops.aten._flash_attention_forward and _flash_attention_backward with cu_seqlens. "
             "window1024: causal with a sliding window of 1,024 keys to the left (window_size_left=1024, "
             "window_size_right=0), FLOPs counted over the visible pairs.", "",
             "| pass | dtype | D | mask | " + " | ".join(chapters) + " | torch flash varlen | "
             + " | ".join(f"{c} / torch" for c in chapters) + " |",
             "|" + "---|" * (5 + 2 * len(chapters))]
    for key in sorted(varlen):
        direction, dtype, d, mask = key
        ours = [varlen[key][c]["TFLOPS"] if c in varlen[key] else None for c in chapters]
        theirs = torch_varlen.get(key, {}).get("tflops")
        ratios = ["-" if not (o and theirs) else f"{o / theirs:.2f}x" for o in ours]
        lines.append(f"| {direction} | {dtype} | {d} | {mask} | "
                     + " | ".join(fmt(x) for x in ours)
                     + f" | {fmt(theirs)} | " + " | ".join(ratios) + " |")
    return "\n".join(lines) + "\n"


def load_torch_decode(folder):
    """compare_pytorch_decode.py's results in folder (pytorch_decode*.json): GB/s by (batch,
    seqlen_k, backend), the plain read's record (or None) and the run's meta."""
    runs, reads, meta = {}, [], {}
    for path in sorted(glob.glob(os.path.join(folder, "pytorch_decode*.json"))):  # one file per round
        with open(path) as f:
            data = json.load(f)
        meta = data.get("meta", meta)
        if data.get("read"):
            reads.append(data["read"])
        for r in data["results"]:
            if "gbps" in r:
                runs.setdefault((r["batch"], r["seqlen_k"], r["backend"]), []).append(r["gbps"])
    median = lambda xs: sorted(xs)[len(xs) // 2]
    torch_gbps = {k: median(v) for k, v in runs.items()}
    read = sorted(reads, key=lambda r: r["gbps"])[len(reads) // 2] if reads else None
    return torch_gbps, read, meta


def decode_table(folder, decode, rounds=1, own_read=None):
    """Chapter 10's decode rows (GB/s, L2 flushed) next to PyTorch's (pytorch_decode*.json), as
    the README's <!-- results-decode --> table; "" without them. own_read: the chapter's plain read
    (decode/plain_read, GB/s), the last column's ceiling."""
    if not decode:
        return ""
    torch_gbps, read, meta = load_torch_decode(folder)
    lines = [f"{meta.get('gpu', '?')}, PyTorch {meta.get('torch', '?')} (CUDA {meta.get('cuda', '?')}) in the same "
             "run (scripts/gpu_check.sh). bf16, H = 32, Hkv = 8, D = 128, seqlen_q = 1, a 256 MiB memset before "
             "every timed run; GB/s = K and V bytes / median time."
             + (f" Each cell: the median of {rounds} rounds, the chapter and PyTorch taking turns." if rounds > 1 else "")
             + (f" Plain read of 2 GiB (`decode/plain_read`, the last column's ceiling): {own_read:.0f} GB/s." if own_read else "")
             + (f" Plain read of 2 GiB{' by PyTorch (a sum)' if own_read else ''}: {read['gbps']:.0f} GB/s." if read else ""), "",
             "| batch | seqlen_k | splits | 10_decoding GB/s | torch flash GB/s | torch cudnn GB/s | / flash | / cudnn |"
             + (" of plain read |" if own_read else ""),
             "|---|---|---|---|---|---|---|---|" + ("---|" if own_read else "")]
    for (batch, seqlen_k), b in sorted(decode.items()):
        ours = b["GBps"]
        cells = [str(batch), str(seqlen_k), str(int(b["splits"])), f"{ours:.0f}"]
        theirs = [torch_gbps.get((batch, seqlen_k, backend)) for backend in ("flash", "cudnn")]
        cells += ["-" if t is None else f"{t:.0f}" for t in theirs]
        cells += ["-" if t is None else f"{ours / t:.3f}x" for t in theirs]  # 3 places: the bar is 1.00x
        if own_read:
            cells.append(f"{100 * ours / own_read:.1f}%")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def load_gpu_samples(folder):
    """gpu_check.sh's samples of the GPU's clock and power (gpu_samples.csv: "epoch seconds,
    nvidia-smi's timestamp,MHz,W" a line) as sorted (seconds, MHz, W). The epoch is taken when the
    line is read, which a buffered pipe can delay; nvidia-smi's own timestamp (local time) is not
    delayed, so it dates each sample, moved onto the epoch by the smallest difference between the two."""
    rows = []
    try:
        with open(os.path.join(folder, "gpu_samples.csv")) as f:
            for line in f:
                parts = [x.strip() for x in line.split(",")]
                if len(parts) != 4:
                    continue
                try:
                    read_at, mhz, watts = float(parts[0]), float(parts[2]), float(parts[3])
                except ValueError:
                    continue  # "[N/A]" and the like
                try:
                    stamp = datetime.datetime.strptime(parts[1], "%Y/%m/%d %H:%M:%S.%f")
                    stamp = stamp.replace(tzinfo=datetime.timezone.utc).timestamp()
                except ValueError:
                    stamp = None
                rows.append((read_at, stamp, mhz, watts))
    except OSError:
        return []
    stamped = [r for r in rows if r[1] is not None]
    if stamped and len(stamped) == len(rows):
        offset = min(r[0] - r[1] for r in rows)
        return sorted((r[1] + offset, r[2], r[3]) for r in rows)
    return sorted((r[0], r[2], r[3]) for r in rows)


def load_row_windows(folder):
    """The chapters' forward rows' wall-clock windows (bench_times.csv, FA_BENCH_TIMES in
    common/harness/bench_harness.cpp): {(chapter, dtype, D, causal, seqlen): (begin, end)}, the last
    window of a row (Google Benchmark reruns a row until it reaches its minimum time and reports the last)."""
    windows = {}
    try:
        with open(os.path.join(folder, "bench_times.csv")) as f:
            for line in f:
                parts = line.strip().split(",")
                if len(parts) != 7:
                    continue
                chapter, dtype, d, mask, seqlen, begin, end = parts
                windows[(chapter, dtype, int(d), mask == "causal", int(seqlen))] = (float(begin), float(end))
    except OSError:
        return {}
    return windows


def clock_table(folder, fwd, torch_fwd, chapter="09_flash_v3", head_dims=(64, 128), fp8=None):
    """The GPU's median SM clock and power while each of the chapter's forward rows (D in head_dims)
    and PyTorch cuDNN's row of the same shape ran, from gpu_samples.csv and the rows' windows; ""
    without them. fp8 (summarize's context["fp8"]): 09's FP8 step's rows, each beside the chapter's
    bf16 row of its shape in a second table."""
    samples, windows = load_gpu_samples(folder), load_row_windows(folder)
    if not samples or not windows:
        return ""
    times = [t for t, _, _ in samples]

    def during(window):
        if not window:
            return None
        lo, hi = bisect.bisect_left(times, window[0]), bisect.bisect_right(times, window[1])
        inside = samples[lo:hi]
        if not inside:
            return None
        return statistics.median(m for _, m, _ in inside), statistics.median(w for _, _, w in inside)

    def compared(a, b, tf_ratio):
        """Cells of two rows' (MHz, W), their TFLOP/s ratio and their clock ratio."""
        cells = []
        for got in (a, b):
            cells += [f"{got[0]:.0f}", f"{got[1]:.0f}"] if got else ["-", "-"]
        cells.append(f"{tf_ratio:.3f}x" if tf_ratio else "-")
        cells.append(f"{a[0] / b[0]:.3f}x" if a and b else "-")
        return cells

    rows = []
    for key in sorted(fwd):
        dtype, d, causal, seqlen = key
        if d not in head_dims or chapter not in fwd[key]:
            continue
        ours = during(windows.get((chapter, dtype, d, causal, seqlen)))
        rec = torch_fwd.get(key, {}).get("cudnn", {})
        theirs = during((rec["t_begin"], rec["t_end"]) if "t_begin" in rec else None)
        if not ours and not theirs:
            continue
        tf_ratio = fwd[key][chapter]["TFLOPS"] / rec["tflops"] if rec.get("tflops") else None
        cells = [dtype, str(d), "causal" if causal else "full", str(seqlen)] + compared(ours, theirs, tf_ratio)
        rows.append("| " + " | ".join(cells) + " |")
    fp8_rows = []
    for (d, causal, seqlen), step in sorted((fp8 or {}).items()):
        ours = during(windows.get((f"{chapter}.v6_fp8", "fp8", d, causal, seqlen)))
        if not ours:
            continue
        base = during(windows.get((chapter, "bf16", d, causal, seqlen)))
        base_tf = fwd.get(("bf16", d, causal, seqlen), {}).get(chapter, {}).get("TFLOPS")
        cells = [str(d), "causal" if causal else "full", str(seqlen)]
        cells += compared(ours, base, step["TFLOPS"] / base_tf if base_tf else None)
        fp8_rows.append("| " + " | ".join(cells) + " |")
    if not rows and not fp8_rows:
        return ""
    lines = ["", f"## The GPU's clock and power during {chapter}'s rows and cuDNN's", "",
             "The median SM clock (MHz) and board power (W) that nvidia-smi reported while each row ran: the "
             "chapter's timed loop, and compare_pytorch.py's row from its inputs' creation on, 0.1 s of warm-up "
             "calls included; about ten samples a second, so a few samples a row. Both time one call at a time, "
             "synchronised, for at least 0.3 s on end. At the power cap the clock falls as the power a row draws "
             "rises, so a row's TFLOP/s depends on the clock it ran at as well as on the kernel."]
    if rows:
        lines += ["", f"| dtype | D | mask | seqlen | {chapter} MHz | {chapter} W | cudnn MHz | cudnn W | TFLOP/s ratio "
                  "| MHz ratio |", "|---|---|---|---|---|---|---|---|---|---|"] + rows
    if fp8_rows:
        lines += ["", f"{chapter}'s FP8 step (v6_fp8, E4M3 inputs) beside {chapter}'s bf16 rows of the same shape:", "",
                  "| D | mask | seqlen | fp8 MHz | fp8 W | bf16 MHz | bf16 W | TFLOP/s ratio | MHz ratio |",
                  "|---|---|---|---|---|---|---|---|---|"] + fp8_rows
    return "\n".join(lines) + "\n"


def backward_families(bwd):
    """bwd split by chapter number (08_backward with its _deterministic and _ffma rows; 11_backward_v3):
    one backward table each, its ratios those of the family's main chapter."""
    families = {}
    for key, row in bwd.items():
        for chapter, b in row.items():
            families.setdefault(chapter[:2], {}).setdefault(key, {})[chapter] = b
    return [families[n] for n in sorted(families)]


def backward_table(bwd, torch_bwd, meta):
    """Backward TFLOP/s (2.5x the forward's FLOPs) of each chapter, next to PyTorch's backward."""
    if not bwd:
        return ""
    chapters = sorted({c for row in bwd.values() for c in row})
    backends = [b for b in ("math", "efficient", "flash", "cudnn")
                if any(b in row and "tflops" in row[b] for row in torch_bwd.values())]
    head = ["dtype", "D", "mask", "seqlen"] + [f"{c} ms" for c in chapters] + [f"{c} TFLOP/s" for c in chapters]
    main = next((c for c in chapters if not c.endswith("_deterministic")), chapters[-1])  # the ratios' chapter
    head += [f"torch {b}" for b in backends] + [f"{main} / torch {b}" for b in backends]
    lines = ["", config_line(meta, "backward") + " Backward FLOPs = 2.5x the forward's; the "
             "preprocessing (D_i) kernel is inside the timed region.", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for key in sorted(bwd):
        row = bwd[key]
        theirs = [torch_bwd.get(key, {}).get(b, {}).get("tflops") for b in backends]
        ours = row.get(main, {}).get("TFLOPS")
        cells = [key[0], str(key[1]), "causal" if key[2] else "full", str(key[3])]
        cells += [f"{row[c]['ms_median']:.3f}" if c in row else "-" for c in chapters]
        cells += [fmt(row[c]["TFLOPS"]) if c in row else "-" for c in chapters]
        cells += [fmt(t) for t in theirs] + [f"{ours / t:.2f}x" if (ours and t) else "-" for t in theirs]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def grid_table(rows, torch_rows, chapter, seqlens=(2048, 4096, 8192, 16384), backends=("flash", "cudnn")):
    """One line a (dtype, D, mask), one column a seqlen: the chapter's TFLOP/s and, in brackets, its
    ratio to each PyTorch backend that ran the shape. `rows` maps (dtype, D, causal, seqlen) to
    {chapter: record}; the rows of a seqlen the run lacks show -."""
    lines = ["| dtype | D | mask | " + " | ".join(f"{s // 1024}k" for s in seqlens) + " |",
             "|" + "---|" * (3 + len(seqlens))]
    for dtype, d, causal in sorted({k[:3] for k in rows if chapter in rows[k]}):
        cells = [dtype, str(d), "causal" if causal else "full"]
        for s in seqlens:
            ours = rows.get((dtype, d, causal, s), {}).get(chapter, {}).get("TFLOPS")
            theirs = [(b, torch_rows.get((dtype, d, causal, s), {}).get(b, {}).get("tflops")) for b in backends]
            ratios = [f"{ours / t:.2f}x {b}" for b, t in theirs if ours and t]
            cells.append("-" if ours is None else fmt(ours) + (f" ({', '.join(ratios)})" if ratios else ""))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def head_dim_summary(rows, torch_rows, chapter, min_seqlen=1024, backends=("flash", "cudnn")):
    """The forward table in one line a head dim, for `chapter` from `min_seqlen` (f16 and bf16
    together): the range of its ratio to PyTorch's FLASH, to cuDNN without a mask and under a causal
    one, and in how many of the cells PyTorch's last backend ran it is at least as fast (its
    ratio, unrounded, at 1 or above: a 0.996x that prints as 1.00x does not count). `rows` maps (dtype, D, causal, seqlen) to {chapter: record}. Empty where
    the chapter or the backends did not run."""
    names = {"flash": "FLASH", "cudnn": "cuDNN", "efficient": "efficient", "math": "math"}
    ratios = {}  # (D, backend, causal) -> [ratio, ...]
    for (dtype, d, causal, seqlen), row in rows.items():
        ours = row.get(chapter, {}).get("TFLOPS")
        if dtype not in ("f16", "bf16") or seqlen < min_seqlen or not ours:
            continue
        for b in backends:
            theirs = torch_rows.get((dtype, d, causal, seqlen), {}).get(b, {}).get("tflops")
            if theirs:
                ratios.setdefault((d, b, causal), []).append(ours / theirs)
    if not ratios:
        return ""
    last = backends[-1]
    span = lambda r: "-" if not r else f"{min(r):.2f}-{max(r):.2f}x"  # noqa: E731
    head = ["D", f"/ {names[backends[0]]}"] + [f"/ {names[b]}, {m}" for b in backends[1:] for m in ("full", "causal")]
    head.append(f"cells at or above {names[last]}")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for d in sorted({k[0] for k in ratios}):
        first = ratios.get((d, backends[0], False), []) + ratios.get((d, backends[0], True), [])
        cells = [str(d), span(first)]
        cells += [span(ratios.get((d, b, c), [])) for b in backends[1:] for c in (False, True)]
        every = ratios.get((d, last, False), []) + ratios.get((d, last, True), [])
        cells.append(f"{sum(r >= 1.0 for r in every)} of {len(every)}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def steps_table(chapter, steps, meta, torch_fwd=None):
    """The step-by-step versions of a chapter (06's v1..v4, 05's ablations), TFLOP/s per shape,
    next to PyTorch's backends where they ran that shape (a backend that refuses it shows -)."""
    torch_fwd = torch_fwd or {}
    names = sorted({s for row in steps.values() for s in row})
    dtype = "/".join(sorted({k[0] for k in steps}))
    backends = [b for b in ("efficient", "flash", "cudnn")
                if any(b in torch_fwd.get(key, {}) and "tflops" in torch_fwd[key][b] for key in steps)]
    lines = ["", f"{meta.get('gpu', '?')}, CUDA {meta.get('cuda', '?')}, {dtype}, FlashAttention-2's shapes "
             f"(batch = 16384/seqlen, heads = 2048/D): the step-by-step versions of {chapter} "
             f"(`{chapter}_steps_bench`), TFLOP/s" + (", and PyTorch's backends on the same shapes." if backends else "."),
             "",
             "| dtype | D | mask | seqlen | " + " | ".join(names + [f"torch {b}" for b in backends]) + " |",
             "|" + "---|" * (4 + len(names) + len(backends))]
    for key in sorted(steps):
        cells = [key[0], str(key[1]), "causal" if key[2] else "full", str(key[3])]
        cells += [fmt(steps[key][n]["TFLOPS"]) if n in steps[key] else "-" for n in names]
        cells += [fmt(torch_fwd.get(key, {}).get(b, {}).get("tflops")) for b in backends]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def replace_between_markers(path, body, marker="results"):
    if not os.path.exists(path):
        print(f"{path}: not found, left alone")
        return
    with open(path) as f:
        text = f.read()
    new, n = re.subn(rf"(<!-- {marker}:begin -->\n).*?(<!-- {marker}:end -->)", lambda m: m.group(1) + body + m.group(2),
                     text, flags=re.S)
    if n == 0:
        print(f"{path}: no {marker} markers, left alone")
        return
    with open(path, "w") as f:
        f.write(new)
    print(f"{path}: results table rewritten")


def config_line(meta, dtype):
    return (f"{meta.get('gpu', '?')}, CUDA {meta.get('cuda', '?')}, {dtype}, FlashAttention-2's shapes "
            "(batch = 16384/seqlen, heads = 2048/D); PyTorch {0} SDPA measured on the same GPU "
            "by `scripts/gpu_check.sh` (docs/results_{1}.md names the run).").format(meta.get("torch", "?"),
                                                                                  gpu_slug(meta.get("gpu", "")))


# The root README's chapter table: what each chapter teaches, next to its measured speed.
CHAPTER_INFO = {
    "01_naive": ("attention as three kernels", "one thread per element; S and P in global memory"),
    "02_tiled": ("respect the memory system", "shared-memory tiling, register tiles, warp-shuffle softmax"),
    "03_online_softmax": ("one pass over the keys", "running max and sum, rescaling; no N x N matrix"),
    "04_flash_v1": ("FlashAttention-1, Algorithm 1", "K/V tiles in shared memory, outer loop over K/V"),
    "05_flash_v2": ("FlashAttention-2", "outer loop over Q in the grid, O in registers, causal tile skipping, exp2; "
                    "fp32 in 3xTF32 on the tensor cores up to D = 128 (FFMA above)"),
    "06_tensor_core": ("FlashAttention-2 on tensor cores",
                       "mma.sync m16n8k16, ldmatrix, XOR-swizzled smem, cp.async double buffer, P kept in registers"),
    "07_block_sparse": ("skip the blocks a mask zeroes",
                        "block mask as CSR lists; the key loop walks active blocks only (row: every block active)"),
    "08_backward": ("the backward pass (row: bf16 backward)",
                    "recompute P from LSE, dK/dV in registers, dQ by atomics; deterministic and block-sparse modes"),
    "09_flash_v3": ("FlashAttention-3's forward on Hopper",
                    "wgmma from shared-memory descriptors, TMA boxes counted on mbarriers, P fed back from registers"),
    "11_backward_v3": ("FlashAttention-3's backward on Hopper (row: bf16 backward)",
                       "wgmma with the scores keys-as-rows (P^T, dS^T feed dV, dK from registers), TMA, "
                       "dQ added by the copy engine"),
}
ROOT_KEY = (128, False, 4096)  # the root table's shape: D = 128, non-causal, seqlen 4096


def root_extra_rows(sparse1, bwd, torch_fwd, torch_bwd, backends):
    """{chapter: (dtype, TFLOP/s, [ratio per backend])} for 07 (density 1.0), 08 and 11 (bf16 backward)."""
    rows = {}
    key = ("bf16",) + ROOT_KEY
    if key in sparse1:
        tf = sparse1[key]["TFLOPS"]
        rows["07_block_sparse"] = ("bf16", tf, [torch_fwd.get(key, {}).get(b, {}).get("tflops") for b in backends])
    for chapter in ("08_backward", "11_backward_v3"):
        if chapter in bwd.get(key, {}):
            tf = bwd[key][chapter]["TFLOPS"]
            rows[chapter] = ("bf16", tf, [torch_bwd.get(key, {}).get(b, {}).get("tflops") for b in backends])
    return rows


def update_readmes(repo, fwd, torch_fwd, chapters, backends, meta, extra_rows=None):
    # A chapter's second kernel (05_flash_v2_ffma: 05's FFMA kernel, which the chapter runs above
    # D = 128 and `--ffma` everywhere) is a column of its chapter's table, not a chapter of its own.
    variants = {c for c in chapters if c.endswith("_ffma")}
    chapters = [c for c in chapters if c not in variants]
    for n, chapter in enumerate(chapters):
        prev = chapters[n - 1] if n else None
        ffma = chapter + "_ffma" if chapter + "_ffma" in variants else None
        keys = sorted(k for k in fwd if chapter in fwd[k])
        shown = {}
        for k in keys:  # the README seqlens, or the longest one the chapter was run at
            group = [x for x in keys if x[:3] == k[:3]]
            wanted = [x for x in group if x[3] in README_SEQLENS] or group[-1:]
            if group[-1][3] < max(README_SEQLENS) and group[-1] not in wanted:
                wanted.append(group[-1])
            for x in wanted:
                shown[x] = True
        dtypes = sorted({k[0] for k in keys})
        dtype = "/".join(dtypes)
        # % of peak is of the FMA pipe's fp32 peak for f32: the FFMA kernel's where the chapter has one
        # (its 3xTF32 kernel is on the tensor cores, whose ceiling is another).
        head = ["dtype", "D", "mask", "seqlen", "ms", "TFLOP/s"]
        head += ["FFMA kernel TFLOP/s", "FFMA kernel % of peak"] if ffma else ["% of peak"]
        head += [f"x {prev}"] if prev else []
        head += [f"x PyTorch {b}" for b in backends]
        lines = [config_line(meta, dtype), "",
                 "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for k in sorted(shown, key=lambda x: (x[0], x[1], x[2], x[3])):
            b = fwd[k][chapter]
            tf = b["TFLOPS"]
            cells = [k[0], str(k[1]), "causal" if k[2] else "full", str(k[3]), f"{b['ms_median']:.3f}", f"{tf:.1f}"]
            peak_of = fwd[k][ffma]["TFLOPS"] if ffma and ffma in fwd[k] else None if ffma else tf
            if ffma:
                cells.append(fmt(peak_of))
            cells.append("-" if peak_of is None else f"{100 * peak_of / PEAK_TFLOPS.get(k[0], float('nan')):.0f}%")
            if prev:  # the previous chapter on the same shape, in its own dtype if it has no other
                pb = fwd[k].get(prev) or next((fwd[x][prev] for x in fwd if x[1:] == k[1:] and prev in fwd[x]), None)
                cells.append(f"{tf / pb['TFLOPS']:.2f}x" if pb else "-")
            for t in backends:
                tt = torch_fwd.get(k, {}).get(t, {}).get("tflops")
                cells.append(f"{tf / tt:.2f}x" if tt else "-")
            lines.append("| " + " | ".join(cells) + " |")
        path = os.path.join(repo, chapter, "README.md")
        if os.path.exists(path):
            replace_between_markers(path, "\n".join(lines) + "\n")
    # The root README: one row per chapter at one shape, with the plot.
    lines = [config_line(meta, "each chapter's dtype (bf16 where it has one)") + " One shape: D = 128, seqlen 4096, "
             "non-causal; each ratio is against PyTorch in the chapter's dtype (08: backward against backward).", "",
             f"| chapter | idea | key technique | dtype | TFLOP/s on {meta.get('gpu', 'this GPU').replace('NVIDIA ', '')} | " +
             " | ".join(f"x PyTorch {b}" for b in backends) + " |",
             "|---|---|---|---|---|" + "---|" * len(backends)]
    rows = {}
    for chapter in chapters:
        ref = next((k for k in sorted(fwd, key=lambda k: k[0] != "bf16") if k[1:] == ROOT_KEY
                    and chapter in fwd[k]), None)
        if ref:
            tf = fwd[ref][chapter]["TFLOPS"]
            rows[chapter] = (ref[0], tf, [torch_fwd.get(ref, {}).get(t, {}).get("tflops") for t in backends])
    rows.update(extra_rows or {})
    # The table has a row per chapter: a run without the chapters every GPU runs (01-08, e.g. one of
    # the Hopper chapters alone) leaves it as it is rather than dropping their rows.
    missing = [c for c in CHAPTER_INFO if c[:2] < "09" and c not in rows]
    root = os.path.join(repo, "README.md")
    if missing:
        print(f"{root}: the run has no row of {', '.join(missing)}, its chapter table left alone")
        return
    for chapter in sorted(rows):
        dtype, tf, theirs = rows[chapter]
        idea, technique = CHAPTER_INFO.get(chapter, ("", ""))
        lines.append(f"| [{chapter}]({chapter}/) | {idea} | {technique} | {dtype} | {tf:.1f} | " +
                     " | ".join(f"{tf / r:.2f}x" if r else "-" for r in theirs) + " |")
    lines += ["", "![TFLOP/s against seqlen, fp32, D=128](docs/tflops_f32_D128_full.png)",
              "![TFLOP/s against seqlen, bf16, D=128](docs/tflops_bf16_D128_full.png)",
              "![peak device memory against seqlen](docs/memory_vs_seqlen.png)"]
    replace_between_markers(root, "\n".join(lines) + "\n")


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


def plot_decode(folder, decode, out=None, own_read=None):
    """decode_gbps.png: chapter 10's decode rows next to PyTorch's FLASH and cuDNN
    (pytorch_decode*.json in folder), grouped by (batch, seqlen_k), with the plain read's rate
    (the chapter's decode/plain_read when the bench has it, else PyTorch's)."""
    if not decode:
        return
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not found: no decode plot")
        return
    torch_gbps, read, meta = load_torch_decode(folder)
    rows = sorted(decode)
    series = [("10_decoding", [decode[k]["GBps"] for k in rows])]
    series += [(f"PyTorch {b}", [torch_gbps.get((k[0], k[1], b), 0) for k in rows]) for b in ("flash", "cudnn")]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    width = 0.8 / len(series)
    for n, (label, values) in enumerate(series):
        ax.bar([i + (n - (len(series) - 1) / 2) * width for i in range(len(rows))], values, width, label=label)
    ceiling = own_read or (read["gbps"] if read else None)
    if ceiling:
        ax.axhline(ceiling, color="black", linestyle="--", linewidth=1,
                   label=f"plain read of 2 GiB ({ceiling:.0f} GB/s)")
        ax.set_ylim(0, ceiling * 1.25)  # room for the legend above the bars
    ax.set_xticks(range(len(rows)), [f"batch {b}\n{s // 1024}k keys" for b, s in rows], fontsize=8)
    ax.set_ylabel("K and V bytes read per second (GB/s)")
    ax.set_title(f"decoding: bf16, H 32 / Hkv 8, D 128, one query token, L2 flushed - {meta.get('gpu', '')}",
                 fontsize=9)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", ncol=4)
    fig.tight_layout()
    fig.savefig(out or os.path.join(folder, "decode_gbps.png"), dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
