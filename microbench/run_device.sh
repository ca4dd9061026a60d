#!/usr/bin/env bash
# The one command to run every microbenchmark on the GPU machine (quick mode: shorter loops,
# 9 timed launches per case after 2 warm-ups; about 2-3 minutes in all on an H100/H200).
#
#   bash microbench/run_device.sh            # from the repository root, on the GPU machine
#
# Writes into $OUT (or ./microbench-out): microbench.json (every result, the schema in
# microbench/results.py), summary.txt (the full table), progress.log (one line per case,
# build and worker messages), and the figures smem_conflicts.png, smem_patterns.png,
# latency.png, ffma.png, smem_latency_forms.png, smem_matrix.png, smem_atomic.png,
# smem_async_copy.png, smem_cluster.png, smem_carveout.png. Prints the short summary table last.
#
# Needs python3 with numpy, cuda-python (driver + nvrtc bindings) and matplotlib, and lark
# for sassas: when lark is missing and .whl/ holds its wheel (carry .whl), it is installed
# into /tmp/site first. Extra arguments go to `python -m microbench run` (e.g. a benchmark
# name to run only that one, or --repeat 21 without --quick: pass FULL=1 to drop --quick).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT="${OUT:-$ROOT/microbench-out}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
export PYTHONUNBUFFERED=1

if ! "$PY" -c "import lark" 2>/dev/null; then
    if ls .whl/*.whl >/dev/null 2>&1; then
        "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
            --target /tmp/site .whl/*.whl >>"$OUT/progress.log" 2>&1 || echo "pip install of .whl failed" >&2
        export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
    fi
fi
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"

{
    echo "== $(date -u +%FT%TZ) microbench on $(hostname)"
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw \
        --format=csv 2>&1 || true
    "$PY" -c "import sys, numpy, lark; from cuda.bindings import driver, nvrtc; print(sys.version.split()[0], 'numpy', numpy.__version__, 'lark', lark.__version__, 'nvrtc', nvrtc.nvrtcVersion()[1:])" 2>&1
} >>"$OUT/progress.log" 2>&1

QUICK="--quick"
[ "${FULL:-0}" = "1" ] && QUICK=""

BRIEF="$(mktemp /tmp/microbench-brief.XXXXXX)"
start=$(date +%s)
"$PY" -m microbench run all $QUICK --json "$OUT/microbench.json" --plot "$OUT" \
    --table "$OUT/summary.txt" --brief --case-timeout 30 "$@" \
    >"$BRIEF" 2>>"$OUT/progress.log"
rc=$?
end=$(date +%s)

echo "== progress (last 12 lines of $OUT/progress.log) =="
tail -n 12 "$OUT/progress.log"
echo
echo "== microbench exit code $rc after $((end - start)) s; files in $OUT: $(ls "$OUT" | tr '\n' ' ')"
echo
cat "$BRIEF"
exit $rc
