#!/usr/bin/env bash
# Nsight Compute, side by side: chapter 08's tensor-core backward kernel and PyTorch's FLASH backend
# backward kernel (FlashAttention-2's flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel) on the same
# problem, FlashAttention-2's shape for the seqlen (batch = 16384 / seqlen, heads = 2048 / D), bf16,
# not causal. One text report per kernel in OUTDIR: speed of light, pipes, warp stalls, instruction
# mix, shared-memory wavefronts; read them side by side before changing the kernel (profile first).
#
#   bash scripts/ncu_backward.sh BUILD OUTDIR [D ...]       (default D: 64 128; seqlen 16384)
#
# SOURCE=1: also 08's kernel per SASS instruction (sass_08_D*.csv: executed instructions, shared
# wavefronts ideal and excessive, stall samples; the build has -lineinfo, so each line names its
# source line), and every warp-stall reason per issued instruction for both kernels.
set -uo pipefail
build=${1:?usage: ncu_backward.sh BUILD OUTDIR [D ...]}
out=${2:?usage: ncu_backward.sh BUILD OUTDIR [D ...]}
shift 2
dims=("$@"); ((${#dims[@]})) || dims=(64 128)
seqlen=${SEQLEN:-16384}
mkdir -p "$out"
fa2=$out/fa2_backward.py  # one FLASH-backend backward, the kernel ncu picks
cat >"$fa2" <<'PY'
import sys
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
b, h, s, d = map(int, sys.argv[1:])
q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
    F.scaled_dot_product_attention(q, k, v).backward(torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16))
torch.cuda.synchronize()
PY
sections=(--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis
  --section MemoryWorkloadAnalysis_Tables --section WarpStateStats --section InstructionStats
  --section SchedulerStats --section Occupancy --section LaunchStats)
metrics=smsp__sass_inst_executed_op_ldsm.sum,smsp__sass_inst_executed_op_shared_ld.sum,smsp__sass_inst_executed_op_shared_st.sum,smsp__sass_inst_executed_op_global_red.sum,smsp__sass_inst_executed_op_ldgsts.sum,smsp__inst_executed_pipe_tensor_op_hmma.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,lts__t_sectors_op_red.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
for d in "${dims[@]}"; do
  batch=$((16384 / seqlen)) heads=$((2048 / d))
  ncu --clock-control none "${sections[@]}" --metrics "$metrics" -k regex:backward_tc_kernel --launch-count 1 \
    "$build/08_backward/08_backward" --dtype bf16 --batch "$batch" --heads "$heads" --seqlen "$seqlen" --head-dim "$d" \
    --iters 1 --no-check >"$out/ncu_08_D$d.txt" 2>&1 || echo "ncu failed for 08 D$d (ncu_08_D$d.txt)"
  if [[ ${SOURCE:-0} == 1 ]]; then
    stalls=regex:smsp__average_warps_issue_stalled_.*_per_issue_active.ratio
    ncu --clock-control none --section SourceCounters --section WarpStateStats --metrics "$stalls" --import-source yes \
      -k regex:backward_tc_kernel --launch-count 1 -o "$out/rep_08_D$d" -f \
      "$build/08_backward/08_backward" --dtype bf16 --batch "$batch" --heads "$heads" --seqlen "$seqlen" \
      --head-dim "$d" --iters 1 --no-check >"$out/ncu_src_08_D$d.log" 2>&1
    ncu -i "$out/rep_08_D$d.ncu-rep" --page source --print-source sass --csv >"$out/sass_08_D$d.csv" 2>&1
    ncu -i "$out/rep_08_D$d.ncu-rep" --page source --print-source cuda,sass --csv >"$out/cuda_sass_08_D$d.csv" 2>&1
    ncu -i "$out/rep_08_D$d.ncu-rep" --page raw --csv --metrics "$stalls" >"$out/stalls_08_D$d.csv" 2>&1
  fi
  ncu --clock-control none "${sections[@]}" --metrics "$metrics" -k regex:flash_bwd_dq_dk_dv --launch-count 1 \
    python3 "$fa2" "$batch" "$heads" "$seqlen" "$d" >"$out/ncu_fa2_D$d.txt" 2>&1 || echo "ncu failed for FA2 D$d (ncu_fa2_D$d.txt)"
  [[ ${SOURCE:-0} == 1 ]] && ncu --clock-control none --metrics "$stalls" -k regex:flash_bwd_dq_dk_dv --launch-count 1 \
    --csv --page raw python3 "$fa2" "$batch" "$heads" "$seqlen" "$d" >"$out/stalls_fa2_D$d.csv" 2>&1
done
