#!/usr/bin/env bash
# 07's block-sparse forward against main plus docs/pending/exp_07_<VARIANT>.patch, in one device
# call: the builds side by side, the variant's 07 tests (every pattern, block size, head dim and
# layout) and 06's (the patch touches 06's host code), compute-sanitizer on the variant, then
# 07's benchmark for every variant over ROUNDS rounds, taking turns: the density-1.0 and 0.25 rows
# next to 06's dense kernel in the same binary (`dense06`), bf16, D 64 and 128, both key block
# sizes, 4k and 16k. Logs and summary.md in OUTDIR.
#
#   ROUNDS=2 bash docs/pending/check_exp_07.sh OUTDIR VARIANT...
#
# STAGES (default build,tests,bench) picks stages; ROOT=DIR keeps the copies and builds there, so
# that a second call on the same warm machine can time what the first built and tested.
set -uo pipefail
cd "$(dirname "$0")/../.."
source docs/pending/variant.sh  # experiment_setup, experiment_stages, build_variants
out=${1:?usage: check_exp_07.sh OUTDIR VARIANT...}
experiment_setup "$out"  # variant.sh: step, PATH, gen
variants=(main "${@:2}")
rounds=${ROUNDS:-2}
experiment_stages build,tests,bench  # variant.sh: stages, want, root

if want build; then
  step "copies and builds: ${variants[*]} in $root"
  extra_targets=(07_block_sparse_tests 06_tensor_core_tests)  # the variants' tests; main is only timed
  build_variants exp_07 07_block_sparse_bench 07_block_sparse || exit 1
fi

if want tests; then
step "each variant's 07 and 06 tests; compute-sanitizer on each variant"
for v in "${variants[@]:1}"; do
  for t in 07_block_sparse/07_block_sparse_tests 06_tensor_core/06_tensor_core_tests; do
    log="$out/tests_${v}_$(basename "$t").log"
    timeout 300 "$root/$v/build/$t" >"$log" 2>&1
    echo "$v $(basename "$t"): rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$log" | tr '\n' ' ')"
  done
  sanitize "$root/$v/build/07_block_sparse/07_block_sparse" "$v" \
    "--head-dim 128 --batch 2 --heads 4 --seqlen-q 300 --seqlen-k 700 --pattern random --density 0.5" \
    "--head-dim 64 --batch 1 --heads 4 --seqlen 1000 --pattern local --block-k 64 --causal --dtype f16" \
    "--head-dim 112 --batch 2 --heads 8 --kv-heads 2 --seqlen-q 200 --seqlen-k 1000 --pattern random --density 0.25"
done | tee "$out/tests_summary.txt"
fi

if want bench; then
step "benchmarks: every variant, $rounds rounds, taking turns"
filter='^(dense06/06_tensor_core/bf16/D(64|128)/full|sparse/07_block_sparse/bf16/D(64|128)/blockk(64|128)/random/density:(1.00|0.25))/seqlen:(4096|16384)/'
for round in $(seq "$rounds"); do
  for v in "${variants[@]}"; do
    "$root/$v/build/07_block_sparse/07_block_sparse_bench" --benchmark_filter="$filter" \
      --benchmark_out="$out/bench_${v}_$round.json" --benchmark_out_format=json >"$out/bench_${v}_$round.log" 2>&1 ||
      echo "bench failed: $v"
  done
done
fi

step "summary"
python3 - "$out" "$rounds" "${variants[@]}" <<'PY' | tee "$out/summary.md"
import json, re, sys
out, rounds, variants = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
ms = {}  # (variant, round, row) -> ms; row: ("dense06", D, seqlen) or (block_k, D, density, seqlen)
for v in variants:
    for r in range(1, rounds + 1):
        try:
            for b in json.load(open(f"{out}/bench_{v}_{r}.json"))["benchmarks"]:
                n = b["name"]
                m = re.match(r"dense06/06_tensor_core/bf16/D(\d+)/full/seqlen:(\d+)", n)
                if m:
                    ms[(v, r, ("dense06", int(m[1]), "1.00", int(m[2])))] = b["real_time"]
                m = re.match(r"sparse/07_block_sparse/bf16/D(\d+)/blockk(\d+)/random/density:([\d.]+)/seqlen:(\d+)", n)
                if m:
                    ms[(v, r, (f"blockk{m[2]}", int(m[1]), m[3], int(m[4])))] = b["real_time"]
        except (OSError, ValueError):
            pass
mean = lambda xs: sum(xs) / len(xs) if xs else float("nan")
t = {}
for (v, r, row), x in ms.items():
    t.setdefault((v, row), []).append(x)
rows = sorted({row for (_, row) in t})
print("Per row: ms (mean over rounds); x 06: dense06 ms of the same variant and round set / this row's ms "
      "(density 1.0 only); main / variant: the speed-up.\n")
print("| kernel | D | density | seqlen | " + " | ".join(f"{v} ms" for v in variants) + " | "
      + " | ".join(f"{v} x 06" for v in variants) + " | " + " | ".join(f"main / {v}" for v in variants[1:]) + " |")
print("|" + "---|" * (4 + 2 * len(variants) + len(variants) - 1))
for row in rows:
    m = {v: mean(t.get((v, row), [])) for v in variants}
    d06 = {v: mean(t.get((v, ("dense06", row[1], "1.00", row[3])), [])) for v in variants}
    x06 = [f"{d06[v] / m[v]:.3f}" if row[0] != "dense06" and row[2] == "1.00" else "-" for v in variants]
    print(f"| {row[0]} | {row[1]} | {row[2]} | {row[3]} | " + " | ".join(f"{m[v]:.3f}" for v in variants) + " | "
          + " | ".join(x06) + " | " + " | ".join(f"{m['main'] / m[v]:.3f}" for v in variants[1:]) + " |")
PY
step "done"
