#!/usr/bin/env bash
# Install perflab (editable) into the current Python.  ./install.sh [--test]
#
# * No torch yet: installs $TORCH_SPEC first (default torch==2.13.0, which a CPU-only machine of ours
#   has as a local CPU wheel); pip's default torch would otherwise pull several GB of CUDA wheels.
#   An existing torch (e.g. a GPU image's) is kept as it is.
# * Offline host: PERFLAB_WHEELS=DIR installs the wheels in DIR (e.g. .whl from
#   ../shared/gpu-wheelhouse.sh) without an index and without dependency resolution, so the image's
#   torch/triton stay untouched.
# * PYTHON=/path/to/python installs into that interpreter (a venv's) instead of python3.
# --test adds the test tools (pytest, pytest-timeout, pytest-xdist, psycopg, ray, cuda-bindings + NVRTC, the CUTLASS
# Python DSL).
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3}
extras=""
[ "${1:-}" = "--test" ] && extras="[test]"
pip_q() { "$PY" -m pip install -q --disable-pip-version-check "$@"; }
say() { echo "install.sh: $*"; }  # one line per step: pip -q is silent for a minute or more

say "into $("$PY" -c 'import sys; print(sys.executable, "(Python", sys.version.split()[0] + ")")')"
if [ -n "${PERFLAB_WHEELS:-}" ]; then
  say "installing the wheels in $PERFLAB_WHEELS (no index, no dependency resolution)"
  pip_q --no-index --no-deps --no-compile --upgrade "$PERFLAB_WHEELS"/*.whl
  say "installing perflab (editable: $(pwd))"
  pip_q --no-index --no-deps --no-build-isolation -e .
else
  if ! "$PY" -c "import torch" 2> /dev/null; then
    say "installing ${TORCH_SPEC:-torch==2.13.0} (no torch yet; minutes on a slow link)"
    pip_q "${TORCH_SPEC:-torch==2.13.0}"
  fi
  say "installing perflab (editable: $(pwd)) and its dependencies${extras:+, with the test tools}"
  pip_q -e ".$extras"
fi
say "checking the imports"
"$PY" -c "import bench, torch, mlflow; print('perflab installed: torch', torch.__version__, '| mlflow', mlflow.__version__)"
