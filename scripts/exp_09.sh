#!/usr/bin/env bash
# Experiment (deleted with the experiment's revert): chapter 09 A/B on a lent Hopper.
#   tree b: this tree; tree a: this tree with scripts/exp_09.patch reversed (the patch: git diff
#   BASE HEAD -- 09_flash_v3 common, written before the call).
# Builds both (09_flash_v3_bench, _steps_bench, _tests), runs b's tests, then the benchmarks in
# turns a, b, a, b, ... into $OUT (bench_<tree>_<round>.json, steps_<step>_<tree>_<round>.json).
#   bash scripts/exp_09.sh [ROUNDS]
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/exp09}
rounds=${1:-3}
mkdir -p "$out"
[[ -x /usr/local/cuda/bin/nvcc ]] && export PATH="/usr/local/cuda/bin:$PATH"
t0=$(date +%s)
rm -rf /tmp/exp_a && mkdir -p /tmp/exp_a
tar --exclude='./build*' --exclude='./.git' -cf - . | tar -xf - -C /tmp/exp_a
(cd /tmp/exp_a && patch -R -p1 <scripts/exp_09.patch) >"$out/patch.log" 2>&1 || { cat "$out/patch.log"; exit 1; }
targets=(09_flash_v3_bench 09_flash_v3_steps_bench 09_flash_v3_tests)
for t in a b; do
  src=.; [[ $t == a ]] && src=/tmp/exp_a
  { cmake -S "$src" -B "/tmp/exp_build_$t" -G Ninja -DCMAKE_BUILD_TYPE=Release &&
      cmake --build "/tmp/exp_build_$t" -j 8 --target "${targets[@]}"; } >"$out/build_$t.log" 2>&1 &
done
wait
echo "built in $(($(date +%s) - t0)) s"
for t in a b; do [[ -x /tmp/exp_build_$t/09_flash_v3/09_flash_v3_bench ]] || { tail -30 "$out/build_$t.log"; exit 1; }; done
b=/tmp/exp_build_b/09_flash_v3
timeout "${FA_EXP_TEST_LIMIT:-240}" "$b"/09_flash_v3_tests --gtest_filter="${FA_EXP_TESTS:-*}" >"$out/tests_b.log" 2>&1
echo "tests (b): rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$out/tests_b.log" | tr '\n' ' ') in $(($(date +%s) - t0)) s"
for r in $(seq "$rounds"); do
  for t in a b; do
    d=/tmp/exp_build_$t/09_flash_v3
    "$d"/09_flash_v3_bench --head-dims 64,128 --benchmark_filter="${FA_EXP_BENCH:-/D64/.*seqlen:(1024|2048|4096)/}" \
      --benchmark_out="$out/bench_${t}_$r.json" --benchmark_out_format=json >"$out/bench_${t}_$r.log" 2>&1
    "$d"/09_flash_v3_steps_bench --step v6_fp8 --benchmark_filter="${FA_EXP_FP8:-seqlen:(8192|16384)/}" \
      --benchmark_out="$out/steps_fp8_${t}_$r.json" --benchmark_out_format=json >"$out/steps_fp8_${t}_$r.log" 2>&1
    # Short sequences at D = 128: the chapter's v5 against v7's three consumers (whose partial
    # 192-row tiles the idle turns make cheaper).
    for step in v5_overlap v7_three_consumers; do
      "$d"/09_flash_v3_steps_bench --step $step --head-dims 128 --benchmark_filter="${FA_EXP_STEPS:-bf16/D128/.*seqlen:(1024|2048)/}" \
        --benchmark_out="$out/steps_${step}_${t}_$r.json" --benchmark_out_format=json >"$out/steps_${step}_${t}_$r.log" 2>&1
    done
  done
  echo "round $r done at $(($(date +%s) - t0)) s"
done
python3 - "$out" "$rounds" <<'EOF'
import json, sys, statistics
out, rounds = sys.argv[1], int(sys.argv[2])
def rows(path):
    try:
        return {b["name"]: b.get("TFLOPS", b.get("TFLOP/s")) for b in json.load(open(path))["benchmarks"]}
    except (OSError, ValueError):
        return {}
for kind in ("bench", "steps_fp8", "steps_v5_overlap", "steps_v7_three_consumers"):
    a = [rows(f"{out}/{kind}_a_{r}.json") for r in range(1, rounds + 1)]
    b = [rows(f"{out}/{kind}_b_{r}.json") for r in range(1, rounds + 1)]
    for name in a[0]:
        va = [x[name] for x in a if x.get(name)]
        vb = [x[name] for x in b if x.get(name)]
        if va and vb:
            ma, mb = statistics.median(va), statistics.median(vb)
            print(f"{name:70s} a {ma:7.1f}  b {mb:7.1f}  b/a {mb / ma:.3f}  (a {va}, b {vb})")
EOF
