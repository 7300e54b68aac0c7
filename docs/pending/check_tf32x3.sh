#!/usr/bin/env bash
# The fp32 pair on the tensor cores in 3xTF32 -- 05's tf32x3 step (forward) and 08's
# backward_tf32x3.cu -- against the FFMA pair: their tests (errors printed next to the FFMA
# kernels' on the large-logit inputs), compute-sanitizer, then f32 D = 64 and 128, 1k/4k/16k, both
# pairs and PyTorch's efficient backend in the same call. Logs go to OUTDIR.tgz. The backward is in
# exp_08_tf32x3.patch: `git apply docs/pending/exp_08_tf32x3.patch` first (README here).
#   [SKIP_FWD=1] bash docs/pending/check_tf32x3.sh OUTDIR [SEQLEN_MAX]   (SKIP_FWD: the backward only)
set -uo pipefail
out=${1:?OUTDIR}; max=${2:-16384}
w=$(mktemp -d); trap 'tar -C "$w" -czf "$out.tgz" .' EXIT
mkdir -p "$(dirname "$out")"
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
{ nvidia-smi; nvcc --version; } >"$w/env.txt" 2>&1
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release "${gen[@]}" >"$w/configure.log" 2>&1 || exit 1
cmake --build build-gpu -j "$(nproc)" --target 08_backward_tests 08_backward_bench 05_flash_v2_tests \
  05_flash_v2_steps_bench 05_flash_v2_bench >"$w/build.log" 2>&1 || { tail -30 "$w/build.log"; exit 1; }
t=build-gpu/08_backward/08_backward_tests
$t --gtest_filter='*Tf32x3*' >"$w/tests_08_tf32x3.log" 2>&1; echo "08 tf32x3 tests rc=$?"; grep -E "PASSED|FAILED  \]" "$w/tests_08_tf32x3.log" | tail -20
build-gpu/05_flash_v2/05_flash_v2_tests --gtest_filter='*tf32x3*' >"$w/tests_05_tf32x3.log" 2>&1; echo "05 tf32x3 tests rc=$?"
FA_TEST_VERBOSE=1 $t --gtest_filter='*BackwardFp32*large_logits*:*Backward.*D64*f32_large_logits*:*Backward.*D128*f32_large_logits*:*Tf32x3*large_logits*' \
  >"$w/large_logits.log" 2>&1
FA_TEST_VERBOSE=1 build-gpu/05_flash_v2/05_flash_v2_tests --gtest_filter='*Steps*/chapter_D128*:*Steps*/tf32x3_D128*' >"$w/fwd_verbose.log" 2>&1
# The forwards' O and LSE errors on the large-logit inputs: the tf32x3 step (its Shapes/Forward
# suite in 08's tests, from the patch) and 05's chapter kernel.
FA_TEST_VERBOSE=1 $t --gtest_filter='Shapes/Forward.*large_logits*' >"$w/fwd_large_logits_tf32x3.log" 2>&1
FA_TEST_VERBOSE=1 build-gpu/05_flash_v2/05_flash_v2_tests --gtest_filter='Shapes/Forward.*D64*large_logits*:Shapes/Forward.*D128*large_logits*' \
  >"$w/fwd_large_logits_chapter.log" 2>&1
for tool in memcheck racecheck; do
  compute-sanitizer --tool $tool --error-exitcode 9 $t --gtest_filter='*Tf32x3*Sq1013_Sk1013_D100_causal*:*Tf32x3*B1_H2x1_Sq127_Sk17_D64*' \
    >"$w/sanitizer_$tool.log" 2>&1; echo "$tool rc=$?"
done
f='seqlen:(1024|4096|16384)/'
build-gpu/08_backward/08_backward_bench --max-seqlen "$max" --benchmark_filter="^bwd/08_backward(_tf32x3)?/f32/.*$f" \
  --benchmark_out="$w/bench_bwd.json" --benchmark_out_format=json >"$w/bench_bwd.log" 2>&1; echo "bwd bench rc=$?"
[[ ${SKIP_FWD:-0} == 1 ]] || build-gpu/05_flash_v2/05_flash_v2_bench --benchmark_filter="$f" --benchmark_out="$w/bench_fwd.json" \
  --benchmark_out_format=json >"$w/bench_fwd.log" 2>&1; echo "fwd bench rc=$?"
[[ ${SKIP_FWD:-0} == 1 ]] || build-gpu/05_flash_v2/05_flash_v2_steps_bench --step tf32x3 --benchmark_filter="$f" --benchmark_out="$w/bench_fwd_step.json" \
  --benchmark_out_format=json >"$w/bench_fwd_step.log" 2>&1; echo "fwd step bench rc=$?"
python3 scripts/compare_pytorch.py --dtypes f32 --backends efficient --directions "$([[ ${SKIP_FWD:-0} == 1 ]] && echo bwd || echo fwd,bwd)" --max-seqlen "$max" \
  --out "$w/pytorch.json" >"$w/pytorch.log" 2>&1; echo "pytorch rc=$?"
