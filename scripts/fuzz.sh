#!/usr/bin/env bash
# Builds the JSON loader's libFuzzer target with clang and runs it for N seconds.
# Usage: scripts/fuzz.sh [SECONDS=60] [extra libFuzzer flags...]
# Exits non-zero when the fuzzer finds a crash, a sanitizer report or a broken invariant; the
# input that did it is left in $BUILD/artifacts/ (replay: $BUILD/tests/fuzz/json_fuzz FILE).
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_TO_RUN=${1:-60}
shift || true
BUILD=${FUZZ_BUILD:-build/fuzz}
JOBS=${JOBS:-2}

CC=clang CXX=clang++ cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DDNNGRAPH_FUZZ=ON -DDNNGRAPH_BUILD_TESTS=OFF -DDNNGRAPH_CUDA=OFF -DDNNGRAPH_BUILD_TOOLS=OFF \
  -DDNNGRAPH_BUILD_BENCH=OFF -DDNNGRAPH_BUILD_SAMPLES=OFF -DDNNGRAPH_BUILD_PYTHON=OFF >/dev/null
cmake --build "$BUILD" -j "$JOBS" --target json_fuzz

# The corpus grows in $BUILD/corpus; tests/data (seed graphs and bad_*.json) seeds it.
mkdir -p "$BUILD/corpus" "$BUILD/artifacts"
echo "fuzzing the JSON loader for ${SECONDS_TO_RUN}s"
"$BUILD/tests/fuzz/json_fuzz" "$BUILD/corpus" tests/data \
  -dict=tests/fuzz/json.dict -max_total_time="$SECONDS_TO_RUN" -max_len=16384 -timeout=10 \
  -rss_limit_mb=2048 -artifact_prefix="$BUILD/artifacts/" -print_final_stats=1 "$@"
