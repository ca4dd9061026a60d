#!/usr/bin/env bash
# The spread experiment (microbench/spread_experiment.py) on the GPU machine: the variants of
# the one-block-an-SM bulk streams, the one-warp issue-only LDGSTS runs and the cluster
# streams, 21 timed launches each after 2 warm-ups (about 2-3 minutes on an H100/H200).
#
#   bash microbench/spread_experiment.sh        # from the repository root; carry .whl for lark
#
# Writes into $OUT (or ./microbench-out): spread.json (every sample), spread_full.txt (the
# microbench table), spread.txt (the compact table: case, variant, impl, per-launch sample,
# n, median, spread %, kernel ms) and progress.log; prints the compact table.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT="${OUT:-$ROOT/microbench-out}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
export PYTHONUNBUFFERED=1 MICROBENCH_SPREAD_EXPERIMENT=1

if ! "$PY" -c "import lark" 2>/dev/null; then
    if ls .whl/*.whl >/dev/null 2>&1; then
        "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
            --target /tmp/site .whl/*.whl >>"$OUT/progress.log" 2>&1 || echo "pip install of .whl failed" >&2
        export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
    fi
fi
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"

command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw \
    --format=csv >>"$OUT/progress.log" 2>&1 || true
start=$(date +%s)
"$PY" -m microbench run "${@:-spread}" --json "$OUT/spread.json" --table "$OUT/spread_full.txt" \
    --case-timeout 60 >/dev/null 2>>"$OUT/progress.log"
rc=$?
end=$(date +%s)
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv >>"$OUT/progress.log" 2>&1 || true
echo "== exit code $rc after $((end - start)) s; last lines of $OUT/progress.log:"
tail -n 5 "$OUT/progress.log"
echo
"$PY" -m microbench.spread_experiment "$OUT/spread.json" | tee "$OUT/spread.txt"
exit $rc
