#!/usr/bin/env bash
# One device call for 06's [B, S, H, D] layout (session 16; docs/pending/README.md): 06's tests (the
# bshd shapes included), memcheck on a bshd problem, the Python extension and its tests, 06's
# benchmark, and the same shapes timed in both layouts by the chapter's executable.
#   bash docs/pending/check_bshd.sh OUTDIR      (session 16: 4.4 minutes)
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: check_bshd.sh OUTDIR}; mkdir -p "$out"
step() { echo "== $(date +%T) $*" | tee -a "$out/steps.log"; }
export PATH="/usr/local/cuda/bin:$PATH"
step build
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -G Ninja >"$out/configure.log" 2>&1
cmake --build build-gpu -j 16 --target 06_tensor_core/all common/all >"$out/build.log" 2>&1 || { echo BUILD FAILED; tail -30 "$out/build.log"; }
(cmake -S . -B build-python -DCMAKE_BUILD_TYPE=Release -DFA_PYTHON_EXTENSION=ON -G Ninja >"$out/python_configure.log" 2>&1 &&
  cmake --build build-python -j 8 --target flash_tutorial_C >"$out/python_build.log" 2>&1 || echo "PYTHON BUILD FAILED") &
step "ctest 06 + common cpu"
ctest --test-dir build-gpu -L '06_tensor_core' -j 16 --timeout 300 >"$out/ctest.log" 2>&1
grep -E "tests passed|tests failed" "$out/ctest.log"; grep -E "\((Failed|Timeout|SEGFAULT)" "$out/ctest.log" | head
grep -c "_bshd" "$out/ctest.log"
step memcheck
compute-sanitizer --tool memcheck --error-exitcode 99 build-gpu/06_tensor_core/06_tensor_core --layout bshd --batch 2 --heads 4 \
  --kv-heads 2 --seqlen-q 77 --seqlen-k 331 --causal --head-dim 72 --dtype bf16 --iters 1 >"$out/memcheck.log" 2>&1; echo "memcheck rc=$?"
for d in 64 128; do build-gpu/06_tensor_core/06_tensor_core --layout bshd --batch 4 --heads 16 --kv-heads 4 --seqlen 2048 --head-dim $d --causal --iters 5; done
step bench
build-gpu/06_tensor_core/06_tensor_core_bench --benchmark_filter='fwd/06_tensor_core/bf16/D(64|128)/(full|causal)/seqlen:(4096|16384)/' \
  --benchmark_out="$out/bench06.json" --benchmark_out_format=json >"$out/bench06.log" 2>&1; grep -E "TFLOP" "$out/bench06.log" | head -12
step "bhsd against bshd (the executable's median of 20, no check)"
for d in 64 128; do for c in "" --causal; do for l in bhsd bshd; do
  build-gpu/06_tensor_core/06_tensor_core --layout $l --batch 4 --heads 16 --seqlen 4096 --head-dim $d $c --no-check --iters 20 | cut -c1-110
done; done; done
wait
step pytest
PYTHONPATH=python python3 -m pytest python/tests -q -rs >"$out/pytest.log" 2>&1; echo "pytest rc=$?"; tail -3 "$out/pytest.log"
step done
