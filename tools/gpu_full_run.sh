#!/usr/bin/env bash
# The main job's `full` preset on one GPU (5 minutes of training on one H200): writes the run's folder OUT/run
# (fields.h5, fields.xdmf, metrics.json, convergence.csv, PNGs, checkpoint, logs), a copy of metrics.json in OUT,
# and OUT/log.txt.
# Usage: bash tools/gpu_full_run.sh OUT [extra `elecsolver run` options, e.g. --steps 200 for a short try]
#   DEVICE=cpu in the environment: a dry run on the CPU (add --steps 20).
#   PACK=1: for a transfer limited to a few files of at most 16 MB, OUT/run becomes OUT/run.tar.gz cut into
#   OUT/run.tar.gz.part-aa, -ab, ... (join with `cat OUT/run.tar.gz.part-* | tar xz`).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: bash tools/gpu_full_run.sh OUT_DIR [elecsolver run options]}
shift
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
exec > >(tee -a "$OUT/log.txt") 2>&1
source tools/gpu_env.sh
echo "gpu_full_run: $(date -u +%FT%TZ), python $PY"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv
"$PY" -m elecsolver.cli run maxwell-point-source-2d --preset full --device "${DEVICE:-cuda}" --out "$OUT/run" "$@"
code=$?
echo "gpu_full_run: elecsolver exit $code"
[ -f "$OUT/run/metrics.json" ] && cat "$OUT/run/metrics.json" && cp "$OUT/run/metrics.json" "$OUT/"
if [ "${PACK:-0}" = 1 ]; then
    tar czf "$OUT/run.tar.gz" -C "$OUT" run && split -b 15M "$OUT/run.tar.gz" "$OUT/run.tar.gz.part-" &&
        rm -rf "$OUT/run.tar.gz" "$OUT/run"
fi
exit $code
