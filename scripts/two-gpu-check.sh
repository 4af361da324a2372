#!/usr/bin/env bash
# Run ON a 2-GPU machine (device tool, kind nvidia-h200-x2), from the repo root, with .devdeps/
# carried (scripts/prepare-device-deps.sh). Builds the Python module and dnngraph.torch as
# scripts/gpu-check.sh does with TORCH_ONLY=1 (same build tree, same configure line), then runs
# the multi-GPU work, most important first, within a time budget:
#   dist_tests    python/tests/test_torch_distributed.py: DDP (transformer, resnet) and FSDP2
#                 (bf16 compute) over 2 GPUs with NCCL against one GPU, every op on cuda:0 and
#                 cuda:1 in one process, and the gloo CPU runs
#   stream_tests  python/tests/test_torch_streams.py (every op family under torch.cuda.device(1)
#                 and on side streams of both GPUs) and test_torch_runtime.py (streams, threads,
#                 CUDA graphs, two devices)
#   ddp_bench     examples/torch_ddp.py --bench: per-GPU DDP step time vs one GPU on half the
#                 batch (target ratio <= 1.15)
#   fsdp_nccl, ddp_nccl   the examples' own printouts (losses, per-rank devices, parameters
#                 held, graphs cached)
# Prints a table, writes the logs under $OUT (at most 8 files: env.txt, build.log, table.txt,
# dist_tests.log, stream_tests.log, ddp_bench.log, examples.log, logs.tgz).
# Usage: bash scripts/two-gpu-check.sh [build-dir]   (default build/gpu, shared with gpu-check.sh)
# Knobs (environment): SKIP_BUILD=1 (use the build tree as it is), BUDGET_S (default 540: the
# whole run, build included), STEPS (default "dist_tests stream_tests ddp_bench fsdp_nccl
# ddp_nccl"), BENCH_ARGS (more arguments of torch_ddp.py --bench), PY (default python3).
set -uo pipefail
# NVLink multicast stays off in every process started here (and in the ones they spawn): on
# these shared hosts a program that uses it can take the GPUs out of service.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1
# A dnngraph.torch op that falls back to ATen is an error: what is compared and timed is ours.
export DNNGRAPH_TORCH_FALLBACK=error
root=$(pwd)
out=${OUT:-$root/two-gpu-check-out}
build=${1:-build/gpu}
budget=${BUDGET_S:-540}
py=${PY:-python3}  # the Python that holds torch
steps=" ${STEPS:-dist_tests stream_tests ddp_bench fsdp_nccl ddp_nccl} "
mkdir -p "$out"
start=$(date +%s)
declare -A rc secs note
order=()

{
  echo "date: $(date -u)"
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader
  nvidia-smi topo -m 2>&1 | head -8
  $py -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'GPUs', torch.cuda.device_count(), 'nccl', torch.cuda.nccl.version() if torch.cuda.is_available() else None)"
  echo "NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE TORCH_SYMM_MEM_DISABLE_MULTICAST=$TORCH_SYMM_MEM_DISABLE_MULTICAST NVSHMEM_DISABLE_NVLS=$NVSHMEM_DISABLE_NVLS"
} 2>&1 | tee "$out/env.txt"
gpus=$($py -c "import torch; print(torch.cuda.device_count())" 2>/dev/null || echo 0)
[ "$gpus" -ge 2 ] || echo "WARNING: $gpus GPU(s): the 2-GPU tests skip and the bench cannot run"

s=$(date +%s)
targets="_dnngraph dnngraph_python_files"
if [ "${SKIP_BUILD:-0}" = 1 ]; then
  echo "SKIP_BUILD=1: using $build as it is" >"$out/build.log"; rc[build]=0
else
  [ -d "$root/.devdeps" ] || { echo "no .devdeps/: run scripts/prepare-device-deps.sh and carry .devdeps"; exit 2; }
  # The configure line of scripts/gpu-check.sh (the same cache: both scripts share the tree).
  . "$root/scripts/device-configure.sh"
  PY=$py configure_device_build "$build" "$out/build.log" -DDNNGRAPH_BUILD_BENCH=ON
  [ -d "$build/torch" ] && targets="$targets dnngraph_torch"  # configured when torch imports
  # Bounded too: the whole script ends within the budget.
  timeout $(( budget - ($(date +%s) - start) - 30 )) \
    cmake --build "$build" -j"$(nproc)" --target $targets >>"$out/build.log" 2>&1
  rc[build]=$?
