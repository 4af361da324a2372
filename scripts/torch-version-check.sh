#!/usr/bin/env bash
# Runs the torch tests on the CPU against another torch release (the GPU machine's, say):
#   bash scripts/torch-version-check.sh 2.11.0 [pytest arguments]
# Needs the project's .venv (`make test` makes it). The torch wheel goes, without its
# dependencies, into .venv-torch-VERSION, which also sees .venv's packages (numpy, pytest,
# nanobind, the CUDA libraries torch loads); dnngraph's Python module and torch ops are built
# against it in build/torch-VERSION; then python/tests/test_torch_*.py run (or the arguments).
set -euo pipefail
ver=${1:?usage: scripts/torch-version-check.sh VERSION [pytest arguments]}
shift
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
[ -x .venv/bin/python ] || { echo "no .venv: run 'make test' first" >&2; exit 2; }
main_sp=$(.venv/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
venv=.venv-torch-$ver
if [ ! -x "$venv/bin/python" ]; then
  base=$(.venv/bin/python -c "import sys; print(sys._base_executable)")
  "$base" -m venv --system-site-packages "$venv"
  "$venv/bin/pip" install -q --no-deps "torch==$ver"
  sp=$("$venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  echo "$main_sp" >"$sp/zz_project_venv.pth"  # after the venv's own: its torch comes first
  if [ -d "$main_sp/nvidia" ] && [ ! -e "$sp/nvidia" ]; then ln -s "$main_sp/nvidia" "$sp/nvidia"; fi
fi
"$venv/bin/python" -c "import torch; print('torch', torch.__version__)"
build=build/torch-$ver
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DPython_EXECUTABLE="$root/$venv/bin/python" \
  -DDNNGRAPH_BUILD_TORCH=ON -DDNNGRAPH_BUILD_PYTHON=ON -DDNNGRAPH_BUILD_TESTS=OFF \
  -DDNNGRAPH_BUILD_BENCH=OFF -DDNNGRAPH_BUILD_SAMPLES=OFF -DDNNGRAPH_BUILD_TOOLS=OFF >/dev/null
cmake --build "$build" -j"$(nproc)" --target _dnngraph dnngraph_torch >/dev/null
[ $# -gt 0 ] || set -- python/tests/test_torch_*.py
DNNGRAPH_REQUIRE_TORCH=1 PYTHONSAFEPATH=1 PYTHONPATH="$root/$build/python" \
  "$venv/bin/python" -m pytest -q -p no:cacheprovider -p no:logging -rfE "$@"
