#!/usr/bin/env bash
# One GPU session of the Winograd work: correctness, benchmark, switches, sanitizers. Run from
# the repository root on the GPU machine with sassas importable (PYTHONPATH); logs and JSON go
# to $OUT (default ./out).   bash kernels_sass/winograd/device_run.sh [full|quick]
set -u
MODE=${1:-full}
OUT=${OUT:-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
# cuda-python for sassas.load, where the machine's Python lacks it (wheels carried in .whl_wino)
python3 -c 'import cuda.bindings.driver' 2>/dev/null || {
  echo "[run] cuda.bindings missing: installing the carried wheels";
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl_wino/*.whl; }
W="python3 -m kernels_sass.winograd"
step() {  # step NAME SECONDS CMD...: run with a time limit, log to $OUT/NAME.log, report status
  local name=$1 limit=$2; shift 2
  local t0=$(date +%s)
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  echo "[run] $name: rc=$rc in $(( $(date +%s) - t0 ))s" | tee -a "$OUT/summary.log"
  return $rc
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv > "$OUT/gpu.log"
python3 -c 'import torch, cuda.bindings; print("torch", torch.__version__, "cudnn", torch.backends.cudnn.version(), "cuda.bindings", cuda.bindings.__version__)' >> "$OUT/gpu.log"
if step smoke 90 $W smoke; then
  step check 200 $W check --chwn --json "$OUT/check.json"
  step bench 240 $W bench --json "$OUT/bench.json" --plot "$OUT/bench.png"
  if [ "$MODE" = full ]; then
    step ablation 200 $W bench --ablation --configs Conv2/N128 Conv3/N128 Conv4/N128 Conv5/N128 --json "$OUT/ablation.json"
    step memcheck 120 compute-sanitizer --tool memcheck --error-exitcode 1 $W smoke --impl sass --impl cuda
    step racecheck 150 compute-sanitizer --tool racecheck --error-exitcode 1 $W smoke --impl sass
  fi
else
  step smoke_safe 90 $W smoke --impl sass --safe
  step smoke_l8 90 $W smoke --impl sass --ldg-spacing 8 --sts-spacing 6
  step bench 240 $W bench --impl cuda --json "$OUT/bench.json" --plot "$OUT/bench.png"
fi
# at most 8 files come back: fold the logs into one
for f in gpu summary smoke smoke_safe smoke_l8 check bench ablation memcheck racecheck; do
  [ -f "$OUT/$f.log" ] && { echo "==== $f"; cat "$OUT/$f.log"; rm -f "$OUT/$f.log"; }
done > "$OUT/all.log.tmp"
mv "$OUT/all.log.tmp" "$OUT/all.log"
echo "==== summary"; grep '^\[run\]' "$OUT/all.log"; head -3 "$OUT/all.log"
grep -h '^smoke' "$OUT/all.log" | head -24
grep -h 'passed (relative\|FAIL\|ERROR' "$OUT/all.log" | grep -v '^smoke' | head -20
grep -h 'ERROR SUMMARY\|RACECHECK SUMMARY' "$OUT/all.log"
sed -n '/^# .*torch/,/^geometric mean/p' "$OUT/all.log"
sed -n '/^# SASS switches/,/^# loop FFMA/p' "$OUT/all.log"
exit 0
