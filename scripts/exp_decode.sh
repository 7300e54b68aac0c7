#!/usr/bin/env bash
# Experiment: chapter 10's decode rows with an L2 prefetch-size hint on the K/V copies (FA_DECODE_L2 = 0, 128, 256),
# the variants in turns, three rounds; PyTorch's cuDNN/FLASH on the same rows twice; the plain read.
set -u
out=$1; mkdir -p "$out"
export PATH=/usr/local/cuda/bin:$PATH
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -G Ninja >"$out/configure.log" 2>&1 || { tail -20 "$out/configure.log"; exit 1; }
t0=$(date +%s)
cmake --build build -j 16 --target 10_decoding_bench >"$out/build.log" 2>&1 || { grep -E "error" "$out/build.log" | head; exit 1; }
echo "build $(( $(date +%s) - t0 ))s"
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv > "$out/smi.txt"
for r in 1 2 3; do
  for v in 0 128 256; do
    FA_DECODE_L2=$v build/10_decoding/10_decoding_bench --benchmark_filter='decode/(10_decoding/|plain)' \
      --benchmark_out="$out/dec_${v}_$r.json" --benchmark_out_format=json >"$out/dec_${v}_$r.log" 2>&1 || tail -5 "$out/dec_${v}_$r.log"
    echo "round $r L2=$v"; grep -E "^decode" "$out/dec_${v}_$r.log" | awk '{print "   " $1, $NF, $(NF-1), $(NF-2), $(NF-3), $(NF-4)}'
  done
  [[ $r == 3 ]] && break
  PYTHONUNBUFFERED=1 python3 scripts/compare_pytorch_decode.py --out "$out/torch_$r.json" >"$out/torch_$r.log" 2>&1 || tail -5 "$out/torch_$r.log"
  grep -E "decode|plain|GB" "$out/torch_$r.log" | head -30
done
