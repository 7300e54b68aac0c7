#!/usr/bin/env bash
# Experiment (deleted with the experiment's revert): chapter 09 A/B/C on a lent Hopper.
#   tree b: this tree (the deferred Q-slot release alone);
#   tree a: b with scripts/exp_09.patch reversed (the chapter as on main).
# Builds the three (09_flash_v3_bench, _steps_bench, _tests), runs b's tests, then the benchmarks in
# turns a, b, c, a, b, c, ... into $OUT (<kind>_<tree>_<round>.json) and prints each row's medians.
#   bash scripts/exp_09.sh [ROUNDS]
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/exp09}
rounds=${1:-3}
mkdir -p "$out"
[[ -x /usr/local/cuda/bin/nvcc ]] && export PATH="/usr/local/cuda/bin:$PATH"
t0=$(date +%s)
# Trees and builds live under build/ (kept between calls on a warm machine); a second call reuses them.
for t in a; do
  [[ -f build/exp_src_$t/.patched ]] && continue
  rm -rf "build/exp_src_$t" && mkdir -p "build/exp_src_$t"
  tar --exclude='./build*' --exclude='./.git' -cf - . | tar -xf - -C "build/exp_src_$t"
  patch_file=scripts/exp_09.patch
  (cd "build/exp_src_$t" && patch -R -p1 <"$patch_file") >"$out/patch_$t.log" 2>&1 || { cat "$out/patch_$t.log"; exit 1; }
  touch "build/exp_src_$t/.patched"
done
targets=(09_flash_v3_bench 09_flash_v3_steps_bench 09_flash_v3_tests)
for t in a b; do
  src=.; [[ $t != b ]] && src=build/exp_src_$t
  { cmake -S "$src" -B "build/exp_$t" -G Ninja -DCMAKE_BUILD_TYPE=Release &&
      cmake --build "build/exp_$t" -j 6 --target "${targets[@]}"; } >"$out/build_$t.log" 2>&1 &
done
wait
echo "built in $(($(date +%s) - t0)) s"
for t in a b; do [[ -x build/exp_$t/09_flash_v3/09_flash_v3_bench ]] || { tail -30 "$out/build_$t.log"; exit 1; }; done
b=build/exp_b/09_flash_v3
if [[ ${FA_EXP_TEST_LIMIT:-240} != 0 ]]; then
timeout "${FA_EXP_TEST_LIMIT:-240}" "$b"/09_flash_v3_tests --gtest_filter="${FA_EXP_TESTS:-*}" >"$out/tests_b.log" 2>&1
echo "tests (b): rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$out/tests_b.log" | tr '\n' ' ') at $(($(date +%s) - t0)) s"
fi
for r in $(seq "$rounds"); do
  for t in a b; do
    d=build/exp_$t/09_flash_v3
    "$d"/09_flash_v3_bench --head-dims 64,128 --benchmark_filter="${FA_EXP_BENCH:-/D(64|128)/.*seqlen:(1024|2048|4096)/}" \
      --benchmark_out="$out/bench_${t}_$r.json" --benchmark_out_format=json >"$out/bench_${t}_$r.log" 2>&1
    "$d"/09_flash_v3_steps_bench --step v6_fp8 --benchmark_filter="${FA_EXP_FP8:-seqlen:(8192|16384)/}" \
      --benchmark_out="$out/steps_fp8_${t}_$r.json" --benchmark_out_format=json >"$out/steps_fp8_${t}_$r.log" 2>&1
    # Short sequences at D = 128: v7's three consumers (whose partial 192-row tiles the idle turns
    # make cheaper) beside the chapter's v5 (the bench rows above).
    "$d"/09_flash_v3_steps_bench --step v7_three_consumers --head-dims 128 \
      --benchmark_filter="${FA_EXP_STEPS:-/D128/.*seqlen:(1024|2048)/}" \
      --benchmark_out="$out/steps_v7_${t}_$r.json" --benchmark_out_format=json >"$out/steps_v7_${t}_$r.log" 2>&1
  done
  echo "round $r done at $(($(date +%s) - t0)) s"
done
python3 - "$out" "$rounds" <<'PY'
import json, sys, statistics
out, rounds = sys.argv[1], int(sys.argv[2])
def rows(path):
    try:
        return {b["name"]: b.get("TFLOPS") for b in json.load(open(path))["benchmarks"]}
    except (OSError, ValueError):
        return {}
for kind in ("bench", "steps_fp8", "steps_v7"):
    runs = {t: [rows(f"{out}/{kind}_{t}_{r}.json") for r in range(1, rounds + 1)] for t in "ab"}
    for name in runs["a"][0]:
        med = {}
        for t in "ab":
            vals = [x[name] for x in runs[t] if x.get(name)]
            med[t] = statistics.median(vals) if vals else float("nan")
        short = name.replace("/min_time:0.300/manual_time", "")
        print(f"{short:58s} a {med['a']:6.1f}  b {med['b']:6.1f} ({med['b'] / med['a']:.3f})")
PY
