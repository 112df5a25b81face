#!/usr/bin/env bash
# Set everything up, then train maxwell-point-source-2d (quick preset) on the CPU into ./out.
# Extra arguments go to `elecsolver run` (e.g. --preset ci, --steps 100).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
exec .venv/bin/elecsolver run maxwell-point-source-2d --out out "$@"
