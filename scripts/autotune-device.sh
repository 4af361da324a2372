#!/usr/bin/env bash
# Run ON the GPU machine (device tool) from the repo root with .devdeps/ carried: builds the
# autotune / CUDA graph GPU tests, their benchmark and the CLI, runs them (logs under $OUT),
# then the rest of the GPU tests with the time left. Usage: bash scripts/autotune-device.sh
# Knobs: PYTHON=1 also builds the Python module and runs the Python autotune / CUDA graph tests
# on the GPU; REST=0 skips the rest of the GPU tests; TOTAL (s) bounds the whole script.
set -uo pipefail
out=${OUT:-$PWD/autotune-out}; mkdir -p "$out"
site=$(python3 -c "import site;print(site.getsitepackages()[0])")
start=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; git log --oneline -1 2>/dev/null
cmake -S . -B build/gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=/usr/bin/g++ \
  -DCMAKE_C_COMPILER=/usr/bin/gcc -DDNNGRAPH_EXTRA_INCLUDE_DIR=$PWD/.devdeps \
  -DDNNGRAPH_GTEST_SOURCE_DIR=$PWD/.devdeps/googletest \
  -DDNNGRAPH_CUDNN_INCLUDE_DIR=$site/nvidia/cudnn/include -DDNNGRAPH_CUDA=ON \
  -DDNNGRAPH_BUILD_BENCH=ON -DDNNGRAPH_BUILD_TOOLS=ON -DDNNGRAPH_BUILD_SAMPLES=OFF \
  -DDNNGRAPH_BUILD_PYTHON=${PYTHON:-0} -DPython_EXECUTABLE="$(command -v python3)" \
  -DDNNGRAPH_BUILD_TORCH=OFF >"$out/cmake.log" 2>&1
targets="dnngraph_gpu_tests bench_autotune_cuda_graph dnngraph_cli"
[ "${PYTHON:-0}" = 1 ] && targets="$targets _dnngraph dnngraph_python_files"
cmake --build build/gpu -j16 --target $targets >"$out/build.log" 2>&1
echo "build rc=$? ($(( $(date +%s) - start )) s)"; grep -E "error" "$out/build.log" | head -20
t=build/gpu/tests/dnngraph_gpu_tests
timeout ${MINE_TIMEOUT:-120} $t --gtest_filter='GpuAutotune*:GpuCudaGraph*' >"$out/mine.log" 2>&1
echo "mine rc=$?"; grep -E "^\[  |autotune \]|Failure|Expected|Which is|error" "$out/mine.log" | head -40
timeout ${BENCH_TIMEOUT:-120} build/gpu/bench/bench_autotune_cuda_graph >"$out/bench.log" 2>&1
echo "bench rc=$?"; grep -E "CHECK|RESULT|TARGET|ERROR" "$out/bench.log"
timeout 60 build/gpu/tools/dnngraph tune --device cuda --svg "$out/conv.svg" \
  tests/data/conv_bias_relu.json >"$out/tune.log" 2>"$out/tune.err"
echo "tune rc=$?"; head -50 "$out/tune.log"; tail -c 300 "$out/tune.err"
if [ "${PYTHON:-0}" = 1 ]; then
  timeout 150 env PYTHONPATH=build/gpu/python python3 -m pytest -q -p no:cacheprovider \
    python/tests/test_gpu_autotune.py python/tests/test_autotune.py python/tests/test_compat_api.py \
    >"$out/pytest.log" 2>&1
  echo "pytest rc=$?"; grep -E "passed|failed|Error|assert" "$out/pytest.log" | tail -15
fi
left=$(( ${TOTAL:-400} - ($(date +%s) - start) ))
if [ "${REST:-1}" = 1 ] && [ "$left" -gt 20 ]; then
  timeout $left $t --gtest_filter='-GpuAutotune*:GpuCudaGraph*' >"$out/rest.log" 2>&1
  echo "rest rc=$? (limit $left s)"; grep -E "^\[  (FAILED|PASSED|SKIPPED) |Failure" "$out/rest.log" | head -30
  tail -3 "$out/rest.log"
fi
