#!/usr/bin/env bash
# 08's f32 pair on the tensor cores in 3xTF32 (05's tf32x3 step forward, backward_tf32x3.cu
# backward, chapter()'s f32 path up to D = 128) and the FFMA pair (fp32_chapter()): 08's tests
# (ctest -L 08_backward), compute-sanitizer on the f32 pair, then f32 D = 64 and 128, 1k-16k, both
# pairs and PyTorch's efficient backend in the same call. Logs go to OUTDIR.tgz.
#   bash docs/pending/check_tf32x3.sh OUTDIR [SEQLEN_MAX]   (TESTS=0: no ctest stage)
set -uo pipefail
out=${1:?OUTDIR}; max=${2:-16384}
w=$(mktemp -d); trap 'tar -C "$w" -czf "$out.tgz" .' EXIT
mkdir -p "$(dirname "$out")"
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
{ nvidia-smi; nvcc --version; } >"$w/env.txt" 2>&1
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release "${gen[@]}" >"$w/configure.log" 2>&1 || exit 1
cmake --build build-gpu -j "$(nproc)" --target 08_backward_tests 08_backward_bench 08_backward >"$w/build.log" 2>&1 \
  || { tail -30 "$w/build.log"; exit 1; }
t=build-gpu/08_backward/08_backward_tests
if [[ ${TESTS:-1} == 1 ]]; then
  start=$(date +%s)
  OMP_NUM_THREADS=2 ctest --test-dir build-gpu -L '^08_backward$' -j "$(nproc)" --timeout 300 --output-on-failure >"$w/ctest.log" 2>&1
  echo "ctest rc=$? in $(( $(date +%s) - start )) s"; tail -4 "$w/ctest.log"
  grep -E "^\s+[0-9]+ - .*\((Failed|Timeout|SEGFAULT|Subprocess)" "$w/ctest.log" | head -20
fi
FA_TEST_VERBOSE=1 $t --gtest_filter='Shapes/Backward.*D64*f32_large_logits*:Shapes/Backward.*D128*f32_large_logits*:Shapes/BackwardFp32.*large_logits*:*Tf32x3*large_logits*' \
  >"$w/large_logits.log" 2>&1
for tool in memcheck racecheck; do
  compute-sanitizer --tool $tool --error-exitcode 9 $t --gtest_filter='*Tf32x3*Sq1013_Sk1013_D100_causal*:*Tf32x3*B1_H2x1_Sq127_Sk17_D37*:Shapes/Backward.*Sq1013_Sk1013_D64_causal_f32:Shapes/Backward.*B1_H2x1_Sq127_Sk17_D128_f32' \
    >"$w/sanitizer_$tool.log" 2>&1; echo "$tool rc=$? ($(grep -c '^\[       OK' "$w/sanitizer_$tool.log") tests)"
done
build-gpu/08_backward/08_backward --seqlen 1000 --head-dim 100 --causal --dtype f32 >"$w/runner.log" 2>&1; echo "runner rc=$?"
f='seqlen:(1024|2048|4096|8192|16384)/'
build-gpu/08_backward/08_backward_bench --max-seqlen "$max" --benchmark_filter="^bwd/08_backward(_ffma)?/f32/.*$f" \
  --benchmark_out="$w/bench_bwd.json" --benchmark_out_format=json >"$w/bench_bwd.log" 2>&1; echo "bwd bench rc=$?"
python3 scripts/compare_pytorch.py --dtypes f32 --backends efficient --directions bwd --max-seqlen "$max" \
  --out "$w/pytorch.json" >"$w/pytorch.log" 2>&1; echo "pytorch rc=$?"
