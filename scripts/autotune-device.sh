#!/usr/bin/env bash
# Run ON the GPU machine (device tool) from the repo root with .devdeps/ carried: builds the
# autotune / CUDA graph GPU tests, their benchmark and the CLI, runs them (logs under $OUT),
# then the rest of the GPU tests with the time left. Usage: bash scripts/autotune-device.sh
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
  -DDNNGRAPH_BUILD_PYTHON=OFF -DDNNGRAPH_BUILD_TORCH=OFF >"$out/cmake.log" 2>&1
cmake --build build/gpu -j16 --target dnngraph_gpu_tests bench_autotune_cuda_graph dnngraph_cli \
  >"$out/build.log" 2>&1
echo "build rc=$? ($(( $(date +%s) - start )) s)"; grep -E "error" "$out/build.log" | head -20
t=build/gpu/tests/dnngraph_gpu_tests
timeout ${MINE_TIMEOUT:-120} $t --gtest_filter='GpuAutotune*:GpuCudaGraph*' >"$out/mine.log" 2>&1
echo "mine rc=$?"; grep -E "^\[  |autotune \]|Failure|Expected|Which is|error" "$out/mine.log" | head -40
timeout ${BENCH_TIMEOUT:-120} build/gpu/bench/bench_autotune_cuda_graph >"$out/bench.log" 2>&1
echo "bench rc=$?"; grep -E "CHECK|RESULT|TARGET|ERROR" "$out/bench.log"
timeout 60 build/gpu/tools/dnngraph tune --device cuda --svg "$out/conv.svg" \
  tests/data/conv_bias_relu.json >"$out/tune.log" 2>"$out/tune.err"
echo "tune rc=$?"; head -50 "$out/tune.log"; tail -c 300 "$out/tune.err"
left=$(( ${TOTAL:-400} - ($(date +%s) - start) ))
if [ "$left" -gt 20 ]; then
  timeout $left $t --gtest_filter='-GpuAutotune*:GpuCudaGraph*' >"$out/rest.log" 2>&1
  echo "rest rc=$? (limit $left s)"; grep -E "^\[  (FAILED|PASSED|SKIPPED) |Failure" "$out/rest.log" | head -30
  tail -3 "$out/rest.log"
fi
