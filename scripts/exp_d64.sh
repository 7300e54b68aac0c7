#!/usr/bin/env bash
# Temporary: D = 64 with three consumer warpgroups (steps x6, x7) against v1. Not committed.
set -u
out=${OUT:-/tmp/out}; mkdir -p "$out"; res=/tmp/res; mkdir -p $res
export PATH=$PATH:/usr/local/cuda/bin
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
t0=$(date +%s)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "${gen[@]}" >"$res/configure.log" 2>&1 || { tail -30 "$res/configure.log"; exit 1; }
cmake --build build -j16 --target 09_flash_v3_tests 09_flash_v3_steps_bench >"$res/build.log" 2>&1 || { grep -B2 -A8 error "$res/build.log" | head -60; exit 1; }
echo "build $(( $(date +%s) - t0 )) s"
B=build/09_flash_v3
timeout 200 $B/09_flash_v3_tests --gtest_brief=1 > "$res/test_all.log" 2>&1; echo "all 09 tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $res/test_all.log | tr '\n' ' ')"; grep -E "^\[  FAILED" $res/test_all.log | head
grep -c "x6_three\|x7_three" $res/test_all.log
timeout 100 compute-sanitizer --tool memcheck $B/09_flash_v3_tests --gtest_filter='*x6*:*x7*' > "$res/memcheck.log" 2>&1; echo "memcheck rc=$? $(grep -E 'ERROR SUMMARY' $res/memcheck.log)"
echo "t $(( $(date +%s) - t0 )) s"
for round in 1 2; do for st in v1_one_warpgroup x6_three x7_three_overlap; do
  $B/09_flash_v3_steps_bench --step $st --head-dims 64 --max-seqlen 8192 --benchmark_filter='fwd/.*seqlen:(1024|2048|4096|8192)' 2>/dev/null | grep -E "^fwd/" | sed -E 's/\/min_time:[0-9.]*//; s/\/manual_time//' | awk -v r=$round '{for(i=1;i<=NF;i++) if($i ~ /^TFLOPS=/) print "r"r, $1, $i}'
done; done | tee "$res/bench.txt"
echo "t $(( $(date +%s) - t0 )) s"
tar czf "$out/res.tgz" -C $res .
