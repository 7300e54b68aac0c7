#!/usr/bin/env bash
# Temporary: FP8 step at Bc = 128 (variant 0) against Bc = 192 (1: a vote a tile, 2: a vote a row). Not committed.
set -u
out=${OUT:-/tmp/out}; mkdir -p "$out"; res=/tmp/res; mkdir -p $res
export PATH=$PATH:/usr/local/cuda/bin
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
t0=$(date +%s)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "${gen[@]}" >"$res/configure.log" 2>&1 || { tail -30 "$res/configure.log"; exit 1; }
cmake --build build -j16 --target 09_flash_v3_tests 09_flash_v3_steps_bench >"$res/build.log" 2>&1 || { grep -B2 -A8 error "$res/build.log" | head -60; exit 1; }
echo "build $(( $(date +%s) - t0 )) s"
B=build/09_flash_v3
for v in 3 4 1 0; do
  FA_FP8_VARIANT=$v timeout 120 $B/09_flash_v3_tests --gtest_filter='*Fp8*' > "$res/test_v$v.log" 2>&1; echo "tests v$v rc=$? $(grep -E '^\[  (PASSED|FAILED)' $res/test_v$v.log | tr '\n' ' ')"
  grep -E "FAILED|Failure|error" $res/test_v$v.log | head -8
done
FA_FP8_VARIANT=3 timeout 150 compute-sanitizer --tool memcheck $B/09_flash_v3_tests --gtest_filter='*Fp8Forward*:-*long_4096*:*many_tiles*' > "$res/memcheck_v3.log" 2>&1; echo "memcheck v3 rc=$? $(grep -E "ERROR SUMMARY" $res/memcheck_v3.log)"
echo "t $(( $(date +%s) - t0 )) s"
timeout 200 $B/09_flash_v3_tests --gtest_brief=1 > "$res/test_all.log" 2>&1; echo "all 09 tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $res/test_all.log | tr '\n' ' ')"; grep -E "^\[  FAILED" $res/test_all.log | head
echo "t $(( $(date +%s) - t0 )) s"
for round in 1 2; do for v in 0 1 3 4; do
  FA_FP8_VARIANT=$v $B/09_flash_v3_steps_bench --step v6_fp8 --benchmark_filter='seqlen:(4096|8192|16384)' 2>/dev/null | grep -E "^fwd/" | sed -E 's/min_time:0.300\/manual_time//' | awk -v v=$v -v r=$round '{for(i=1;i<=NF;i++) if($i ~ /^TFLOPS=/) print "r"r" v"v, $1, $i}'
done; done | tee "$res/bench.txt"
echo "t $(( $(date +%s) - t0 )) s"
for v in 3; do
  FA_FP8_VARIANT=$v ncu --clock-control none --set full --kernel-name regex:flash_v3_kernel --launch-skip 2 --launch-count 1 -o "$res/fp8_v$v" \
    $B/09_flash_v3_steps_bench --step v6_fp8 --benchmark_filter='full/seqlen:8192' > "$res/ncu_v$v.log" 2>&1
  ncu -i "$res/fp8_v$v.ncu-rep" --page details --print-units base > "$res/fp8_v$v.details.txt" 2>&1
  ncu -i "$res/fp8_v$v.ncu-rep" --page raw --csv > "$res/fp8_v$v.raw.csv" 2>&1
  ncu -i "$res/fp8_v$v.ncu-rep" --page source --csv --print-source sass > "$res/fp8_v$v.sass.csv" 2>&1
  rm -f "$res/fp8_v$v.ncu-rep"
done
tar czf "$out/res.tgz" -C $res .
echo "total $(( $(date +%s) - t0 )) s"
