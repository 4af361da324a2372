#!/usr/bin/env bash
# Run ON the GPU machine (device tool) with .devdeps/ and .whl/ carried (issue 12): builds the
# GPU tests and the Python module, runs the GPU tests touched by the build path (lazy
# check_support/build_plans, kernel cache, plan cache, canonicalization) and the build-latency
# benchmark with the cuDNN frontend's wheel side by side. Logs under $OUT.
set -uo pipefail
out=${OUT:-$(pwd)/buildspeed-out}; mkdir -p "$out"
build=build/gpu
site=$(python3 -c "import site;print(site.getsitepackages()[0])")
start=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/fe .whl/*.whl >"$out/pip.log" 2>&1
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_COMPILER=/usr/bin/g++ -DCMAKE_C_COMPILER=/usr/bin/gcc \
  -DDNNGRAPH_EXTRA_INCLUDE_DIR="$(pwd)/.devdeps" -DDNNGRAPH_GTEST_SOURCE_DIR="$(pwd)/.devdeps/googletest" \
  -DCUDNN_INCLUDE_DIR="$site/nvidia/cudnn/include" -DDNNGRAPH_CUDNN_INCLUDE_DIR="$site/nvidia/cudnn/include" \
  -DDNNGRAPH_CUDA=ON -DDNNGRAPH_BUILD_BENCH=OFF -DDNNGRAPH_BUILD_TOOLS=OFF -DDNNGRAPH_BUILD_SAMPLES=OFF \
  -DDNNGRAPH_BUILD_PYTHON=ON -DPython_EXECUTABLE="$(command -v python3)" >"$out/build.log" 2>&1
grep -E "plan cache|cuDNN engine" "$out/build.log"
cmake --build "$build" -j16 --target dnngraph_gpu_tests _dnngraph dnngraph_python_files -- -k 0 >>"$out/build.log" 2>&1
echo "build: rc=$? ($(( $(date +%s) - start )) s)"; grep -E "error" "$out/build.log" | head -20
s=$(date +%s)
DNNGRAPH_CACHE=0 timeout ${TESTS_TIMEOUT:-110} "$build/tests/dnngraph_gpu_tests" \
  --gtest_filter="${GTEST_FILTER:-CudnnCanon*:CudnnEngine*:GpuKernelCache*:GpuPlanCache*:GpuConv*:GpuMatmul*:GpuPointwise*:GpuSdpaForward*:GpuNorm*}" \
  >"$out/gpu_tests.log" 2>&1
echo "gpu tests: rc=$? ($(( $(date +%s) - s )) s)"
grep -E "^\[  (FAILED|PASSED|SKIPPED) |Failure|Expected|Which is|differ|rror" "$out/gpu_tests.log" | head -40
s=$(date +%s)
PYTHONPATH="$build/python:/tmp/fe" PYTHONUNBUFFERED=1 timeout ${BENCH_TIMEOUT:-200} \
  python3 bench/python/build_latency.py --warm --persist --json "$out/build_latency.json" 2>&1 | tee "$out/build_latency.log"
echo "bench: rc=$? ($(( $(date +%s) - s )) s); total $(( $(date +%s) - start )) s"
