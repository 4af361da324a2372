#!/usr/bin/env bash
# The frontend-compatibility checks on the GPU machine (device tool), in two parts that each fit
# one device call (10 minutes). Run from the repository root with .devdeps, .whl and .fetests
# carried (scripts/prepare-device-deps.sh, docs/compatibility.md):
#
#   bash scripts/compat-device.sh 1   # build, the GPU tests, the Python suite on the GPU,
#                                     # scripts/compat-compare.py on every program  (~7 min)
#   bash scripts/compat-device.sh 2   # the frontend's own tests, both libraries: the default
#                                     # selection, then the wider SDPA one            (~8 min)
#   bash scripts/compat-device.sh 3   # serving: the serve_* programs beside the frontend,
#                                     # then scripts/compat-serve-latency.py (build latency
#                                     # in fresh processes: plan cache cold and warm on disk,
#                                     # dynamic shapes over 21 shapes)                (~5 min)
#
# Parts 2 and 3 reuse part 1's build/gpu when the machine is still warm and build it otherwise.
# Writes a few files to $OUT (the device tool returns at most 8): part 1 gpu_tests.log,
# pytest.log, compat.md, summary.txt; part 2 table-default.txt, table-sdpa.txt, logs.tgz;
# part 3 serve-compat.md, serve-latency.md, summary.txt.
set -uo pipefail
part=${1:?usage: bash scripts/compat-device.sh 1|2|3}
root=$(pwd)
out=${OUT:-$root/compat-device-out}
mkdir -p "$out"
work=$(mktemp -d /tmp/compat-device.XXXXXX)

gpu_check() {  # $1: PYTHON_CHECKS
  OUT="$work/gc" BENCHES=0 TORCH_CHECKS=0 TUTORIAL=0 PYTHON_CHECKS="$1" \
    bash scripts/gpu-check.sh build/gpu
}

case "$part" in
1)
  gpu_check 1 | tee "$out/summary.txt"
  for f in gpu_tests.log pytest.log; do [ -f "$work/gc/$f" ] && cp "$work/gc/$f" "$out/"; done
  # COMPAT_PROGRAMS=a,b limits the programs; the table is rewritten after each one.
  python3 scripts/compat-compare.py --build build/gpu --markdown "$out/compat.md" \
    ${COMPAT_PROGRAMS:+--programs "$COMPAT_PROGRAMS"} 2>&1 | tee -a "$out/summary.txt"
  ;;
2)
  [ -f build/gpu/python/dnngraph/__init__.py ] || gpu_check 0 >"$work/build.txt" 2>&1
  OUT="$work/fs-default" FE_SUITE_TIMEOUT=${FE_SUITE_TIMEOUT:-150} \
    DNNGRAPH_PYTHONPATH=build/gpu/python bash scripts/frontend-suite/run.sh
  cp "$work/fs-default/table.txt" "$out/table-default.txt" 2>/dev/null
  # The wider SDPA selection of scripts/frontend-suite/README.md.
  OUT="$work/fs-sdpa" FE_SUITE_TIMEOUT=${FE_SUITE_TIMEOUT:-150} FE_SUITE_SELECTION=sdpa-wide \
    DNNGRAPH_PYTHONPATH=build/gpu/python bash scripts/frontend-suite/run.sh
  cp "$work/fs-sdpa/table.txt" "$out/table-sdpa.txt" 2>/dev/null
  (cd "$work" && tar czf "$out/logs.tgz" fs-default fs-sdpa 2>/dev/null)
  cat "$out"/table-*.txt
  ;;
3)
  [ -f build/gpu/python/dnngraph/__init__.py ] || gpu_check 0 >"$work/build.txt" 2>&1
  serve=$(cd tests/compat/compat_programs && ls serve_*.py | sed 's/\.py$//' | paste -sd, -)
  python3 scripts/compat-compare.py --build build/gpu --markdown "$out/serve-compat.md" \
    --programs "$serve" 2>&1 | tee "$out/summary.txt"
  python3 scripts/compat-serve-latency.py --build build/gpu --markdown "$out/serve-latency.md" \
    2>&1 | tee -a "$out/summary.txt"
  ;;
*)
  echo "usage: bash scripts/compat-device.sh 1|2|3" >&2
  exit 2
  ;;
esac
