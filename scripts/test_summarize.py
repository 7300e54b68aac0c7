#!/usr/bin/env python3
"""CPU test of scripts/summarize.py. The decode table: with several rounds of gpu_check.sh's decode
stage (bench_decode_<r>.json and pytorch_decode_<r>.json), each row shows its median round, for
the chapter and for PyTorch alike; the bench stage's run of 10_decoding_bench
(bench_10_decoding.json, no PyTorch between) counts only when the decode stage left no file; and
one round reads as before (no rounds sentence); the chapter's plain read (decode/plain_read), when the
bench has it, is the last column's ceiling and never a row. The backward tables: one per chapter family (08's
rows and 11's apart, each with its own ratios), 11's README grid (a seqlen a column, the ratios
in brackets), and a backward chapter's steps next to PyTorch's backward, not its forward. 09's forward a line
a head dim: the ratio ranges and the cells at or above cuDNN, unrounded. The root README's chapter table:
rewritten by a run of every chapter, left alone by one without chapters 01-08. The clock table: each
row's median clock and power from the samples inside its window, dated by nvidia-smi's own timestamp.
Run: python3 scripts/test_summarize.py"""
import datetime
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import summarize  # noqa: E402


def bench(gbps, read=None):
    """A 10_decoding_bench JSON with the row batch 8, seqlen_k 16384 at `gbps` GB/s (and the plain
    read at `read` GB/s)."""
    name = "decode/10_decoding/bf16/H32x8/D128/B8/seqlen_k:16384/min_time:0.300/manual_time"
    rows = [{"name": name, "GBps": gbps, "splits": 2.0}]
    if read:
        rows.append({"name": "decode/plain_read/2GiB/min_time:0.300/manual_time", "GBps": read})
    return {"context": {}, "benchmarks": rows}


def torch_run(flash, read):
    return {"meta": {"gpu": "test GPU", "torch": "0", "cuda": "0"}, "read": {"gbps": read},
            "results": [{"batch": 8, "seqlen_k": 16384, "backend": "flash", "gbps": flash}]}


def write(folder, name, data):
    with open(os.path.join(folder, name), "w") as f:
        json.dump(data, f)


def table(folder):
    _, _, _, _, context = summarize.load_chapters(folder)
    return summarize.decode_table(folder, context["decode"], context["decode_rounds"], context["decode_read"]), context


def row(text):
    return next(line for line in text.splitlines() if line.startswith("| 8 | 16384"))


