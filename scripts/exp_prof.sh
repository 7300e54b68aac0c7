#!/usr/bin/env bash
# Temporary: profile 09's FP8 step and the D = 64 kernel (f16 vs bf16). Not committed.
set -u
out=${OUT:-/tmp/out}; mkdir -p "$out"
export PATH=$PATH:/usr/local/cuda/bin
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
t0=$(date +%s)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "${gen[@]}" >"$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
cmake --build build -j16 --target 09_flash_v3 09_flash_v3_steps_bench >"$out/build.log" 2>&1 || { tail -50 "$out/build.log"; exit 1; }
echo "build $(( $(date +%s) - t0 )) s"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,power.limit --format=csv
B=build/09_flash_v3
$B/09_flash_v3_steps_bench --step v6_fp8 --benchmark_filter='seqlen:(8192|16384)' 2>&1 | grep -E "fwd/" | awk '{print $1, $NF, $0}' | cut -c1-200 > "$out/fp8_bench.txt"
cat "$out/fp8_bench.txt"
P="ncu --clock-control none --set full --import-source no"
$P --kernel-name regex:flash_v3_kernel --launch-skip 2 --launch-count 1 -o "$out/fp8_8k" \
  $B/09_flash_v3_steps_bench --step v6_fp8 --benchmark_filter='full/seqlen:8192' --benchmark_min_time=0.05s > "$out/ncu_fp8.log" 2>&1
for dt in f16 bf16; do
  $P --kernel-name regex:one_warpgroup --launch-skip 2 --launch-count 1 -o "$out/d64_$dt" \
    $B/09_flash_v3 --dtype $dt --batch 8 --heads 32 --seqlen 2048 --head-dim 64 --iters 5 --no-check > "$out/ncu_d64_$dt.log" 2>&1
done
for r in fp8_8k d64_f16 d64_bf16; do
  ncu -i "$out/$r.ncu-rep" --page details --print-units base > "$out/$r.details.txt" 2>&1
  ncu -i "$out/$r.ncu-rep" --page raw --csv > "$out/$r.raw.csv" 2>&1
  ncu -i "$out/$r.ncu-rep" --page source --csv --print-source sass > "$out/$r.sass.csv" 2>&1
done
rm -f "$out"/*.ncu-rep
tar czf "$out/prof.tgz" -C "$out" --exclude prof.tgz . && find "$out" -type f ! -name prof.tgz -delete
echo "total $(( $(date +%s) - t0 )) s"
