#!/usr/bin/env bash
# Installs what building and testing dnngraph needs on a fresh Debian 12 machine, and the
# project's Python environment .venv (the Makefile's interpreter). Idempotent: skips what is
# already there. PYTHON=/path/to/python3 picks the interpreter the venv is made from.
set -euo pipefail
cd "$(dirname "$0")/.."
APT_PKGS=(cmake g++ make python3-dev python3-venv libgtest-dev libgmock-dev libbenchmark-dev
          nlohmann-json3-dev libcli11-dev libxxhash-dev libsqlite3-dev clang clang-format
          libclang-rt-14-dev)
missing=()
for p in "${APT_PKGS[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# Debian's python3 is externally managed (PEP 668): the Python packages go into a venv.
VENV=.venv
PY_PKGS=("nanobind>=2.0" "scikit-build-core>=0.10" numpy pytest hypothesis ml_dtypes)
# --system-site-packages: packages the distribution (or the interpreter) already has are used
# as they are; what is missing is installed into the venv.
if [ ! -x "$VENV/bin/python" ]; then
  "${PYTHON:-python3}" -m venv --system-site-packages "$VENV"
fi
PY="$VENV/bin/python"
"$VENV/bin/python" - <<'PYEOF' || "$VENV/bin/python" -m pip install -q --disable-pip-version-check "${PY_PKGS[@]}"
import importlib.util, sys
mods = ("nanobind", "scikit_build_core", "numpy", "pytest", "hypothesis", "ml_dtypes")
sys.exit(0 if all(importlib.util.find_spec(m) for m in mods) else 1)
PYEOF
# PyTorch, for the dnngraph.torch ops (torch/) and their tests; DNNGRAPH_SETUP_TORCH=0 skips it.
# The PyPI wheel brings its CUDA libraries (~5 GB); the ops' CPU path needs none of them.
# (torch.Tensor: run from the repository root, "import torch" alone finds the torch/ sources.)
if [ "${DNNGRAPH_SETUP_TORCH:-1}" = 1 ] && ! $PY -c "import torch; torch.Tensor" >/dev/null 2>&1; then
  echo "setup: installing torch from PyPI for the dnngraph.torch ops (DNNGRAPH_SETUP_TORCH=0 skips it)"
  $PY -m pip install -q torch
fi