def main():
    failures = []

    def check(what, cond):
        if not cond:
            failures.append(what)

    with tempfile.TemporaryDirectory() as d:
        # Three rounds: ours 2700, 2800, 2750 (median 2750); FLASH 2790, 2760, 2700 (median 2760).
        for r, (ours, flash) in enumerate([(2700, 2790), (2800, 2760), (2750, 2700)], start=1):
            write(d, f"bench_decode_{r}.json", bench(ours))
            write(d, f"pytorch_decode_{r}.json", torch_run(flash, 3000 + r))
        write(d, "bench_10_decoding.json", bench(9999))  # the bench stage's row: not in the table
        text, context = table(d)
        check("three rounds counted", context["decode_rounds"] == 3)
        check("the chapter's median round: " + row(text), "| 2750 |" in row(text))
        check("PyTorch's median round: " + row(text), "| 2760 |" in row(text))
        check("the ratio of the medians: " + row(text), f"{2750 / 2760:.3f}x" in row(text))
        check("the rounds sentence", "the median of 3 rounds" in text)
        check("the plain read's median round", "Plain read of 2 GiB: 3002 GB/s" in text)
        check("no plain-read column without the chapter's read", "of plain read" not in text)

    with tempfile.TemporaryDirectory() as d:
        # The chapter's plain read in three rounds (4000, 4200, 4100: median 4100), never a decode row.
        for r, (ours, read) in enumerate([(2700, 4000), (2800, 4200), (2750, 4100)], start=1):
            write(d, f"bench_decode_{r}.json", bench(ours, read))
            write(d, f"pytorch_decode_{r}.json", torch_run(2760, 3000 + r))
        text, context = table(d)
        check("the chapter's read's median round", context["decode_read"] == 4100)
        check("the chapter's read in the sentence", "(`decode/plain_read`, the last column's ceiling): 4100 GB/s" in text)
        check("PyTorch's read named as such", "by PyTorch (a sum): 3002 GB/s" in text)
        check("the row's share of the read: " + row(text), row(text).endswith(f"| {100 * 2750 / 4100:.1f}% |"))
        check("the read is not a decode row", len([l for l in text.splitlines() if l.startswith("| ")]) == 2)

    with tempfile.TemporaryDirectory() as d:
        # A one-round layout: one decode stage file, and the bench stage's run beside it.
        write(d, "bench_decode.json", bench(2754))
        write(d, "bench_10_decoding.json", bench(9999))
        write(d, "pytorch_decode.json", torch_run(2764, 3032))
        text, context = table(d)
        check("one round", context["decode_rounds"] == 1)
        check("the decode stage's row: " + row(text), "| 2754 | 2764 |" in row(text))
        check("no rounds sentence for one round", "rounds" not in text)

    with tempfile.TemporaryDirectory() as d:
        write(d, "bench_10_decoding.json", bench(2600))  # no decode stage: the bench stage's row
        text, _ = table(d)
        check("the bench stage's row without a decode stage: " + row(text), "| 2600 |" in row(text))

    with tempfile.TemporaryDirectory() as d:
        def rows(chapter, tflops):
            name = f"bwd/{chapter}/bf16/D128/full/seqlen:4096/min_time:0.300/manual_time"
            return {"context": {}, "benchmarks": [{"name": name, "TFLOPS": tflops, "ms_median": 1.0}]}
        write(d, "bench_08_backward.json", {"context": {}, "benchmarks": rows("08_backward", 300.0)["benchmarks"]
                                            + rows("08_backward_deterministic", 250.0)["benchmarks"]})
        write(d, "bench_11_backward_v3.json", rows("11_backward_v3", 480.0))
        write(d, "steps_11_backward_v3_v1_serial.json", rows("11_backward_v3.v1_serial", 450.0))
        torch = [{"direction": direction, "backend": "cudnn", "dtype": "bf16", "head_dim": 128, "causal": False,
                  "seqlen": 4096, "tflops": tflops} for direction, tflops in (("bwd", 400.0), ("fwd", 600.0))]
        write(d, "pytorch_bwd_bf16.json", {"meta": {"gpu": "test GPU", "torch": "0", "cuda": "0"}, "results": torch})
        _, _, bwd, steps, context = summarize.load_chapters(d)
        (torch_tables, meta) = summarize.load_torch(d)
        families = summarize.backward_families(bwd)
        check("two backward families", len(families) == 2)
        text08 = summarize.backward_table(families[0], torch_tables["bwd"], meta)
        text11 = summarize.backward_table(families[1], torch_tables["bwd"], meta)
        check("08's table has its deterministic column and not 11's: " + text08,
              "08_backward_deterministic TFLOP/s" in text08 and "11_backward_v3" not in text08)
        check("08's ratio: " + text08, "| 0.75x |" in text08)
        check("11's table and ratio: " + text11, "11_backward_v3 / torch cudnn" in text11 and "| 1.20x |" in text11)
        check("11's steps are backward steps", context["step_direction"].get("11_backward_v3") == "bwd")
        step_text = summarize.steps_table("11_backward_v3", steps["11_backward_v3"], meta, torch_tables["bwd"])
        check("a backward step next to PyTorch's backward: " + step_text, "| 450.0 | 400.0 |" in step_text)
        # 11's README grid: a seqlen a column; 4k has the chapter and cuDNN, the other columns nothing.
        grid = summarize.grid_table(families[1], torch_tables["bwd"], "11_backward_v3")
        check("11's grid: " + grid, "| bf16 | 128 | full | - | 480.0 (1.20x cudnn) | - | - |" in grid)

    with tempfile.TemporaryDirectory() as d:
        # The packed batch (fwd/.../varlen:64k) lands in its own table beside PyTorch's varlen
        # record, and neither in the seqlen table.
        name = "fwd/09_flash_v3/bf16/D128/causal/varlen:64k/min_time:0.300/manual_time"
        write(d, "bench_09_flash_v3.json", {"context": {}, "benchmarks": [{"name": name, "TFLOPS": 400.0}]})
        bwd_name = "bwd/11_backward_v3/bf16/D128/causal/varlen:64k/min_time:0.300/manual_time"
        window_name = "bwd/11_backward_v3/bf16/D128/window1024/varlen:64k/min_time:0.300/manual_time"
        write(d, "bench_11_backward_v3.json", {"context": {}, "benchmarks": [
            {"name": bwd_name, "TFLOPS": 300.0}, {"name": window_name, "TFLOPS": 250.0}]})
        write(d, "pytorch_fwd.json", {"meta": {"gpu": "test GPU", "torch": "0", "cuda": "0"}, "results": [
            {"direction": "fwd", "backend": "flash_varlen", "dtype": "bf16", "head_dim": 128, "causal": True,
             "seqlen": 65536, "varlen": True, "tflops": 320.0},
            {"direction": "bwd", "backend": "flash_varlen", "dtype": "bf16", "head_dim": 128, "causal": True,
             "seqlen": 65536, "varlen": True, "tflops": 200.0},
            {"direction": "bwd", "backend": "flash_varlen", "dtype": "bf16", "head_dim": 128, "causal": True,
             "mask": "window1024", "seqlen": 65536, "varlen": True, "tflops": 125.0}]})
        fwd, _, bwd, _, context = summarize.load_chapters(d)
        torch_tables, _ = summarize.load_torch(d)
        text = summarize.varlen_table(context["varlen"], torch_tables.get("varlen", {}))
        check("the varlen table's forward: " + text,
              "| fwd | bf16 | 128 | causal | 400.0 | - | 320.0 | 1.25x | - |" in text)
        check("the varlen table's backward: " + text,
              "| bwd | bf16 | 128 | causal | - | 300.0 | 200.0 | - | 1.50x |" in text)
        check("the varlen table's window row: " + text,
              "| bwd | bf16 | 128 | window1024 | - | 250.0 | 125.0 | - | 2.00x |" in text)
        check("no varlen row among the seqlens", not fwd and not bwd and not torch_tables["fwd"])

    with tempfile.TemporaryDirectory() as d:
        # The tokens/s table: train_gpt.py's runs (median over seeds: of two, their mean) and
        # bench_hf.py's backends.
        for attn, seed, tps in (("sdpa", 0, 100.0), ("sdpa", 1, 120.0), ("sdpa", 2, 110.0), ("tutorial", 0, 121.0),
                                ("tutorial", 1, 131.0)):
            write(d, f"gpt_{attn}_s{seed}.json", {"train_tokens_per_s": tps})
        os.makedirs(os.path.join(d, "hf"))
        write(d, os.path.join("hf", "bench_hf.json"), {"args": {"model": "llama"}, "results": {
            "sdpa_flash": {"tokens_per_s": 200.0}, "tutorial": {"tokens_per_s": 210.0}}})
        text = summarize.tokens_table(d)
        check("the GPT's row: " + text, "| GPT (train_gpt.py) | sdpa (FLASH) | 110 | 126 | 1.145x |" in text)
        check("the transformers row: " + text,
              "| transformers llama (bench_hf.py) | sdpa_flash | 200 | 210 | 1.050x |" in text)
        check("no packed row without its runs", "packed" not in text.split("|---|")[-1])
        check("no table without runs", summarize.tokens_table(os.path.join(d, "hf")) == "")

    with tempfile.TemporaryDirectory() as d:
        # Chapter 12's rows: collected by load_chapters (not a forward row), ordered by ranks as numbers.
        def ring(ranks, tflops, eff):
            row = {"name": f"ring/fwd/bf16/D128/causal/nccl/ranks:{ranks}/rank_seqlen:131072/manual_time",
                   "TFLOPS": tflops, "TFLOPS_per_rank": tflops / ranks}
            return dict(row, scaling_efficiency=eff) if eff is not None else row
        write(d, "bench_12_ring_attention.json", {"context": {}, "benchmarks": [
            ring(4, 1800.0, 0.9), ring(1, 500.0, 1.0), ring(2, 950.0, 0.95)]})
        write(d, "steps_12_later.json", {"context": {"host_name": "later"}, "benchmarks": []})  # read after 12's
        write(d, "bench_11_gqa.json", {"context": {}, "benchmarks": [  # --group, --layout rows: kept out of the tables
            {"name": "bwd/11_backward_v3/bf16/D128/causal/seqlen:4096/group:2/min_time:0.300/manual_time",
             "TFLOPS": 400.0},
            {"name": "bwd/11_backward_v3/bf16/D128/causal/seqlen:4096/layout:bshd/min_time:0.300/manual_time",
             "TFLOPS": 410.0}]})
        fwd, _, bwd, _, context = summarize.load_chapters(d)
        check("no forward row from the ring", not fwd)
        check("no backward row from --group or --layout", not bwd)
        text = summarize.ring_table(context.get("ring", []))
        rows = [line for line in text.splitlines() if line.startswith("| fwd")]
        check("three ring rows: " + text, len(rows) == 3)
        check("ranks in order: " + text, [r.split(" | ")[6] for r in rows] == ["1", "2", "4"])
        check("the efficiency in percent: " + text,
              "| fwd | bf16 | 128 | causal | nccl | 131072 | 4 | 1800.0 | 450.0 | 90% |" in text)
        check("no ring table without rows", summarize.ring_table([]) == "")

    # 09's FP8 step: rows fwd/09_flash_v3.v6_fp8/fp8/... become the "09 fp8" column beside 09's bf16
    # rows of the same shape (and its ratio to them), not a steps table of their own.
    with tempfile.TemporaryDirectory() as d:
        rows = [{"name": "fwd/09_flash_v3/bf16/D128/causal/seqlen:8192/min_time:0.300/manual_time", "TFLOPS": 500.0},
                {"name": "fwd/09_flash_v3/f16/D128/causal/seqlen:8192/min_time:0.300/manual_time", "TFLOPS": 490.0},
                {"name": "fwd/09_flash_v3.v6_fp8/fp8/D128/causal/seqlen:8192/min_time:0.300/manual_time",
                 "TFLOPS": 750.0}]
        write(d, "bench_09_flash_v3.json", {"context": {}, "benchmarks": rows[:2]})
        write(d, "steps_09_flash_v3_v6_fp8.json", {"context": {}, "benchmarks": rows[2:]})
        fwd, _, _, steps, context = summarize.load_chapters(d)
        check("no steps table from the FP8 rows", "09_flash_v3" not in steps)
        check("the FP8 row kept", list(context["fp8"]) == [(128, True, 8192)])
        bf16 = ("bf16", 128, True, 8192)
        check("the fp8 cells of a bf16 row", summarize.fp8_cells(bf16, fwd[bf16], context["fp8"]) == ["750.0", "1.50x"])
        f16 = ("f16", 128, True, 8192)
        check("none on an f16 row", summarize.fp8_cells(f16, fwd[f16], context["fp8"]) == ["-", "-"])

    # compare_pytorch.py --group / --layout records stand beside a bench's rows of the same flags,
    # never in the tables, where they would take the place of the MHA [B, H, S, D] ones.
    with tempfile.TemporaryDirectory() as d:
        base = {"direction": "bwd", "backend": "cudnn", "dtype": "bf16", "head_dim": 128, "causal": True,
                "seqlen": 4096, "tflops": 400.0}
        write(d, "pytorch_gqa.json", {"meta": {"gpu": "test GPU"}, "results": [
            base, dict(base, group=2, tflops=390.0), dict(base, layout="bshd", tflops=450.0)]})
        tables, _ = summarize.load_torch(d)
        got = tables["bwd"][("bf16", 128, True, 4096)]["cudnn"]["tflops"]
        check(f"the MHA [B, H, S, D] record stays in the table: {got}", got == 400.0)

    # A machine of several GPUs has a results file of its own, named by the count (nvidia-smi -L).
    check("one GPU's slug", summarize.gpu_slug("NVIDIA H200") == "h200")
    check("two GPUs' slug", summarize.gpu_slug("2 x NVIDIA H200") == "2xh200")
    with tempfile.TemporaryDirectory() as d:
        write_text = lambda name, text: open(os.path.join(d, name), "w").write(text)  # noqa: E731
        write_text("env.txt", "GPU 0: NVIDIA H200 (UUID: GPU-a)\nGPU 1: NVIDIA H200 (UUID: GPU-b)\n")
        gpu, header = summarize.results_header(d, {}, {})
        check("the header names both GPUs: " + gpu, gpu == "2 x NVIDIA H200" and "# Results on the 2 x NVIDIA H200" in header)
        write_text("env.txt", "GPU 0: NVIDIA H200 (UUID: GPU-a)\n")
        check("one GPU named as it is", summarize.results_header(d, {}, {})[0] == "NVIDIA H200")
        check("no python/tests row without the pytest stage", "python/tests" not in summarize.results_header(d, {}, {})[1])
        write_text("pytest.log", "....\n=== 300 passed, 4 skipped in 180.00s (0:03:00) ===\n")
        check("the pytest stage's last line in the header",
              "| python/tests | 300 passed, 4 skipped in 180.00s (0:03:00) |" in summarize.results_header(d, {}, {})[1])

    # The forward in a line a head dim: ratio ranges over both dtypes from 1k, cells at or above
    # cuDNN counted unrounded (0.996, printed 1.00x, does not count); 512 and f32 left out.
    ours = lambda t: {"09_flash_v3": {"TFLOPS": t}}  # noqa: E731
    theirs = lambda f, c: {"flash": {"tflops": f}, "cudnn": {"tflops": c}}  # noqa: E731
    rows = {("bf16", 128, False, 1024): ours(99.6), ("f16", 128, False, 2048): ours(120.0),
            ("bf16", 128, True, 1024): ours(99.4), ("bf16", 128, False, 512): ours(10.0),
            ("f32", 128, False, 1024): ours(10.0), ("bf16", 64, True, 4096): ours(50.0)}
    torch_rows = {("bf16", 128, False, 1024): theirs(50.0, 100.0), ("f16", 128, False, 2048): theirs(60.0, 100.0),
                  ("bf16", 128, True, 1024): theirs(80.0, 100.0), ("bf16", 128, False, 512): theirs(5.0, 100.0),
                  ("f32", 128, False, 1024): theirs(5.0, 100.0), ("bf16", 64, True, 4096): theirs(25.0, 100.0)}
    text = summarize.head_dim_summary(rows, torch_rows, "09_flash_v3")
    line128 = next((x for x in text.splitlines() if x.startswith("| 128 |")), "")
    check("D = 128's line: FLASH over both masks, cuDNN by mask, 1 of 3 cells: " + line128,
          line128 == "| 128 | 1.24-2.00x | 1.00-1.20x | 0.99-0.99x | 1 of 3 |")
    line64 = next((x for x in text.splitlines() if x.startswith("| 64 |")), "")
    check("D = 64's line, no full cell: " + line64, line64 == "| 64 | 2.00-2.00x | - | 0.50-0.50x | 0 of 1 |")
    check("no line without the chapter", summarize.head_dim_summary(rows, torch_rows, "06_tensor_core") == "")

    # The clock table: each row's samples are those inside its window; the samples are dated by
    # nvidia-smi's timestamp moved by the smallest lag of the read, so a burst read late by a
    # buffered pipe still lands in its own row; a window without samples prints "-".
    with tempfile.TemporaryDirectory() as d:
        t0 = 1_000_000.0  # nvidia-smi's timestamps below, in UTC; the reads 0.05 s after, or late
        stamp = lambda t: datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]  # noqa: E731
        samples = [(t0 + 0.1 * i, 1900 if i < 10 else 1600, 500 if i < 10 else 700) for i in range(20)]
        with open(os.path.join(d, "gpu_samples.csv"), "w") as f:
            for i, (t, mhz, w) in enumerate(samples):
                read_at = t + 0.05 if i % 5 else t + 0.9  # every fifth read 0.9 s late (a buffered burst)
                f.write(f"{read_at:.6f},{stamp(t)}, {mhz}, {w}.00\n")
            f.write(f"{t0 + 5:.6f},{stamp(t0 + 5)}, [N/A], [N/A]\n")
        with open(os.path.join(d, "bench_times.csv"), "w") as f:
            f.write(f"09_flash_v3,bf16,128,full,1024,{t0 - 9},{t0 - 8}\n")  # an earlier run of the row: replaced
            f.write(f"09_flash_v3,bf16,128,full,1024,{t0 + 1.05},{t0 + 1.85}\n")
            f.write(f"09_flash_v3,bf16,64,full,1024,{t0 + 8},{t0 + 9}\n")  # no sample inside
        fwd = {("bf16", 128, False, 1024): {"09_flash_v3": {"TFLOPS": 540.0}},
               ("bf16", 64, False, 1024): {"09_flash_v3": {"TFLOPS": 400.0}}}
        torch_rows = {("bf16", 128, False, 1024): {"cudnn": {"tflops": 600.0, "t_begin": t0 + 0.05, "t_end": t0 + 0.85}}}
        text = summarize.clock_table(d, fwd, torch_rows)
        got = next((x for x in text.splitlines() if x.startswith("| bf16 | 128 |")), "")
        check("09 at 1600 MHz, 700 W; cuDNN at 1900 MHz, 500 W: " + got,
              got == "| bf16 | 128 | full | 1024 | 1600 | 700 | 1900 | 500 | 0.900x | 0.842x |")
        got = next((x for x in text.splitlines() if x.startswith("| bf16 | 64 |")), "")
        check("a row without samples or an anchor is left out: " + got, got == "")
        check("no table without samples", summarize.clock_table(tempfile.gettempdir() + "/none", fwd, torch_rows) == "")
        # 09's FP8 step beside 09's bf16 row of its shape: its own window, dtype "fp8".
        with open(os.path.join(d, "bench_times.csv"), "a") as f:
            f.write(f"09_flash_v3.v6_fp8,fp8,128,full,1024,{t0 + 0.05},{t0 + 0.85}\n")
        text = summarize.clock_table(d, fwd, torch_rows, fp8={(128, False, 1024): {"TFLOPS": 675.0}})
        got = next((x for x in text.splitlines() if x.startswith("| 128 | full | 1024 |")), "")
        check("FP8 at 1900 MHz, 500 W against bf16's 1600 MHz, 700 W: " + got,
              got == "| 128 | full | 1024 | 1900 | 500 | 1600 | 700 | 1.250x | 1.188x |")

    # The root README's chapter table: rewritten by a run with every chapter 01-08 (one row each),
    # left as it is by a run without them (a run of the Hopper chapters alone).
    with tempfile.TemporaryDirectory() as repo:
        root = os.path.join(repo, "README.md")
        old = "intro\n<!-- results:begin -->\nold table\n<!-- results:end -->\n"
        with open(root, "w") as f:
            f.write(old)
        meta = {"gpu": "NVIDIA H200", "cuda": "13.0", "torch": "2.11"}
        key = ("bf16", 128, False, 4096)
        hopper = {key: {"09_flash_v3": {"TFLOPS": 600.0, "ms_median": 1.0}}}
        summarize.update_readmes(repo, hopper, {}, ["09_flash_v3"], ["cudnn"], meta)
        with open(root) as f:
            check("a run of 09 alone leaves the root table", f.read() == old)
        every = sorted(c for c in summarize.CHAPTER_INFO if c[:2] < "09") + ["09_flash_v3"]
        full = {key: {c: {"TFLOPS": 100.0 + n, "ms_median": 1.0} for n, c in enumerate(every)}}
        summarize.update_readmes(repo, full, {}, every, ["cudnn"], meta)
        with open(root) as f:
            text = f.read()
        rows = [x for x in text.splitlines() if x.startswith("| [")]
        check(f"a run of every chapter rewrites it, a row each ({len(rows)} rows)",
              "old table" not in text and len(rows) == len(every))

    for f in failures:
        print("FAILED:", f)
    print(f"test_summarize: {'FAILED' if failures else 'OK'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
