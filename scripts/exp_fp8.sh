#!/usr/bin/env bash
# Temporary experiment (not committed): FP8 step variants, traces, clocks.
set -u
out=${OUT:-/tmp/out}; res=/tmp/res; rm -rf $res; mkdir -p "$out" $res
export PATH=$PATH:/usr/local/cuda/bin
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
t0=$(date +%s)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "${gen[@]}" >"$res/configure.log" 2>&1 || { tail -30 "$res/configure.log"; exit 1; }
cmake --build build -j16 --target 09_flash_v3_tests 09_flash_v3_steps_bench >"$res/build.log" 2>&1 || { grep -B2 -A8 error "$res/build.log" | head -60; exit 1; }
echo "build $(( $(date +%s) - t0 )) s"
B=build/09_flash_v3
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,power.limit --format=csv
for v in ${TESTV:-0 2 4 7}; do
  FA_FP8_VARIANT=$v timeout 120 $B/09_flash_v3_tests --gtest_filter='*Fp8*' > "$res/test_v$v.log" 2>&1; echo "tests v$v rc=$? $(grep -E '^\[  (PASSED|FAILED)' $res/test_v$v.log | tr '\n' ' ')"
  grep -E "FAILED|Failure" $res/test_v$v.log | head -5
done
echo "t $(( $(date +%s) - t0 )) s"
for v in ${TRACEV:-1 3 5}; do for m in full causal; do
  FA_TRACE_FILE=$res/trace_${v}_$m.csv FA_FP8_VARIANT=$v $B/09_flash_v3_steps_bench --step v6_fp8 --benchmark_filter="$m/seqlen:8192" --benchmark_min_time=0.05s > /dev/null 2>&1
done; done
echo "t $(( $(date +%s) - t0 )) s"
nvidia-smi --query-gpu=clocks.sm,power.draw --format=csv,noheader -lms 250 > "$res/clocks.csv" 2>&1 & smi=$!
for round in 1 2; do for v in ${BENCHV:-0 2 4 6 7}; do
  FA_FP8_VARIANT=$v $B/09_flash_v3_steps_bench --step v6_fp8 --benchmark_filter='seqlen:(4096|8192|16384)' 2>/dev/null | grep -E "^fwd/" | awk -v v=$v -v r=$round '{for(i=1;i<=NF;i++) if($i ~ /^TFLOPS=/) print "r"r" v"v, $1, $i}'
  echo "clock $(tail -1 $res/clocks.csv)"
done; done | tee "$res/bench.txt"
kill $smi
echo "t $(( $(date +%s) - t0 )) s"
if [[ -n ${NCUV:-} ]]; then for v in $NCUV; do
  FA_FP8_VARIANT=$v ncu --clock-control none --set full --import-source no --kernel-name regex:flash_v3_kernel --launch-skip 2 --launch-count 1 -o "$res/fp8_v$v" \
    $B/09_flash_v3_steps_bench --step v6_fp8 --benchmark_filter='full/seqlen:8192' --benchmark_min_time=0.05s > "$res/ncu_v$v.log" 2>&1
  ncu -i "$res/fp8_v$v.ncu-rep" --page details --print-units base > "$res/fp8_v$v.details.txt" 2>&1
  ncu -i "$res/fp8_v$v.ncu-rep" --page source --csv --print-source sass > "$res/fp8_v$v.sass.csv" 2>&1
  rm -f "$res/fp8_v$v.ncu-rep"
done; fi
tar czf "$out/res.tgz" -C $res .
echo "total $(( $(date +%s) - t0 )) s"
