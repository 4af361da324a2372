#!/usr/bin/env bash
# Run ON the GPU machine (device tool), from the repo root, with .devdeps/ carried along
# (scripts/prepare-device-deps.sh): the GPU fault, soak, multi-process and sanitizer checks of
# docs/hardening.md in one command. Builds the GPU targets, then runs
#   faults  : python/tests/test_gpu_faults.py (out-of-memory during build, workspace and
#             execute; 10^6 executes of one graph; 10^5 shapes through the torch ops with the
#             cache at 64; 8 processes x 1,000 builds sharing the disk caches, one writer
#             SIGKILLed), figures appended to $OUT/faults.jsonl;
#   memcheck: compute-sanitizer --tool memcheck over the GPU test binary and the torch GPU tests.
# (dnngraph launches no kernels of its own, only cuDNN's, so racecheck has nothing of ours to
# check.) Usage: bash scripts/hardening-device.sh [build-dir]
# Knobs: DNNGRAPH_FAULT_SCALE (default 1: the full sizes), FAULTS=0 / SANITIZER=0 skip a part,
# FAULTS_K (a pytest -k selection of the fault tests: oom, soak_one, soak_distinct, processes),
# FAULTS_TIMEOUT, SANITIZER_TIMEOUT / SANITIZER_TORCH_TIMEOUT (seconds), GTEST_FILTER (a subset
# of the C++ GPU tests under memcheck), MEMCHECK_SHARDS (memcheck processes side by side over
# the C++ GPU tests, default 6), MEMCHECK_TORCH (the torch test files under memcheck, or none).
# A device call lasts at most 10 minutes: the full sizes take longer, so run the parts in
# separate calls (the build tree is kept between them), e.g.
#   SANITIZER=0 FAULTS_K=oom ...; SANITIZER=0 FAULTS_K=soak_one ...; SANITIZER=0
#   FAULTS_K=soak_distinct ...; SANITIZER=0 FAULTS_K=processes ...; FAULTS=0 ...
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/hardening-out}
build=${1:-build/gpu}
mkdir -p "$out"
declare -A result
{
  echo "date: $(date -u)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null
} | tee "$out/env.txt"

. "$root/scripts/device-configure.sh"
if [ ! -f "$build/CMakeCache.txt" ]; then
  configure_device_build "$build" "$out/build.log" -DDNNGRAPH_BUILD_BENCH=OFF -DDNNGRAPH_BUILD_SAMPLES=OFF
fi
cmake --build "$build" -j16 --target dnngraph_gpu_tests _dnngraph dnngraph_python_files \
  dnngraph_torch -- -k 0 >>"$out/build.log" 2>&1
result[build]=$?
[ "${result[build]}" != 0 ] && grep -E "error|FAILED" "$out/build.log" | head -40

run() {  # name, timeout, command...; then the log's last lines
  run_logged "$@"
  tail -n 8 "$out/$1.log"
}

if [ "${FAULTS:-1}" = 1 ]; then
  # The plan cache on disk in a folder of its own (the multi-process test makes its own).
  mkdir -p "$out/plan-cache"
  run faults "${FAULTS_TIMEOUT:-560}" env DNNGRAPH_FAULT_FIGURES="$out/faults.jsonl" \
    DNNGRAPH_FAULT_SCALE="${DNNGRAPH_FAULT_SCALE:-1}" DNNGRAPH_CACHE_DIR="$out/plan-cache" \
    PYTHONPATH="$build/python" python3 -m pytest -q -s -p no:cacheprovider \
    ${FAULTS_K:+-k "$FAULTS_K"} python/tests/test_gpu_faults.py
  cat "$out/faults.jsonl" 2>/dev/null
fi

sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
if [ "${SANITIZER:-1}" = 1 ] && [ -x "$sanitizer" ]; then
  # Only the C++ GPU tests' own errors count: torch's allocator and cuDNN's probing of device
  # properties are reported by memcheck as API errors, which --report-api-errors no hides.
  # The suite in MEMCHECK_SHARDS shards side by side (GoogleTest's sharding), each its own log.
  shards=${MEMCHECK_SHARDS:-6}
  for i in $(seq 0 $((shards - 1))); do
    # Timing assertions mean nothing on instrumented kernels: DNNGRAPH_NO_TIMING_CHECKS.
    GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i DNNGRAPH_NO_TIMING_CHECKS=1 \
      run_logged "memcheck_gpu_tests_$i" \
      "${SANITIZER_TIMEOUT:-560}" "$sanitizer" --tool memcheck --leak-check full \
      --report-api-errors no --error-exitcode 99 \
      "$build/tests/dnngraph_gpu_tests" ${GTEST_FILTER:+--gtest_filter=$GTEST_FILTER} &
  done
  wait
  for i in $(seq 0 $((shards - 1))); do
    log="$out/memcheck_gpu_tests_$i.log"
    # 0: memcheck finished with no error and no test failed (a timeout leaves no summary).
    result[memcheck_gpu_tests_$i]=$(grep -q "ERROR SUMMARY: 0 errors" "$log" &&
      ! grep -q '^\[  FAILED  \]' "$log" && echo 0 || echo 1)
    echo "shard $i: $(grep -c '^\[       OK \]' "$log") tests ok, $(grep -c '^\[  FAILED  \] Gpu' "$log") failed;" \
      "$(grep -E 'ERROR SUMMARY|LEAK SUMMARY' "$log" | tr '\n' ' ')"
  done
  torch_tests=${MEMCHECK_TORCH:-python/tests/test_torch_gemm.py python/tests/test_torch_conv.py \
python/tests/test_torch_sdpa.py python/tests/test_torch_norm.py python/tests/test_torch_runtime.py}
  if [ "$torch_tests" != none ]; then
    # shellcheck disable=SC2086  # a list of paths
    run memcheck_torch "${SANITIZER_TORCH_TIMEOUT:-${SANITIZER_TIMEOUT:-560}}" "$sanitizer" \
      --tool memcheck --report-api-errors no --error-exitcode 99 env PYTHONPATH="$build/python" \
      python3 -m pytest -q -p no:cacheprovider -k cuda $torch_tests
    grep -E "ERROR SUMMARY" "$out/memcheck_torch.log"
  fi
fi

echo "---- summary"
for k in "${!result[@]}"; do printf "%-24s rc=%s\n" "$k" "${result[$k]}"; done | sort
