#!/usr/bin/env bash
# Set everything up, then run the test suite (training runs marked `slow` are left out;
# pass -m slow to run only those, or -m "" to run everything).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1   # mpirun tests when run as root
export PATH="$PWD/.venv/bin:$PATH"
exec .venv/bin/python -m pytest -m "not slow" "$@"
