#!/usr/bin/env bash
# Installs what building and testing dnngraph needs on a fresh Debian 12 machine.
# Idempotent: skips what is already there.
set -euo pipefail
APT_PKGS=(cmake g++ make python3-dev libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev
          libcli11-dev libxxhash-dev libsqlite3-dev clang clang-format libclang-rt-14-dev)
missing=()
for p in "${APT_PKGS[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
PY=${PYTHON:-python3}
$PY - <<'PYEOF' || $PY -m pip install -q "nanobind>=2.0" "scikit-build-core>=0.10" numpy pytest
import importlib.util, sys
sys.exit(0 if all(importlib.util.find_spec(m) for m in ("nanobind", "scikit_build_core", "numpy", "pytest")) else 1)
PYEOF
# PyTorch, for the dnngraph.torch ops (torch/) and their tests; DNNGRAPH_SETUP_TORCH=0 skips it.
# The PyPI wheel brings its CUDA libraries (~5 GB); the ops' CPU path needs none of them.
# (torch.Tensor: run from the repository root, "import torch" alone finds the torch/ sources.)
if [ "${DNNGRAPH_SETUP_TORCH:-1}" = 1 ] && ! $PY -c "import torch; torch.Tensor" >/dev/null 2>&1; then
  echo "setup: installing torch from PyPI for the dnngraph.torch ops (DNNGRAPH_SETUP_TORCH=0 skips it)"
  $PY -m pip install -q torch
fi
