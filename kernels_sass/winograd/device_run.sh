#!/usr/bin/env bash
# One GPU run of the Winograd work: correctness, benchmark, switches, sanitizers. Run from
# the repository root on the GPU machine with sassas importable (PYTHONPATH); everything goes to
# $OUT (default ./out): all.log, check.json, bench.json, bench.png, ablation.json.
#   bash kernels_sass/winograd/device_run.sh [full|quick|f4fused|algos|ablation4]
# ablation4: F(4x4,3x3)'s switches, each turned back alone (f4tc's NCHW path and the fused kernel),
# on Conv2-Conv5/N128 and Conv5/N32, outputs checked against the default's (f4_ablation.json), in
# about 2 minutes (H100).
# algos: the four algorithms (f2, f4, f4fused, f4tc) benched on the 16 layers (bench_all.json, .png),
# auto's cost model checked against those timings, the F(4x4,3x3) ones checked (check_all.json)
# and under memcheck and racecheck, in about 2 minutes (H100).
# f4fused: the fused F(4x4,3x3) kernel alone, in under 8 minutes: its check (16 ResNet layers
# and the odd shapes, NCHW and CHWN, against float64: f4fused_check.json), bench against cuDNN
# and the other algorithms (f4fused_bench.json, .png), smoke under memcheck and racecheck.
set -u
MODE=${1:-full}
OUT=${OUT:-out}
mkdir -p "$OUT"
LOG="$OUT/all.log"
export PYTHONUNBUFFERED=1
# cuda-python for sassas.load, where the machine's Python lacks it (wheels carried in .whl_wino
# or .whl; the caller puts /tmp/site on PYTHONPATH)
python3 -c 'import cuda.bindings.driver, lark' 2>/dev/null || {
  echo "[run] cuda.bindings or lark missing: installing the carried wheels" | tee -a "$LOG";
  for d in .whl_wino .whl; do ls $d/*.whl >/dev/null 2>&1 && \
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site $d/*.whl; done; }
W="python3 -m kernels_sass.winograd"
step() {  # step NAME SECONDS CMD...: run with a time limit, append to the log, report status
  local name=$1 limit=$2; shift 2
  local t0=$(date +%s)
  echo "==== $name: $*" >> "$LOG"
  timeout "$limit" "$@" >> "$LOG" 2>&1
  local rc=$?
  echo "[run] $name: rc=$rc in $(( $(date +%s) - t0 ))s" | tee -a "$LOG"
  return $rc
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv >> "$LOG"
python3 -c 'import torch, cuda.bindings; print("torch", torch.__version__, "cudnn", torch.backends.cudnn.version(), "cuda.bindings", cuda.bindings.__version__)' >> "$LOG" 2>&1
if [ "$MODE" = algos ]; then
  # every algorithm: the bench of the 16 layers with f2, f4, f4fused and f4tc, the check of the
  # F(4x4,3x3) ones (16 layers and odd shapes, NCHW and CHWN), the sanitizers on their smoke shapes
  step prebuild 90 $W prebuild --f4fused
  step bench_algos 300 $W bench --impl sass --algo f2 f4 f4fused f4tc --json "$OUT/bench_all.json" --plot "$OUT/bench_all.png"
  # the cost model's choices against this run's timings (CPU only; the model is not refitted)
  step model 60 $W model "$OUT/bench_all.json"
  step check_algos 240 $W check --impl sass --algo f4 --algo f4fused --algo f4tc --chwn --json "$OUT/check_all.json"
  for a in f4tc f4fused f4; do
    step memcheck_$a 45 compute-sanitizer --tool memcheck --error-exitcode 1 $W smoke --impl sass --algo $a
    step racecheck_$a 45 compute-sanitizer --tool racecheck --error-exitcode 1 $W smoke --impl sass --algo $a
  done
  echo "==== summary"; grep '^\[run\]' "$LOG"; grep -h 'NVIDIA\|^torch' "$LOG" | head -2
  grep -h 'passed (relative\|FAIL' "$LOG" | head -5
  grep -h 'ERROR SUMMARY\|RACECHECK SUMMARY' "$LOG"
  sed -n '/^# speed ratios/,/^geometric mean of f4fused/p' "$LOG"
  grep -h '^auto takes the fastest' "$LOG"
  exit 0
fi
if [ "$MODE" = ablation4 ]; then
  step prebuild 90 $W prebuild --ablation4
  step ablation4 150 $W bench --ablation --algo f4tc f4fused --json "$OUT/f4_ablation.json"
  echo "==== summary"; grep '^\[run\]' "$LOG"; grep -h 'NVIDIA\|^torch' "$LOG" | head -2
  grep -h 'Error\|DIFFERS' "$LOG" | head -10
  sed -n '/^# F(4x4,3x3) ablation/,/^\[run\] ablation4/p' "$LOG"
  exit 0
fi
if [ "$MODE" = f4fused ]; then
  step prebuild 45 $W prebuild --f4fused
  step smoke_f4fused 30 $W smoke --impl sass --algo f4fused
  step check_f4fused 100 $W check --impl sass --algo f4fused --chwn --json "$OUT/f4fused_check.json"
  step bench_f4fused 190 $W bench --impl sass --algo f2 f4 f4fused --json "$OUT/f4fused_bench.json" --plot "$OUT/f4fused_bench.png"
  step memcheck_f4fused 35 compute-sanitizer --tool memcheck --error-exitcode 1 $W smoke --impl sass --algo f4fused
  step racecheck_f4fused 35 compute-sanitizer --tool racecheck --error-exitcode 1 $W smoke --impl sass --algo f4fused
  echo "==== summary"; grep '^\[run\]' "$LOG"; grep -h 'NVIDIA\|^torch' "$LOG" | head -2
  grep -h '^smoke' "$LOG" | head -12
  grep -h 'passed (relative\|FAIL\|ERROR\|Error' "$LOG" | grep -v '^smoke\|ERROR SUMMARY' | head -20
  grep -h 'ERROR SUMMARY\|RACECHECK SUMMARY' "$LOG"
  sed -n '/^# .*torch/,/^geometric mean of f4fused/p' "$LOG"
  exit 0
fi
if step smoke 60 $W smoke; then
  step check 260 $W check --chwn --json "$OUT/check.json"
  step bench 240 $W bench --json "$OUT/bench.json" --plot "$OUT/bench.png"
  step gemm 120 $W gemm --json "$OUT/gemm.json"
  # the GEMM's main loop in SM cycles (ncu counters), with the measurement-only variants
  step loop 150 $W loop --json "$OUT/loop.json"
  if [ "$MODE" = full ]; then
    step ablation 150 $W bench --ablation --configs Conv2/N128 Conv3/N128 Conv4/N128 Conv5/N128 --json "$OUT/ablation.json"
    # split-C forced on every shape (2 parts), and the chosen splits switched off beside them
    step check_split 60 $W check --quick --impl sass --chwn --split 2 --json "$OUT/check_split2.json"
    step bench_nosplit 60 $W bench --configs Conv4 --split 1 --no-cudnn-algos --json "$OUT/bench_nosplit.json"
    # the designs of the GPUs with less shared memory or no LDGSTS (sm_75..sm_89), run here:
    # F(2x2,3x3) with one buffer, the GEMM copying through registers
    step check_one_buffer 120 $W check --quick --impl sass --chwn --one-buffer --json "$OUT/check_one_buffer.json"
    step racecheck_one_buffer 60 compute-sanitizer --tool racecheck --error-exitcode 1 $W smoke --impl sass --algo f2 --one-buffer
    step gemm_register_copies 120 $W gemm --options async_copy=0 "tile_rows=8,a_sets=2,async_copy=0" --json "$OUT/gemm_register_copies.json"
    step memcheck 60 compute-sanitizer --tool memcheck --error-exitcode 1 $W smoke --impl sass --impl cuda
    step memcheck_split 60 compute-sanitizer --tool memcheck --error-exitcode 1 $W smoke --impl sass --split 2
    step racecheck 60 compute-sanitizer --tool racecheck --error-exitcode 1 $W smoke --impl sass
    step racecheck_split 60 compute-sanitizer --tool racecheck --error-exitcode 1 $W smoke --impl sass --split 2
    # hardware counters of one main kernel (Conv3/N128): issue slots, stall reasons, pipes, and
    # how close the loop's L2 -> SM traffic (48 KiB a block an iteration) runs to L2's peak
    step ncu 150 ncu --clock-control none --kernel-name regex:wino --launch-skip 1 --launch-count 1 \
      --section SchedulerStats --section WarpStateStats --section ComputeWorkloadAnalysis \
      --section InstructionStats --section Occupancy --section SourceCounters \
      --section SpeedOfLight --section MemoryWorkloadAnalysis \
      --metrics smsp__inst_executed_pipe_fma.sum,smsp__cycles_active.avg,sm__cycles_elapsed.avg,lts__t_bytes.sum.per_second,lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__throughput.avg.pct_of_peak_sustained_active \
      $W profile 128 128 28 28 128
  fi
else
  step smoke_safe 60 $W smoke --impl sass --safe
  step smoke_l8 60 $W smoke --impl sass --ldg-spacing 3 --sts-spacing 2
  step bench 160 $W bench --impl cuda --json "$OUT/bench.json" --plot "$OUT/bench.png"
fi
echo "==== summary"; grep '^\[run\]' "$LOG"; grep -h 'NVIDIA\|^torch' "$LOG" | head -2
grep -h '^smoke' "$LOG" | head -24
grep -h 'passed (relative\|FAIL\|ERROR\|Error' "$LOG" | grep -v '^smoke\|ERROR SUMMARY' | head -20
grep -h 'ERROR SUMMARY\|RACECHECK SUMMARY' "$LOG"
sed -n '/^==== ncu/,/^\[run\] ncu/p' "$LOG" | grep -i 'issue\|stall\|pipe_fma\|Warp Cycles\|Eligible\|cycles_active\|elapsed\|lts__\|L2\|dram__\|l1tex__' | head -60
sed -n '/^# .*torch/,/^geometric mean/p' "$LOG"
sed -n '/F(4x4,3x3) GEMM (36/,/f4.plan chooses/p' "$LOG"
sed -n "/the F(4x4,3x3) GEMM's loop/,/^\[run\] loop/p" "$LOG"
sed -n '/^# SASS switches/,/^# loop FFMA/p' "$LOG"
exit 0
