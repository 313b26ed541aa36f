#!/usr/bin/env bash
# Run one RapidNetSim experiment converted from a vclos trace, and summarise it
# (issue 14 validation, docs/network-validation.md).
#
# Written for vclos; no RapidNetSim code is copied here. RapidNetSim
# (GitHub nothepeople/RapidNetSim) is fetched and checked out separately,
# outside this repository (never vendored), e.g. into /work/rns, with its
# Python deps (numpy, jinja2, mmh3, gurobipy) in a venv, e.g. /work/rns-venv.
# The validation patches it with a few environment switches (listed in
# docs/network-validation.md); without them it runs as released.
#
# Usage:
#   RNS=/work/rns PY=/work/rns-venv/bin/python \
#     tools/rapidnetsim/run.sh TRACE.csv POLICY OUTDIR [to_rns.py options...]
#   POLICY: ecmp | sr | ocs-vclos
# Environment passed through to RapidNetSim (only with the patches):
#   RNS_FLOOR=0        disable the bandwidth floor (released: 1000)
#   RNS_NO_JITTER=1    no +-50% random model-size jitter per task
#   RNS_SUBCLUSTERS=1  static scheduler over the whole cluster (released: 4)
#   RNS_ECMP_SEED=S    seeded ECMP choices (released: OS-seeded)
# Prints one JSON line: policy, jobs, avg_jct_s, avg_jrt_s, avg_jwt_s, wall_s.
set -euo pipefail
TRACE=$(realpath "$1"); POLICY=$2; OUT=$3; shift 3
RNS=${RNS:-/work/rns}; PY=${PY:-/work/rns-venv/bin/python}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"; cd "$OUT"
"$PY" "$HERE/to_rns.py" --trace "$TRACE" --policy "$POLICY" "$@" > exp.ini
start=$(date +%s.%N)
PYTHONPATH="$RNS" /usr/bin/time -f '%e s wall, %M KB max RSS' -o time.txt \
  "$PY" "$RNS/rapidnetsim/main.py" exp.ini > stdout.log 2> stderr.log || { echo "RapidNetSim failed, see $OUT/stderr.log" >&2; exit 1; }
end=$(date +%s.%N)
"$PY" "$HERE/summarise.py" task_time.log "$POLICY" "$(echo "$end - $start" | bc)"
