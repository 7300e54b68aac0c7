#!/usr/bin/env bash
# One device call for 08's [B, S, H, D] backward (session 17): 06's and 08's tests (their bshd
# shapes included), compute-sanitizer on a bshd backward, the Python extension and its tests, and
# the same shapes timed in both layouts by the chapters' executables.
#   bash docs/pending/check_bshd.sh OUTDIR      (session 17: ctest 6.5 min, the rest 4.7 min: two calls)
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: check_bshd.sh OUTDIR}; mkdir -p "$out"
step() { echo "== $(date +%T) $*" | tee -a "$out/steps.log"; }
export PATH="/usr/local/cuda/bin:$PATH"
step build
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -G Ninja >"$out/configure.log" 2>&1
(cmake -S . -B build-python -DCMAKE_BUILD_TYPE=Release -DFA_PYTHON_EXTENSION=ON -G Ninja >"$out/python_configure.log" 2>&1 &&
  cmake --build build-python -j 6 --target flash_tutorial_C >"$out/python_build.log" 2>&1 || echo "PYTHON BUILD FAILED") &
cmake --build build-gpu -j 10 --target 08_backward/all 06_tensor_core/all common/all >"$out/build.log" 2>&1 || { echo BUILD FAILED; tail -30 "$out/build.log"; }
step "ctest 08 + 06"
ctest --test-dir build-gpu -L '08_backward|06_tensor_core' -j 16 --timeout 400 >"$out/ctest.log" 2>&1
grep -E "tests passed|tests failed" "$out/ctest.log"; grep -E "\((Failed|Timeout|SEGFAULT)" "$out/ctest.log" | head
echo "bshd cases run: $(grep -c '_bshd.*Passed' "$out/ctest.log")"
step sanitizers
b08=build-gpu/08_backward/08_backward
for tool in memcheck racecheck synccheck; do
  compute-sanitizer --tool $tool --error-exitcode 99 $b08 --layout bshd --batch 2 --heads 4 --kv-heads 2 --seqlen-q 77 \
    --seqlen-k 331 --causal --head-dim 72 --dtype bf16 --iters 1 >"$out/$tool.log" 2>&1; echo "$tool rc=$?"
done
compute-sanitizer --tool memcheck --error-exitcode 99 $b08 --layout bshd --batch 2 --heads 4 --kv-heads 1 --seqlen 200 \
  --head-dim 256 --dtype f16 --deterministic --iters 1 >"$out/memcheck256.log" 2>&1; echo "memcheck D256 deterministic rc=$?"
$b08 --layout bshd --dtype f32 --head-dim 64 --iters 1; echo "f32 bshd (expect 2): rc=$?"
for d in 64 128; do $b08 --layout bshd --batch 2 --heads 16 --kv-heads 4 --seqlen 2048 --head-dim $d --causal --dtype bf16 --iters 3 | head -4; done
step "bhsd against bshd (the executables' median of 20, no check)"
for round in 1 2; do for d in 64 128 256; do for c in "" --causal; do for l in bhsd bshd; do
  $b08 --layout $l --batch 4 --heads 16 --seqlen 4096 --head-dim $d $c --dtype bf16 --no-check --iters 20 | sed -n 2p | cut -c1-118
done; done; done; done
for d in 80 128; do for l in bhsd bshd; do
  build-gpu/06_tensor_core/06_tensor_core --layout $l --batch 4 --heads 16 --seqlen 4096 --head-dim $d --no-check --iters 20 | cut -c1-110
done; done
wait
step pytest
rm -rf /tmp/torchinductor_$(whoami)
PYTHONPATH=python python3 -m pytest python/tests -q -rs >"$out/pytest.log" 2>&1; echo "pytest rc=$?"; tail -3 "$out/pytest.log"
step done
