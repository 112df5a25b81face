#!/usr/bin/env bash
# Create ./.venv (if missing) and install elecsolver into it with the test, MPI and docs extras.
# Needs python3 >= 3.10 and a C++ compiler (torch.compile's CPU backend builds C++ kernels;
# installed with apt-get when missing and running as root). TORCH_SPEC picks the torch build
# (default: torch==2.13.0).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if ! command -v g++ >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq g++ >/dev/null
    else
        echo "setup: no g++ found; --compile (torch.compile on the CPU) needs a C++ compiler" >&2
    fi
fi
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
    .venv/bin/python -m pip install --quiet "${TORCH_SPEC:-torch==2.13.0}"
fi
.venv/bin/python -m pip install --quiet -e ".[test,mpi,docs]"
