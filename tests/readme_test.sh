#!/usr/bin/env bash
# Runs README.md's snippets the way a reader would, after `make demo` or `make build`:
#   - the C++ example must be samples/readme_example.cpp verbatim (the build line compiles that);
#   - each ```sh block runs in bash from the repository root in the activated venv, unless the
#     line before its fence is `<!-- readme_test: skip (why) -->`;
#   - each ```python block runs from the repository root in the activated venv ($VENV, default
#     .venv) with PYTHONPATH unset: the venv must import the build by itself (make link-venv);
#     a block importing dnngraph.torch is skipped when the torch ops were not built;
#   - each ```cmake block is the body of a project around samples/readme_example.cpp, built
#     against the install tree $DNNGRAPH_PREFIX and run (skipped when it is not set).
# Any failing snippet fails the script, with the snippet's number and first line.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
VENV=${VENV:-$ROOT/.venv}
BUILD=${BUILD:-build/release}
PY=${PY:-$VENV/bin/python}
if [ ! -f "$VENV/bin/activate" ]; then
  echo "readme: $VENV is not a virtual environment (no bin/activate): the README's Python runs in"
  echo "the activated .venv; run make demo first, or give VENV=<a venv> / make PY=<venv>/bin/python"
  exit 1
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# README.md -> $TMP/NN.<lang> (NN.<lang>.skip for blocks marked skip).
"$PY" - "$TMP" <<'PYEOF'
import pathlib, re, sys
out = pathlib.Path(sys.argv[1])
text = pathlib.Path("README.md").read_text()
for i, m in enumerate(re.finditer(r"(?:^(<!-- readme_test: skip[^\n]*-->)\n)?^```(\w+)\n(.*?)^```", text, re.S | re.M)):
    skip, lang, body = m.groups()
    (out / f"{i:02d}.{lang}{'.skip' if skip else ''}").write_text(body)
PYEOF

cpp=$(ls "$TMP"/*.cpp)
[ "$(echo "$cpp" | wc -l)" = 1 ] || { echo "README.md: expected one cpp block"; exit 1; }
diff "$cpp" <(tail -n +2 samples/readme_example.cpp) ||
  { echo "README.md's C++ example differs from samples/readme_example.cpp"; exit 1; }
echo "readme: the C++ example is samples/readme_example.cpp"

fail() { echo "readme: snippet $1 FAILED ($(head -1 "$2"))"; exit 1; }
for f in "$TMP"/*; do
  n=$(basename "$f")
  case "$n" in
    *.skip) echo "readme: snippet $n skipped (marked in README.md)" ;;
    *.sh)
      (cd "$ROOT" && env -u PYTHONPATH bash -c ". '$VENV/bin/activate' && bash -euo pipefail '$f'") \
        >"$TMP/log" 2>&1 ||
        { cat "$TMP/log"; fail "$n" "$f"; }
      echo "readme: snippet $n (sh, activated venv) ran" ;;
    *.python)
      if grep -q "dnngraph.torch" "$f" && [ ! -e "$BUILD/python/dnngraph/torch/libdnngraph_torch.so" ]; then
        echo "readme: snippet $n skipped: the torch ops were not built ($BUILD has no libdnngraph_torch.so)"
        continue
      fi
      (cd "$ROOT" && env -u PYTHONPATH bash -c ". '$VENV/bin/activate' && python -" <"$f") \
        >"$TMP/log" 2>&1 || { cat "$TMP/log"; fail "$n" "$f"; }
      echo "readme: snippet $n (python, activated venv, no PYTHONPATH) ran" ;;
    *.cmake)
      if [ -z "${DNNGRAPH_PREFIX:-}" ]; then
        echo "readme: snippet $n skipped: DNNGRAPH_PREFIX (an install tree) is not set"
        continue
      fi
      mkdir -p "$TMP/app"
      cp samples/readme_example.cpp "$TMP/app/main.cpp"
      { echo "cmake_minimum_required(VERSION 3.25)"; echo "project(app CXX)";
        echo "set(CMAKE_CXX_STANDARD 20)"; cat "$f"; } >"$TMP/app/CMakeLists.txt"
      (cmake -S "$TMP/app" -B "$TMP/app/build" -DCMAKE_PREFIX_PATH="$DNNGRAPH_PREFIX" &&
        cmake --build "$TMP/app/build" && env -u LD_LIBRARY_PATH "$TMP/app/build/app") \
        >"$TMP/log" 2>&1 || { cat "$TMP/log"; fail "$n" "$f"; }
      echo "readme: snippet $n (cmake project against $DNNGRAPH_PREFIX) built and ran" ;;
    *.cpp) ;;
    *) echo "readme: snippet $n: no rule for this language"; exit 1 ;;
  esac
done
echo "readme: every snippet passed"
