#!/usr/bin/env bash
# Checks docs/pending/10_*.patch (stream-K, D = 256) on a GPU machine in one go (README.md here says
# what they hold): main as it is (build-main) against main plus the patches (a copy in
# build-pending), the patched chapter's tests (D = 256 among them), compute-sanitizer on the
# stream-K step and on D = 256, and the decode benchmark, main and patched interleaved (the
# stream-K patch moves split_kv_kernel's body into attend_piece: main's rows must not move), with
# PyTorch's anchors in the same run. Logs land in OUTDIR.
#
#   bash docs/pending/check_pending.sh OUTDIR
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: check_pending.sh OUTDIR}
mkdir -p "$out"
step() { echo "== $(date +%T) $*" | tee -a "$out/steps.log"; }
[[ -x /usr/local/cuda/bin/nvcc ]] && export PATH="/usr/local/cuda/bin:$PATH"
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)

step "a copy of the repository with the patch applied"
src=$(mktemp -d)/repo
mkdir -p "$src"
tar --exclude='./build*' --exclude='./.git' -cf - . | tar -xf - -C "$src"
for p in docs/pending/10_*.patch; do  # 10_d256, 10_stream_k: they apply together, in either order
  (cd "$src" && patch -p1 --fuzz=0 <"$OLDPWD/$p" >>"$out/patch.log" 2>&1) && echo "applied $p" ||
    { echo "FAILED to apply $p (patch.log)"; exit 1; }
done

step "build: main and patched"
targets=(10_decoding_tests 10_decoding_cpu_tests 10_decoding_bench 10_decoding)
cmake -S . -B build-main -DCMAKE_BUILD_TYPE=Release "${gen[@]}" >"$out/configure_main.log" 2>&1
cmake -S "$src" -B build-pending -DCMAKE_BUILD_TYPE=Release "${gen[@]}" >"$out/configure_pending.log" 2>&1
cmake --build build-main -j "$(nproc)" --target "${targets[@]}" >"$out/build_main.log" 2>&1 || tail -20 "$out/build_main.log"
cmake --build build-pending -j "$(nproc)" --target "${targets[@]}" >"$out/build_pending.log" 2>&1 ||
  { grep -E "error" "$out/build_pending.log" | head -20; }

step "tests of the patched build (chapter 10 with the stream-K step)"
ctest --test-dir build-pending -L 10_decoding -j "$(nproc)" --timeout 300 --output-on-failure >"$out/ctest_10.log" 2>&1
tail -3 "$out/ctest_10.log"; grep -E "\((Failed|Timeout|SEGFAULT|Subprocess)" "$out/ctest_10.log" | head -20

step "compute-sanitizer on the stream-K step"
for tool in memcheck racecheck synccheck; do
  compute-sanitizer --tool "$tool" --error-exitcode 99 build-pending/10_decoding/10_decoding_tests \
    --gtest_filter='StreamK/Decode.MatchesReference/B1_H32x8_Sq1_Sk4097_D128_causal_bf16:StreamK/Decode.MatchesReference/B3_H8x8_Sq5_Sk70_D64_causal_f16:Shapes/Decode.MatchesReference/B1_H32x8_Sq1_Sk4097_D256_causal_bf16' \
    >"$out/san_$tool.log" 2>&1
  echo "$tool stream_k and D = 256: rc=$?"
done | tee "$out/sanitizer_summary.txt"

step "decode benchmark: main and patched interleaved, then PyTorch"
# GB/s of each row, in the benchmark's order: 10_decoding's six rows (B1 4k, 16k, 64k; B8 4k,
# 16k, 64k), then (patched) the stream-K step's six.
gbps() { python3 -c "import json,sys; print(' '.join('%.0f' % b['GBps'] for b in json.load(open(sys.argv[1]))['benchmarks']))" "$1"; }
for round in 1 2; do
  for build in build-main build-pending; do
    tag=$(basename "$build")_$round
    "$build/10_decoding/10_decoding_bench" --benchmark_filter=decode/ --benchmark_out="$out/decode_$tag.json" \
      --benchmark_out_format=json >"$out/decode_$tag.log" 2>&1
    echo "$tag: $(gbps "$out/decode_$tag.json")"
  done
done
python3 scripts/compare_pytorch_decode.py --out "$out/pytorch_decode.json" >"$out/pytorch_decode.log" 2>&1
tail -13 "$out/pytorch_decode.log"
step "done"
