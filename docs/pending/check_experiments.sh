#!/usr/bin/env bash
# Issue 17/21's candidate changes to 08's tensor-core backward, each measured against main in one
# device call (README.md here says why each): every variant is main plus one patch
# (docs/pending/exp_08_*.patch), built side by side (in parallel), checked against the CPU
# reference on a few awkward shapes, then timed interleaved with main, two rounds, with PyTorch
# FLASH's backward on the same shapes in the same call. Logs and a summary table land in OUTDIR.
#
#   bash docs/pending/check_experiments.sh OUTDIR [VARIANT...]    (session 14: 7 minutes, 4 variants)
#
# VARIANTs: the exp_08_<name>.patch names to try (all of them by default). Environment: HEAD_DIMS
# (default 64,128,256), SEQLENS (default 4096,16384; a regex alternation is built from both),
# STAGES (default build,check,tests,bench) picks stages and ROOT=DIR keeps the copies and builds
# there, so that a second call on the same warm machine can go on from the first's builds.
# TESTS=0 to skip each variant's `ctest -L 08_backward` and compute-sanitizer runs (SAN_HEAD_DIM: the
# sanitized problem's head dim, 128 by default; TEST_FILTER: run 08_backward_tests with that
# --gtest_filter instead of the whole label), SPARSE=1 to time the block-sparse backward too.
set -uo pipefail
cd "$(dirname "$0")/../.."
source docs/pending/variant.sh  # experiment_setup, experiment_stages, build_variants
out=${1:?usage: check_experiments.sh OUTDIR}
experiment_setup "$out"  # variant.sh: step, PATH, gen
variants=(main)
if (($# > 1)); then variants+=("${@:2}"); else
  for p in docs/pending/exp_08_*.patch; do [[ -e $p ]] && variants+=("$(basename "$p" .patch | sed 's/^exp_08_//')"); done
fi
head_dims=${HEAD_DIMS:-64,128,256}
seqlens=${SEQLENS:-4096,16384}

stages=build,check,tests,bench
[[ ${TESTS:-1} == 1 ]] || stages=build,check,bench
experiment_stages "$stages"  # variant.sh: stages (STAGES overrides), want, root (ROOT: reuse a warm machine's builds)

if want build; then
  step "copies and builds: ${variants[*]} in $root"
  extra_targets=()
  want tests && extra_targets=(08_backward_tests 08_backward_cpu_tests)  # the variants' tests; main is only timed
  build_variants exp_08 08_backward 08_backward_bench || exit 1
  for v in "${variants[@]}"; do grep -hE "spill|error" "$out/build_$v.log" | head -3; done
fi

if want check; then
step "correctness: each variant against the CPU reference (exit 0: a match)"
for v in "${variants[@]}"; do
  exe=$root/$v/build/08_backward/08_backward
  for args in "--head-dim 64 --seqlen-q 777 --seqlen-k 1001 --causal" "--head-dim 128 --seqlen 1000 --heads 8 --kv-heads 2" \
              "--head-dim 192 --seqlen 700" "--head-dim 256 --seqlen-q 513 --seqlen-k 900 --causal"; do
    d=$(sed -E 's/.*--head-dim ([0-9]+).*/\1/' <<<"$args")
    [[ ",$head_dims," == *",$d,"* ]] || continue  # only the head dims being timed (HEAD_DIMS)
    for dt in bf16 f16; do
      "$exe" --dtype $dt --batch 2 --heads 4 $args >>"$out/check_$v.log" 2>&1; echo "$v $dt $args: rc=$?"
    done
  done
done | tee "$out/correctness.txt" | grep -v "rc=0" || true
echo "$(grep -c 'rc=0' "$out/correctness.txt") of $(wc -l <"$out/correctness.txt") checks pass"
fi

if want tests; then
  step "tests and sanitizers of each variant but main"
  for v in "${variants[@]:1}"; do
    if [[ -n ${TEST_FILTER:-} ]]; then  # a subset, one process (the whole label takes more than one call)
      timeout 420 "$root/$v/build/08_backward/08_backward_tests" --gtest_filter="$TEST_FILTER" >"$out/ctest_$v.log" 2>&1
      echo "$v: rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$out/ctest_$v.log" | tr '\n' ' ')"
    else
      ctest --test-dir "$root/$v/build" -L 08_backward -j "$(nproc)" --timeout 300 >"$out/ctest_$v.log" 2>&1
      echo "$v: $(grep -E 'tests passed' "$out/ctest_$v.log")"
    fi
    grep -E "\((Failed|Timeout|SEGFAULT|Subprocess)" "$out/ctest_$v.log" | head -10
    for tool in memcheck racecheck synccheck; do
      compute-sanitizer --tool "$tool" --error-exitcode 99 "$root/$v/build/08_backward/08_backward" --dtype bf16 --batch 1 \
        --heads 2 --seqlen 300 --head-dim "${SAN_HEAD_DIM:-128}" --causal --iters 1 >"$out/san_${v}_$tool.log" 2>&1
      echo "$v $tool: rc=$?"
    done
  done
fi

if want bench; then
step "benchmarks: every variant, interleaved, two rounds"
filter="bwd/08_backward/(bf16|f16)/D(${head_dims//,/|})/(full|causal)/seqlen:(${seqlens//,/|})/"
# SPARSE=1: the block-sparse backward's rows too (bf16, densities 1.0 to 0.1, same dims and lengths).
[[ ${SPARSE:-0} == 1 ]] && filter="$filter|bwd_sparse/08_backward/bf16/D(${head_dims//,/|})/.*/seqlen:(${seqlens//,/|})/"
for round in 1 2; do
  for v in "${variants[@]}"; do
    "$root/$v/build/08_backward/08_backward_bench" --head-dims "$head_dims" --benchmark_filter="$filter" --benchmark_out="$out/bench_${v}_$round.json" \
      --benchmark_out_format=json >"$out/bench_${v}_$round.log" 2>&1 || echo "bench failed: $v"
  done
done

step "PyTorch FLASH backward, same shapes"
PYTHONUNBUFFERED=1 python3 scripts/compare_pytorch.py --directions bwd --dtypes bf16,f16 --backends flash \
  --head-dims "$head_dims" --max-seqlen "${seqlens##*,}" --out "$out/pytorch_bwd.json" >"$out/pytorch_bwd.log" 2>&1 || tail -3 "$out/pytorch_bwd.log"

fi

step "summary"
python3 - "$out" "${variants[@]}" <<'PY' | tee "$out/summary.md"
import json, re, sys
out, variants = sys.argv[1], sys.argv[2:]
def key(name):
    m = re.match(r"bwd/08_backward/(\w+)/D(\d+)/(full|causal)/seqlen:(\d+)", name)
    return (m[1], int(m[2]), m[3], int(m[4])) if m else None
tf, sparse = {}, {}
for v in variants:
    for r in (1, 2):
        try:
            for b in json.load(open(f"{out}/bench_{v}_{r}.json"))["benchmarks"]:
                k = key(b["name"])
                if k: tf.setdefault((v, k), []).append(b["TFLOPS"])
                else: sparse.setdefault((v, b["name"].split("/min_time")[0]), []).append(b["TFLOPS"])
        except (OSError, ValueError):
            pass
flash = {}
try:
    for line in open(f"{out}/pytorch_bwd.log"):
        m = re.search(r"bwd (\w+) D=(\d+) (full|causal)\s+seqlen=\s*(\d+) flash\s+[\d.]+ ms\s+([\d.]+) TFLOP", line)
        if m:
            flash[(m[1], int(m[2]), m[3], int(m[4]))] = float(m[5])
except OSError:  # no bench stage in this call
    pass
cells = sorted({k for (_, k) in tf})
print("| dtype | D | mask | seqlen | flash | " + " | ".join(variants) + " | " + " | ".join(f"{v} / main" for v in variants[1:]) + " | best / flash |")
print("|" + "---|" * (5 + 2 * len(variants)))
for c in cells:
    mean = {v: sum(tf.get((v, c), [0])) / max(1, len(tf.get((v, c), []))) for v in variants}
    base = mean["main"] or 1
    best = max(mean.values())
    f = flash.get(c)
    row = f"| {c[0]} | {c[1]} | {c[2]} | {c[3]} | {f or '-'} | " + " | ".join(f"{mean[v]:.1f}" for v in variants)
    row += " | " + " | ".join(f"{mean[v] / base:.3f}" for v in variants[1:])
    print(row + (f" | {best / f:.3f} |" if f else " | - |"))
if sparse:  # the block-sparse rows (SPARSE=1): TFLOP/s over the active blocks, no PyTorch anchor
    print()
    print("| block-sparse | " + " | ".join(variants) + " | " + " | ".join(f"{v} / main" for v in variants[1:]) + " |")
    print("|" + "---|" * (1 + 2 * len(variants) - 1))
    for name in sorted({n for (_, n) in sparse}):
        mean = {v: sum(sparse.get((v, name), [0])) / max(1, len(sparse.get((v, name), []))) for v in variants}
        base = mean["main"] or 1
        print(f"| {name} | " + " | ".join(f"{mean[v]:.1f}" for v in variants) + " | " +
              " | ".join(f"{mean[v] / base:.3f}" for v in variants[1:]) + " |")
PY
step "done"
