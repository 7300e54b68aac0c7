#!/usr/bin/env bash
# Nsight Compute, side by side: chapter 09's forward kernel and PyTorch SDPA's cuDNN forward on the
# same problem, FlashAttention-2's shape for each seqlen (batch = 16384 / seqlen, heads = 2048 / D),
# bf16, not causal. One text report per kernel and seqlen in OUTDIR: speed of light, warp stalls,
# scheduler, occupancy, launch; read 1k beside 4k to see where the short sequences' time goes.
#
#   bash scripts/ncu_forward.sh BUILD OUTDIR [SEQLEN ...]     (default: 1024 4096; D: $D or 128)
#
# SOURCE=1: also 09's kernel per SASS instruction (sass_09_D*_SEQLEN.csv: executed instructions and
# warp-stall samples, each line with its source line where the build has -lineinfo), to see which
# instructions the per-tile time at short sequences goes to.
set -uo pipefail
build=${1:?usage: ncu_forward.sh BUILD OUTDIR [SEQLEN ...]}
out=${2:?usage: ncu_forward.sh BUILD OUTDIR [SEQLEN ...]}
shift 2
seqlens=("$@"); ((${#seqlens[@]})) || seqlens=(1024 4096)
d=${D:-128}
mkdir -p "$out"
py=$out/cudnn_forward.py  # one cuDNN-backend forward between cudaProfilerStart and Stop, after a warm-up
cat >"$py" <<'PY'
import sys
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
b, h, s, d = map(int, sys.argv[1:])
q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
    for _ in range(3):
        F.scaled_dot_product_attention(q, k, v)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    F.scaled_dot_product_attention(q, k, v)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
PY
sections=(--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis
  --section WarpStateStats --section InstructionStats --section SchedulerStats --section Occupancy
  --section LaunchStats)
for s in "${seqlens[@]}"; do
  batch=$((16384 / s)) heads=$((2048 / d))
  ncu --clock-control none "${sections[@]}" -k regex:flash_v3_kernel --launch-skip 1 --launch-count 1 \
    "$build/09_flash_v3/09_flash_v3" --dtype bf16 --batch "$batch" --heads "$heads" --seqlen "$s" --head-dim "$d" \
    --iters 3 --no-check >"$out/ncu_09_D${d}_$s.txt" 2>&1 || echo "ncu failed for 09 $s (ncu_09_D${d}_$s.txt)"
  if [[ ${SOURCE:-0} == 1 ]]; then
    ncu --clock-control none --section SourceCounters --section WarpStateStats --import-source yes \
      -k regex:flash_v3_kernel --launch-skip 1 --launch-count 1 -o "$out/rep_09_D${d}_$s" -f \
      "$build/09_flash_v3/09_flash_v3" --dtype bf16 --batch "$batch" --heads "$heads" --seqlen "$s" --head-dim "$d" \
      --iters 3 --no-check >"$out/ncu_src_09_D${d}_$s.log" 2>&1
    ncu -i "$out/rep_09_D${d}_$s.ncu-rep" --page source --print-source sass --csv >"$out/sass_09_D${d}_$s.csv" 2>&1
  fi
  ncu --clock-control none "${sections[@]}" --profile-from-start off \
    python3 "$py" "$batch" "$heads" "$s" "$d" >"$out/ncu_cudnn_D${d}_$s.txt" 2>&1 || echo "ncu failed for cuDNN $s (ncu_cudnn_D${d}_$s.txt)"
done
