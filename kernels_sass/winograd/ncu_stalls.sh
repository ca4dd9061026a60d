#!/usr/bin/env bash
# ncu stall reasons for main-kernel variants of one shape (Conv3/N128). Output under $OUT.
R="barrier dispatch_stall long_scoreboard math_pipe_throttle mio_throttle lg_throttle no_instruction not_selected selected short_scoreboard wait misc branch_resolving drain sleeping tex_throttle imc_miss membar"
M="smsp__inst_executed_pipe_fma.sum,smsp__cycles_active.avg,sm__cycles_elapsed.avg,smsp__issue_active.avg.pct_of_peak_sustained_active,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,smsp__inst_executed.sum"
for r in $R; do M="$M,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio"; done
for v in "$@"; do
  tag=$(echo "$v" | tr -d ' -')
  ncu --clock-control none --kernel-name regex:wino --launch-skip 1 --launch-count 1 --metrics "$M" \
     python3 -m kernels_sass.winograd profile 128 128 28 28 128 $v > "$OUT/ncu_$tag.txt" 2>&1
  ncu --clock-control none --kernel-name regex:wino --launch-skip 1 --launch-count 1 --section SourceCounters \
     --page source --csv --print-source sass python3 -m kernels_sass.winograd profile 128 128 28 28 128 $v > "$OUT/src_$tag.csv" 2>&1
  echo "== $v"; grep -E "stalled|pipe_fma|issue_active|bank_conflicts|cycles_active|inst_executed.sum" "$OUT/ncu_$tag.txt" | awk '{print $1, $NF}'
done
