# Sourced by tools/device_check.sh and tools/gpu_full_run.sh: a Python that imports elecsolver, on a machine with or
# without `tools/setup.sh`'s .venv and with no network (a lent GPU machine has torch, h5py, scipy, tqdm and
# matplotlib, but neither elecsolver nor meshio nor deepxde).  Sets PY, PYTHONPATH and ELECSOLVER_CACHE.
#   - PY: .venv/bin/python when it imports elecsolver, else python3;
#   - wheels in .whl/ (meshio, deepxde; see docs/gpu.md) are installed into $GPU_ENV_TMP/site when their
#     packages are missing;
#   - without an installed elecsolver, links make parallel/ elecsolver.parallel and problems/ elecsolver.problems
#     in this folder, as pyproject.toml maps them, and the folder goes on PYTHONPATH;
#   - reference solutions carried in .devcache/ (FDTD arrays computed here) are used as the cache.
GPU_ENV_TMP=${GPU_ENV_TMP:-${TMPDIR:-/tmp}/elecsolver-gpu-env}
mkdir -p "$GPU_ENV_TMP"
if [ -x .venv/bin/python ] && .venv/bin/python -c "import elecsolver.parallel" 2>/dev/null; then
    PY=.venv/bin/python
else
    PY=python3
fi
if ls .whl/*.whl >/dev/null 2>&1 && ! "$PY" -c "import meshio, deepxde" 2>/dev/null; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$GPU_ENV_TMP/site" \
        .whl/*.whl && export PYTHONPATH="$GPU_ENV_TMP/site${PYTHONPATH:+:$PYTHONPATH}"
fi
if ! (cd / && "$PY" -c "import elecsolver.parallel, elecsolver.problems" 2>/dev/null); then  # not installed
    # links inside the package, so that it imports from this folder whatever the current directory and however
    # Python is started (`python -m` puts the current directory first on the path); .gitignore names them
    ln -sfn ../parallel elecsolver/parallel
    ln -sfn ../problems elecsolver/problems
    export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
if [ -d .devcache ] && [ -z "${ELECSOLVER_CACHE:-}" ]; then
    mkdir -p "$GPU_ENV_TMP/cache" && cp -n .devcache/* "$GPU_ENV_TMP/cache/" 2>/dev/null
    export ELECSOLVER_CACHE="$GPU_ENV_TMP/cache"
fi
export PY PYTHONUNBUFFERED=1
