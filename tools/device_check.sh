#!/usr/bin/env bash
# The GPU check in one command (about 4 minutes on one H200): the tests marked `cuda` (tests/test_cuda.py), then
# benchmarks/gpu.py.  Writes into OUT:
#   pytest.txt   the tests' output and summary        junit.xml   their results per test
#   gpu-<device>-<date>.json   the benchmark          log.txt     everything printed
# Usage: bash tools/device_check.sh OUT [DEVICE]
#   DEVICE cuda (default), or cpu for a dry run here: the cuda tests skip, the benchmark runs tiny sizes.
# Time limits (seconds; environment): TEST_TIMEOUT (120), BENCH_BUDGET (200, the benchmark's own budget).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: bash tools/device_check.sh OUT_DIR [cuda|cpu]}
DEVICE=${2:-cuda}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
exec > >(tee -a "$OUT/log.txt") 2>&1
start=$(date +%s)
source tools/gpu_env.sh
echo "device_check: $(date -u +%FT%TZ), python $PY, device $DEVICE, out $OUT"
"$PY" -c "import torch, elecsolver; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'gpu',
torch.cuda.get_device_name(0) if torch.cuda.is_available() else None, 'elecsolver', elecsolver.__version__)"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,temperature.gpu \
    --format=csv

# 1. the cuda tests (in parallel workers where pytest-xdist is installed: they share the one GPU)
export ELECSOLVER_TEST_CACHE="${ELECSOLVER_CACHE:-$GPU_ENV_TMP/cache}"  # the tests' reference cache (conftest.py)
XDIST=""
"$PY" -c "import xdist" 2>/dev/null && XDIST="-n 4"
timeout "${TEST_TIMEOUT:-120}" "$PY" -m pytest tests/test_cuda.py -m cuda -q -p no:cacheprovider $XDIST \
    --junitxml="$OUT/junit.xml" -o addopts="-ra" 2>&1 | tee "$OUT/pytest.txt"
echo "device_check: tests exit ${PIPESTATUS[0]} after $(( $(date +%s) - start )) s"

# 2. the benchmark (its sections stop at its budget; the JSON holds what was measured)
"$PY" benchmarks/gpu.py --device "$DEVICE" --out "$OUT" --budget-s "${BENCH_BUDGET:-200}"
echo "device_check: benchmark exit $? after $(( $(date +%s) - start )) s"