fi
secs[build]=$(( $(date +%s) - s )); order+=(build)
lib="$build/python/dnngraph/torch/libdnngraph_torch.so"
if [ "${rc[build]}" != 0 ] || [ ! -f "$lib" ]; then
  [ "${rc[build]}" = 0 ] && rc[build]=1
  note[build]="FAILED (rc ${rc[build]}; $lib built: $([ -f "$lib" ] && echo yes || echo no))"
  grep -E "error|FAILED" "$out/build.log" | head -40
else
  note[build]="$targets"
fi
echo "build: rc=${rc[build]} (${secs[build]} s)"
pypath=$(cd "$build" 2>/dev/null && pwd)/python  # absolute: the spawned processes inherit it

summary() {  # name, log, its first line of this step: the line that says how the step went
  local pattern
  case "$1" in
    *_tests) pattern="[0-9]+ (passed|failed|error|skipped)" ;;
    ddp_bench) pattern="ratio|Error|error:" ;;
    *) pattern="^(MATCH|DIFFER)|Error" ;;
  esac
  tail -n +"$3" "$2" | grep -E "$pattern" | tail -1 | cut -c1-160
}

run() {  # name, log, timeout, command...: runs within what is left of the budget
  local name=$1 log=$2 t=$3; shift 3
  local left=$(( budget - ($(date +%s) - start) - 15 ))
  order+=("$name")
  if [[ $steps != *" $name "* ]]; then return; fi
  if [ "${rc[build]}" != 0 ]; then rc[$name]=n/a; note[$name]="not run: the build failed"; return; fi
  if [ "$left" -lt 30 ]; then rc[$name]=n/a; note[$name]="not run: out of time"; return; fi
  [ "$t" -gt "$left" ] && t=$left
  local s=$(date +%s) from=$(( $(cat "$out/$log" 2>/dev/null | wc -l) + 1 ))
  echo "==== $name: $* (timeout ${t} s)" >>"$out/$log"
  timeout "$t" env PYTHONPATH="$pypath" "$@" >>"$out/$log" 2>&1
  rc[$name]=$?; secs[$name]=$(( $(date +%s) - s ))
  [ "${rc[$name]}" = 124 ] && note[$name]="TIMED OUT after ${t} s" || note[$name]=$(summary "$name" "$out/$log" "$from")
  echo "$name: rc=${rc[$name]} (${secs[$name]} s) ${note[$name]}"
}


pytest="$py -m pytest -q -p no:cacheprovider -rfEs"
run dist_tests dist_tests.log 240 $pytest -s python/tests/test_torch_distributed.py
show() { [ -f "$out/$1" ] && grep -E "$2" "$out/$1" | head -"${3:-40}"; }
show dist_tests.log "^(PASSED|FAILED|SKIPPED)|DDP |FSDP2 |losses|Error|assert"
run stream_tests stream_tests.log 150 $pytest python/tests/test_torch_streams.py python/tests/test_torch_runtime.py
show stream_tests.log "FAILED|Error|SKIPPED" 30
# A measurement: an op that falls back is counted and reported there rather than raising.
run ddp_bench ddp_bench.log 150 env DNNGRAPH_TORCH_FALLBACK=warn $py examples/torch_ddp.py --bench \
  ${BENCH_ARGS:-}
show ddp_bench.log "."
run fsdp_nccl examples.log 90 $py examples/torch_fsdp.py --backend nccl
run ddp_nccl examples.log 90 $py examples/torch_ddp.py --backend nccl
show examples.log "^(====|transformer|resnet|  rank|MATCH|DIFFER)|Error"

{
  echo "---- two-GPU check ($gpus GPUs, $(( $(date +%s) - start )) s of $budget)"
  printf "%-14s %-4s %6s  %s\n" step rc s result
  for k in "${order[@]}"; do
    printf "%-14s %-4s %6s  %s\n" "$k" "${rc[$k]:--}" "${secs[$k]:-0}" "${note[$k]:-not selected}"
  done
} | tee "$out/table.txt"
( cd "$out" && tar czf logs.tgz ./*.log env.txt table.txt 2>/dev/null )
# 1 when a selected step failed or did not run.
for k in "${order[@]}"; do case "${rc[$k]:-}" in 0|"") ;; *) exit 1 ;; esac; done
exit 0
