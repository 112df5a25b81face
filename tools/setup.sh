#!/usr/bin/env bash
# Create ./.venv (if missing) and install elecsolver into it with the test and MPI extras.
# Needs only python3 >= 3.10. TORCH_SPEC picks the torch build (default: torch==2.13.0).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
    .venv/bin/python -m pip install --quiet "${TORCH_SPEC:-torch==2.13.0}"
fi
.venv/bin/python -m pip install --quiet -e ".[test,mpi]"
