#!/usr/bin/env bash
# Installs what building and testing dnngraph needs on a fresh Debian 12 machine, and the
# project's Python environment .venv (the Makefile's interpreter). Idempotent: skips what is
# already there. PYTHON=/path/to/python3 picks the interpreter the venv is made from.
set -euo pipefail
cd "$(dirname "$0")/.."
APT_PKGS=(cmake g++ make python3-dev python3-venv libgtest-dev libgmock-dev libbenchmark-dev
          nlohmann-json3-dev libcli11-dev libxxhash-dev libsqlite3-dev clang clang-format
          libclang-rt-14-dev)
step() { echo "setup: $*"; }
missing=()
for p in "${APT_PKGS[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  step "installing Debian packages with apt-get: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
else
  step "Debian packages: all present"
fi
# Debian's python3 is externally managed (PEP 668): the Python packages go into a venv.
VENV=.venv
PY_PKGS=("nanobind>=2.0" "scikit-build-core>=0.10" numpy pytest hypothesis ml_dtypes)
# --system-site-packages: packages the distribution (or the interpreter) already has are used
# as they are; what is missing is installed into the venv.
if [ ! -x "$VENV/bin/python" ]; then
  step "creating the virtual environment $VENV (from ${PYTHON:-python3})"
  "${PYTHON:-python3}" -m venv --system-site-packages "$VENV"
fi
PY="$VENV/bin/python"
if "$PY" - <<'PYEOF'; then
import importlib.util, sys
mods = ("nanobind", "scikit_build_core", "numpy", "pytest", "hypothesis", "ml_dtypes")
sys.exit(0 if all(importlib.util.find_spec(m) for m in mods) else 1)
PYEOF
  step "Python packages in $VENV: all present"
else
  step "installing into $VENV from PyPI: ${PY_PKGS[*]} (about 100 MB)"
  "$PY" -m pip install --disable-pip-version-check "${PY_PKGS[@]}"
fi
# PyTorch, for the dnngraph.torch ops (torch/) and their tests; DNNGRAPH_SETUP_TORCH=0 skips it.
# The PyPI wheel brings its CUDA libraries (~5 GB); the ops' CPU path needs none of them.
# (torch.Tensor: run from the repository root, "import torch" alone finds the torch/ sources.)
if [ "${DNNGRAPH_SETUP_TORCH:-1}" != 1 ]; then
  step "torch: skipped (DNNGRAPH_SETUP_TORCH=${DNNGRAPH_SETUP_TORCH}); the dnngraph.torch ops are left out"
elif $PY -c "import torch; torch.Tensor" >/dev/null 2>&1; then
  step "torch: present in $VENV"
else
  step "installing torch into $VENV from PyPI for the dnngraph.torch ops: about 5 GB with its CUDA libraries (DNNGRAPH_SETUP_TORCH=0 skips it)"
  $PY -m pip install --disable-pip-version-check --progress-bar on torch
fi
