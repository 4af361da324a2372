#!/usr/bin/env bash
# The training-speed checks on the GPU machine (device tool), in one call: run from the repository
# root with .devdeps carried (scripts/prepare-device-deps.sh). Builds the Python module, the torch
# ops and the GPU tests (build/gpu, kept between calls on a warm machine), then
#   tests   : the GPU tests of GTEST_FILTER (default: attention's; GPU_TESTS_TIMEOUT, default 150 s)
#             and the torch GPU tests of TORCH_TESTS (default: none), through
#             scripts/run-tests-resumable.py: failures with tracebacks in failures.txt as they
#             happen, a hung test (TEST_HANG_S) skipped past;
#   sdpa    : bench/torch/sdpa_compare.py (kernels of both sides, cuDNN logs with SDPA_LOG=1);
#   blocks  : bench/torch/blocks.py $BLOCKS_ARGS (default --profile --no-compile);
#   ops     : bench/torch/bench_torch_ops.py --no-autotune;
#   compile : bench/torch/compile_backend.py $COMPILE_ARGS (the torch.compile backend on stock
#             modules against eager and Inductor, each first call in a fresh process; COMPILE_TIMEOUT,
#             default 480 s);
#   order   : bench/torch/residual_order.py (bias and residual add in both orders, and Inductor's
#             form, at ResNet-50's 1x1 and the basic blocks' 3x3 convolution shapes);
#   linear  : bench/torch/linear_epilogue.py (the GPT blocks' forward GEMMs with their epilogues:
#             our graph, autotuned, split, and cuBLAS through ATen).
# STEPS picks them (default "tests sdpa blocks"). Writes build.txt and one log per step to $OUT.
set -uo pipefail
out=${OUT:-$(pwd)/train-device-out}
build=build/gpu
mkdir -p "$out"
. scripts/device-configure.sh
s=$(date +%s)
[ -f "$build/build.ninja" ] || configure_device_build "$build" "$out/build.txt"
cmake --build "$build" -j16 --target _dnngraph dnngraph_python_files dnngraph_torch dnngraph_gpu_tests \
  >>"$out/build.txt" 2>&1
echo "build: rc=$? ($(( $(date +%s) - s )) s)"; grep -E "error" "$out/build.txt" | head -20
export PYTHONPATH=$build/python PYTHONUNBUFFERED=1
steps=" ${STEPS:-tests sdpa blocks} "
step() {  # name, timeout, command...
  local name=$1 t=$2; shift 2
  [[ $steps == *" $name "* ]] || return 0
  local s=$(date +%s)
  timeout "$t" "$@" >"$out/$name.txt" 2>&1
  echo "$name: rc=$? ($(( $(date +%s) - s )) s)"
}
step tests "${GPU_TESTS_TIMEOUT:-150}" "$build/tests/dnngraph_gpu_tests" --gtest_filter="${GTEST_FILTER:-GpuSdpa*}"
grep -E "^\[  (FAILED|PASSED) |Failure" "$out/tests.txt" | head -20
if [ -n "${TORCH_TESTS:-}" ]; then
  # Failures reach $out/failures.txt with their tracebacks as they happen; a test running past
  # TEST_HANG_S (default 120) seconds has its stacks dumped there and the run goes on after it.
  s=$(date +%s)
  DNNGRAPH_TEST_ON=${DNNGRAPH_TEST_ON:-cuda} timeout -k 30 "${TORCH_TESTS_TIMEOUT:-300}" \
    python3 scripts/run-tests-resumable.py --report "$out/failures.txt" --hang-s "${TEST_HANG_S:-120}" \
    -- -q -p no:cacheprovider -p no:logging --durations=12 $TORCH_TESTS >"$out/torch_tests.txt" 2>&1
  echo "torch_tests: rc=$? ($(( $(date +%s) - s )) s)"
  grep -E "^(FAILED|ENDED) |[0-9]+ (passed|failed)" "$out/torch_tests.txt" | cut -c1-300 | tail -40
fi
step sdpa 150 python3 bench/torch/sdpa_compare.py ${SDPA_LOG:+--log /tmp/sdpa-log}
[ -n "${SDPA_LOG:-}" ] && gzip -9 /tmp/sdpa-log/*.log && cp /tmp/sdpa-log/*.gz "$out/"
grep -E "^----|Self CUDA time total|sdpa_sm90|matmul_dq" "$out/sdpa.txt" | cut -c1-160 | head -20
[[ $steps == *" ops "* ]] && { step ops 200 python3 bench/torch/bench_torch_ops.py --no-autotune; tail -n 14 "$out/ops.txt"; }
step compile "${COMPILE_TIMEOUT:-480}" python3 bench/torch/compile_backend.py ${COMPILE_ARGS:-}
[[ $steps == *" compile "* ]] && tail -n 20 "$out/compile.txt"
step order 200 python3 bench/torch/residual_order.py
[[ $steps == *" order "* ]] && tail -n 30 "$out/order.txt"
step linear 200 python3 bench/torch/linear_epilogue.py
[[ $steps == *" linear "* ]] && cut -c1-200 "$out/linear.txt" | tail -n 30
step blocks "${BLOCKS_TIMEOUT:-330}" env DNNGRAPH_LOG=info python3 bench/torch/blocks.py ${BLOCKS_ARGS---profile --no-compile}
tail -n 12 "$out/blocks.txt"
exit 0
