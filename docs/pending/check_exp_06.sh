#!/usr/bin/env bash
# 06's forward (tensor_core.cuh) against main plus docs/pending/exp_06_<VARIANT>.patch, in one device
# call: the builds side by side, each variant's 06_tensor_core_tests (the forward at every head dim,
# both dtypes and layouts, the refusals, the steps),
# compute-sanitizer on the last variant (san_<variant>_<tool>.log), Nsight Compute on main and the last variant at D = 128
# (NCU=1: warp-stall reasons and issue slots, bf16, full, 4k), then 06's benchmark for every variant
# and PyTorch FLASH's forward taking turns over ROUNDS rounds (bf16 and f16, D 64 and 128, full and
# causal, 2k-16k: the cells of issue 17's 1.05x bar). Logs and summary.md in OUTDIR.
#
#   NCU=1 ROUNDS=3 bash docs/pending/check_exp_06.sh OUTDIR VARIANT...
#
# STAGES (default build,tests,ncu,bench) picks stages; ROOT=DIR keeps the copies and builds there, so
# that a second call on the same warm machine can time what the first built and tested:
#   ROOT=/tmp/exp06 STAGES=build,tests,ncu NCU=1 ... ; then ROOT=/tmp/exp06 STAGES=bench ...
set -uo pipefail
cd "$(dirname "$0")/../.."
source docs/pending/variant.sh  # experiment_setup, experiment_stages, build_variants
out=${1:?usage: check_exp_06.sh OUTDIR VARIANT...}
experiment_setup "$out"  # variant.sh: step, PATH, gen
variants=(main "${@:2}")
rounds=${ROUNDS:-3}
experiment_stages build,tests,ncu,bench  # variant.sh: stages, want, root

if want build; then
  step "copies and builds: ${variants[*]} in $root"
  extra_targets=()
  build_variants exp_06 06_tensor_core_bench 06_tensor_core_tests 06_tensor_core || exit 1
fi

last=${variants[-1]}
if want tests; then
step "each variant's forward tests; compute-sanitizer on the last"
for v in "${variants[@]:1}"; do
  timeout 240 "$root/$v/build/06_tensor_core/06_tensor_core_tests" >"$out/tests_$v.log" 2>&1
  echo "$v: rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$out/tests_$v.log" | tr '\n' ' ')"
done | tee "$out/tests_summary.txt"
sanitize "$root/$last/build/06_tensor_core/06_tensor_core" "$last" \
  "--head-dim 128 --batch 2 --heads 4 --seqlen-q 300 --seqlen-k 333 --causal" \
  "--head-dim 64 --batch 1 --heads 4 --seqlen 1000 --dtype f16" \
  "--head-dim 112 --batch 2 --heads 8 --kv-heads 2 --seqlen-q 200 --seqlen-k 1000" |
  tee "$out/sanitizer_summary.txt"
fi

if want ncu && [[ ${NCU:-0} == 1 ]]; then
  step "Nsight Compute: main and $last, bf16, D = 128, full, 4k (FlashAttention-2's shape: batch 4, 16 heads)"
  for v in main "$last"; do
    ncu --set full --import-source no -k regex:tensor_core_kernel --launch-count 1 -o "$out/ncu_$v" \
      "$root/$v/build/06_tensor_core/06_tensor_core" --batch 4 --heads 16 --seqlen 4096 --head-dim 128 --iters 1 --no-check \
      >"$out/ncu_$v.log" 2>&1 || echo "ncu failed: $v"
    ncu -i "$out/ncu_$v.ncu-rep" --page details >"$out/ncu_${v}_details.txt" 2>&1
    ncu -i "$out/ncu_$v.ncu-rep" --page raw --csv >"$out/ncu_${v}_raw.csv" 2>&1
    ncu -i "$out/ncu_$v.ncu-rep" --page source --csv --print-source sass >"$out/ncu_${v}_sass.csv" 2>&1 || true
  done
fi

if want bench; then
step "benchmarks: every variant and PyTorch FLASH's forward taking turns, $rounds rounds"
filter="fwd/06_tensor_core/(bf16|f16)/D(64|128)/(full|causal)/seqlen:(2048|4096|8192|16384)/"
for round in $(seq "$rounds"); do
  for v in "${variants[@]}"; do
    for dt in bf16 f16; do
      "$root/$v/build/06_tensor_core/06_tensor_core_bench" --dtype "$dt" --benchmark_filter="$filter" \
        --benchmark_out="$out/bench_${v}_${dt}_$round.json" --benchmark_out_format=json >"$out/bench_${v}_${dt}_$round.log" 2>&1 ||
        echo "bench failed: $v $dt"
    done
  done
  PYTHONUNBUFFERED=1 python3 scripts/compare_pytorch.py --directions fwd --dtypes bf16,f16 --backends flash \
    --head-dims 64,128 --out "$out/pytorch_$round.json" >"$out/pytorch_$round.log" 2>&1 || tail -3 "$out/pytorch_$round.log"
done
fi

step "summary"
python3 - "$out" "$rounds" "${variants[@]}" <<'PY' | tee "$out/summary.md"
import json, re, sys, glob
out, rounds, variants = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
tf, fl = {}, {}
for f in glob.glob(f"{out}/bench_*.json"):
    v, r = re.match(r".*/bench_(\w+?)_(?:bf16|f16)_(\d+)\.json", f).groups()
    try:
        for b in json.load(open(f))["benchmarks"]:
            m = re.match(r"fwd/06_tensor_core/(\w+)/D(\d+)/(full|causal)/seqlen:(\d+)", b["name"])
            if m: tf[(v, int(r), (m[1], int(m[2]), m[3], int(m[4])))] = b["TFLOPS"]
    except (OSError, ValueError):
        pass
for r in range(1, rounds + 1):
    try:
        for x in json.load(open(f"{out}/pytorch_{r}.json"))["results"]:
            if "tflops" in x and x["seqlen"] >= 2048:
                fl[(r, (x["dtype"], x["head_dim"], "causal" if x["causal"] else "full", x["seqlen"]))] = x["tflops"]
    except (OSError, ValueError, KeyError):
        pass
cells = sorted({c for (_, _, c) in tf})
print("Per cell: TFLOP/s, mean over rounds; / flash: min over rounds of (round's TFLOP/s / the same round's FLASH).\n")
print("| dtype | D | mask | seqlen | flash | " + " | ".join(variants) + " | " + " | ".join(f"{v} / main" for v in variants[1:])
      + " | " + " | ".join(f"{v} / flash (min)" for v in variants) + " |")
print("|" + "---|" * (5 + 3 * len(variants) - 1))
mean = lambda xs: sum(xs) / len(xs) if xs else float("nan")
for c in cells:
    f = [fl[(r, c)] for r in range(1, rounds + 1) if (r, c) in fl]
    t = {v: [tf[(v, r, c)] for r in range(1, rounds + 1) if (v, r, c) in tf] for v in variants}
    worst = {v: min((tf[(v, r, c)] / fl[(r, c)] for r in range(1, rounds + 1) if (v, r, c) in tf and (r, c) in fl), default=float("nan")) for v in variants}
    row = f"| {c[0]} | {c[1]} | {c[2]} | {c[3]} | {mean(f):.1f} | " + " | ".join(f"{mean(t[v]):.1f}" for v in variants)
    row += " | " + " | ".join(f"{mean(t[v]) / mean(t['main']):.3f}" for v in variants[1:])
    row += " | " + " | ".join(f"{worst[v]:.3f}" for v in variants)
    print(row + " |")
PY
step "done"
