#!/usr/bin/env bash
# Set everything up, then run the default test suite: everything but the runs that train presets to check their
# error (marked `accuracy`; pass -m accuracy to run those) and the long ones (marked `slow`; -m slow); -m "" runs all.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1   # mpirun tests when run as root
export PATH="$PWD/.venv/bin:$PATH"
exec .venv/bin/python -m pytest -m "not slow and not accuracy" "$@"
