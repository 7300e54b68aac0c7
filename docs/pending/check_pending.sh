#!/usr/bin/env bash
# Checks every patch of docs/pending/ on a GPU machine in one go (README.md here says what each
# holds): main as it is (build-main) against main plus the patches (a copy in build-pending),
# the patches' tests, compute-sanitizer on one case of each, and the benchmarks they touch, main
# and patched interleaved, with PyTorch's anchors in the same run. Logs land in OUTDIR.
#
#   bash docs/pending/check_pending.sh OUTDIR
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: check_pending.sh OUTDIR}
mkdir -p "$out"
step() { echo "== $(date +%T) $*" | tee -a "$out/steps.log"; }
[[ -x /usr/local/cuda/bin/nvcc ]] && export PATH="/usr/local/cuda/bin:$PATH"
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)

step "a copy of the repository with the patches applied"
src=$(mktemp -d)/repo
mkdir -p "$src"
tar --exclude='./build*' --exclude='./.git' -cf - . | tar -xf - -C "$src"
for p in docs/pending/*.patch; do
  (cd "$src" && patch -p1 --fuzz=0 <"$OLDPWD/$p" >>"$out/patch.log" 2>&1) && echo "applied $p" ||
    { echo "FAILED to apply $p (patch.log)"; exit 1; }
done

step "build: main and patched"
targets=(10_decoding_tests 10_decoding_cpu_tests 10_decoding_bench 10_decoding 06_tensor_core_tests 06_tensor_core_steps_bench)
cmake -S . -B build-main -DCMAKE_BUILD_TYPE=Release "${gen[@]}" >"$out/configure_main.log" 2>&1
cmake -S "$src" -B build-pending -DCMAKE_BUILD_TYPE=Release "${gen[@]}" >"$out/configure_pending.log" 2>&1
cmake --build build-main -j "$(nproc)" --target "${targets[@]}" >"$out/build_main.log" 2>&1 || tail -20 "$out/build_main.log"
cmake --build build-pending -j "$(nproc)" --target "${targets[@]}" >"$out/build_pending.log" 2>&1 ||
  { grep -E "error" "$out/build_pending.log" | head -20; }

step "tests of main's chapter 10 (its scratch workspace change has not run on a GPU before)"
ctest --test-dir build-main -L 10_decoding -j "$(nproc)" --timeout 300 --output-on-failure >"$out/ctest_10_main.log" 2>&1
tail -3 "$out/ctest_10_main.log"; grep -E "\((Failed|Timeout|SEGFAULT|Subprocess)" "$out/ctest_10_main.log" | head -20

step "tests of the patched build: chapter 10, and 06's split-D steps"
ctest --test-dir build-pending -L 10_decoding -j "$(nproc)" --timeout 300 --output-on-failure >"$out/ctest_10.log" 2>&1
tail -3 "$out/ctest_10.log"; grep -E "\((Failed|Timeout|SEGFAULT|Subprocess)" "$out/ctest_10.log" | head -20
ctest --test-dir build-pending -R 'Steps.*alt_split_d5' -j "$(nproc)" --timeout 300 --output-on-failure >"$out/ctest_06.log" 2>&1
tail -3 "$out/ctest_06.log"; grep -E "\((Failed|Timeout|SEGFAULT|Subprocess)" "$out/ctest_06.log" | head -20

step "compute-sanitizer on one case of each"
for tool in memcheck racecheck; do
  compute-sanitizer --tool "$tool" --error-exitcode 99 build-pending/10_decoding/10_decoding_tests \
    --gtest_filter='Steps/Cache.AppendsAndAttends/long_and_short_D128_options_bf16:Decode/Options.MatchReference/B2_H16x2_Sq16_Sk9_D64_causal_all_bf16' \
    >"$out/san_10_$tool.log" 2>&1
  echo "$tool 10 (cache, options): rc=$?"
  compute-sanitizer --tool "$tool" --error-exitcode 99 build-pending/06_tensor_core/06_tensor_core_tests \
    --gtest_filter='*alt_split_d576_512_D576_Sq300_Sk77_causal*' >"$out/san_06_$tool.log" 2>&1
  echo "$tool 06 (576/512): rc=$?"
done | tee "$out/sanitizer_summary.txt"

step "benchmarks: main and patched interleaved, then PyTorch"
for round in 1 2; do
  for build in build-main build-pending; do
    tag=$(basename "$build")_$round
    "$build/10_decoding/10_decoding_bench" --benchmark_filter=decode/ --benchmark_out="$out/decode_$tag.json" \
      --benchmark_out_format=json >"$out/decode_$tag.log" 2>&1
    "$build/06_tensor_core/06_tensor_core_steps_bench" --step alt_split_d512 --head-dims 512 \
      --benchmark_filter='fwd/.*/seqlen:(4096|16384)/' --benchmark_out="$out/d512_$tag.json" \
      --benchmark_out_format=json >"$out/d512_$tag.log" 2>&1
  done
  build-pending/06_tensor_core/06_tensor_core_steps_bench --step alt_split_d576_512 --head-dims 576 \
    --benchmark_out="$out/d576_$round.json" --benchmark_out_format=json >"$out/d576_$round.log" 2>&1
done
python3 scripts/compare_pytorch_decode.py --out "$out/pytorch_decode.json" >"$out/pytorch_decode.log" 2>&1
python3 scripts/compare_pytorch.py --dtypes bf16 --backends efficient,cudnn,math --head-dims 576 --head-dim-v 512 \
  --out "$out/pytorch_d576.json" >"$out/pytorch_d576.log" 2>&1
for f in "$out"/decode_*.log; do echo "-- $(basename "$f")"; grep -E "^decode" "$f" | awk '{print "   " $1, $NF}'; done
grep -hE "^fwd" "$out"/d512_*.log "$out"/d576_*.log | awk '{print "   " $1, $NF}'
tail -14 "$out/pytorch_decode.log"; grep -E "seqlen=(4096|16384)" "$out/pytorch_d576.log"
step "done"
