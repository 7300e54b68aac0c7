#!/usr/bin/env bash
# One device call for the [B, S, H, D] layout of 06's and 07's forwards and 08's backward (session
# 17): the chapters' tests (their bshd shapes included), compute-sanitizer on bshd problems, both
# layouts timed by the executables, and the Python tests. Writes OUTDIR and OUTDIR.tgz (a call
# brings back few files: copy the archive to $OUT).
#   LABELS='07_block_sparse' bash docs/pending/check_bshd.sh /tmp/x && cp /tmp/x.tgz $OUT/
# Session 17 on an H100: ctest of 08 + 06 6.5 minutes, of 07 3.6 minutes; a 10-minute call holds
# one of them with the rest (LABELS picks; TIMING=0 skips the timing).
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: check_bshd.sh OUTDIR}; mkdir -p "$out"
labels=${LABELS:-08_backward|06_tensor_core}
step() { echo "== $(date +%T) $*" | tee -a "$out/steps.log"; }
export PATH="/usr/local/cuda/bin:$PATH"
step build
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -G Ninja >"$out/configure.log" 2>&1
(cmake -S . -B build-python -DCMAKE_BUILD_TYPE=Release -DFA_PYTHON_EXTENSION=ON -G Ninja >"$out/python_configure.log" 2>&1 &&
  cmake --build build-python -j 6 --target flash_tutorial_C >"$out/python_build.log" 2>&1 || echo "PYTHON BUILD FAILED") &
cmake --build build-gpu -j 10 --target 06_tensor_core/all 07_block_sparse/all 08_backward/all common/all \
  >"$out/build.log" 2>&1 || { echo BUILD FAILED; tail -30 "$out/build.log"; }
step "ctest $labels"
ctest --test-dir build-gpu -L "$labels" -j 16 --timeout 400 >"$out/ctest.log" 2>&1
grep -E "tests passed|tests failed" "$out/ctest.log"; grep -E "\((Failed|Timeout|SEGFAULT)" "$out/ctest.log" | head
echo "bshd cases passed: $(grep -c '_bshd.*Passed' "$out/ctest.log")"
step sanitizers
shape="--layout bshd --batch 2 --heads 4 --kv-heads 2 --seqlen-q 77 --seqlen-k 331 --causal --head-dim 72 --dtype bf16 --iters 1"
for tool in memcheck racecheck synccheck; do
  compute-sanitizer --tool $tool --error-exitcode 99 build-gpu/08_backward/08_backward $shape >"$out/08_$tool.log" 2>&1
  echo "08 $tool rc=$?"
done
for tool in memcheck racecheck; do
  compute-sanitizer --tool $tool --error-exitcode 99 build-gpu/07_block_sparse/07_block_sparse $shape >"$out/07_$tool.log" 2>&1
  echo "07 $tool rc=$?"
done
if [[ ${TIMING:-1} == 1 ]]; then
  step "bhsd against bshd (the executables' median of 20, no check, bf16, B 4, H 16, seqlen 4096)"
  for d in 64 128; do for c in "" --causal; do for l in bhsd bshd; do
    a="--layout $l --batch 4 --heads 16 --seqlen 4096 --head-dim $d $c --dtype bf16 --no-check --iters 20"
    build-gpu/06_tensor_core/06_tensor_core $a | head -1 | cut -c1-120
    build-gpu/07_block_sparse/07_block_sparse $a | head -1 | cut -c1-175
    build-gpu/08_backward/08_backward $a | sed -n 2p | cut -c1-120
  done; done; done
fi
wait
step pytest
rm -rf /tmp/torchinductor_$(whoami)
PYTHONPATH=python python3 -m pytest python/tests -q -rs >"$out/pytest.log" 2>&1; echo "pytest rc=$?"; tail -3 "$out/pytest.log"
step done
tar czf "$out.tgz" -C "$(dirname "$out")" "$(basename "$out")"
