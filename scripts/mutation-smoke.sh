#!/usr/bin/env bash
# Mutation smoke: applies known mutations one at a time and checks that the tests catch each.
# Not part of CI's default path; run it after `make build` (docs/testing.md):
#
#   bash scripts/mutation-smoke.sh            # every mutation
#   bash scripts/mutation-smoke.sh gelu       # those whose name contains "gelu"
#
# The source tree is never modified:
# * Python mutations edit a copy of the build tree's Python package ($WORK/py) and run the tests
#   of this checkout against it;
# * C++ mutations edit a copy of the checkout ($WORK/tree, built there with ccache: a rebuild is
#   one file and a link) and run that copy's tests;
# * the others change the environment (DNNGRAPH_TORCH_FORCE_FALLBACK) or an output the compat
#   harness checks.
# Before mutating, the same tests must pass unmutated (else a failure would prove nothing).
# Prints mutation -> CAUGHT / MISSED and exits 1 when a mutation is missed (2 when the setup
# fails). Env: PY (interpreter), BUILD (default build/release), WORK (default build/mutation),
# JOBS (default 2).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PY:-$ROOT/.venv/bin/python}
BUILD=${BUILD:-build/release}
WORK=${WORK:-build/mutation}
JOBS=${JOBS:-2}
ONLY=${1:-}
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
LOG=$WORK/last.log
NAMES=()
VERDICTS=()
MISSED=0

die() {
  echo "mutation-smoke: $*" >&2
  exit 2
}
[ -d "$BUILD/python/dnngraph/torch" ] || die "$BUILD has no dnngraph.torch: run make build first (with torch installed)"

wanted() { [ -z "$ONLY" ] || [[ "$1" == *"$ONLY"* ]]; }

record() {  # name verdict
  NAMES+=("$1")
  VERDICTS+=("$2")
  [[ "$2" == CAUGHT* ]] || MISSED=$((MISSED + 1))
  printf '  %-44s %s\n' "$1" "$2"
}

# replace FILE OLD NEW: OLD must occur exactly once in FILE.
replace() {
  "$PY" - "$@" <<'EOF'
import sys
path, old, new = sys.argv[1:4]
text = open(path).read()
n = text.count(old)
if n != 1:
    sys.exit(f"{path}: the mutation's pattern occurs {n} times (expected once): {old!r}")
open(path, "w").write(text.replace(old, new))
EOF
}

# run_tests DIR PYTHONPATH [pytest args]: 0 when the tests pass, 1 when one fails, else other.
run_tests() {
  local dir=$1 pp=$2
  shift 2
  (cd "$dir" && PYTHONDONTWRITEBYTECODE=1 PYTHONSAFEPATH=1 PYTHONPATH=$pp \
    "$PY" -m pytest -q -x -p no:cacheprovider "$@") >"$LOG" 2>&1
}

verdict() {  # the exit status of run_tests under a mutation
  case $1 in
    0) echo MISSED ;;
    1) echo CAUGHT ;;
    13[0-9] | 14[0-9]) echo "CAUGHT (the tests crashed: signal $(($1 - 128)), see $LOG)" ;;
    *) echo "ERROR (pytest exit $1, see $LOG)" ;;
  esac
}

# ---------------------------------------------------------------- Python mutations
# name | file in the package | old | new | tests
PY_MUTATIONS=(
  "sdpa is_inference default -> False|dnngraph/_compat/ops.py|kw[\"is_inference\"] = True  # the frontend default|kw[\"is_inference\"] = False  # the frontend default|python/tests/test_frontend_defaults.py"
  "conv2d torch.ops path: stride<->padding|dnngraph/torch/functional.py|        input, weight, bias, _pair(stride), _pair(padding), _pair(dilation), groups, activation|        input, weight, bias, _pair(padding), _pair(stride), _pair(dilation), groups, activation|python/tests/test_torch_paths.py"
  "layer_norm default eps 1e-5 -> 1e-6|dnngraph/torch/functional.py|    bias: Optional[torch.Tensor] = None,
    eps: float = 1e-5,|    bias: Optional[torch.Tensor] = None,
    eps: float = 1e-6,|python/tests/test_torch_paths.py"
  "experimental layer_norm default eps -> 1e-6|dnngraph/_experimental_ops.py|               bias: Optional[Any] = None, eps: float = 1e-5) -> Any:|               bias: Optional[Any] = None, eps: float = 1e-6) -> Any:|python/tests/test_frontend_defaults.py"
  "experimental rms_norm default eps -> 1e-6|dnngraph/_experimental_ops.py|def rms_norm(input: Any, weight: Any, bias: Optional[Any] = None, eps: float = 1e-5)|def rms_norm(input: Any, weight: Any, bias: Optional[Any] = None, eps: float = 1e-6)|python/tests/test_frontend_defaults.py"
  "rms_norm default eps None -> 1e-6|dnngraph/torch/functional.py|def rms_norm(
    input: torch.Tensor,
    normalized_shape: Union[int, Sequence[int]],
    weight: Optional[torch.Tensor] = None,
    eps: Optional[float] = None,|def rms_norm(
    input: torch.Tensor,
    normalized_shape: Union[int, Sequence[int]],
    weight: Optional[torch.Tensor] = None,
    eps: Optional[float] = 1e-6,|python/tests/test_torch_paths.py"
)

python_mutations() {
  local spec name file old new tests rc
  for spec in "${PY_MUTATIONS[@]}"; do
    IFS='|' read -r -d '' name file old new tests <<<"$spec"
    tests=${tests%$'\n'}
    wanted "$name" || continue
    rm -rf "$WORK/py" && cp -r "$BUILD/python" "$WORK/py" || die "cannot copy $BUILD/python"
    if ! replace "$WORK/py/$file" "$old" "$new" 2>"$LOG"; then
      record "$name" "PATTERN NOT FOUND ($(tail -1 "$LOG"))"
      continue
    fi
    run_tests "$ROOT" "$WORK/py" $tests
    rc=$?
    record "$name" "$(verdict $rc)"
  done
  rm -rf "$WORK/py"
}

# ---------------------------------------------------------------- environment and outputs
TORCH_RESULT_TESTS="python/tests/test_torch_paths.py python/tests/test_torch_norm.py
  python/tests/test_torch_gemm.py python/tests/test_torch_conv.py python/tests/test_torch_sdpa.py"

# Every op on ATen: each test that checks a result must fail, not just one (the tests of errors
# compute nothing and are left out by name).
force_fallback() {
  local name="every torch op on ATen (FORCE_FALLBACK)" passed
  wanted "$name" || return 0
  (cd "$ROOT" && DNNGRAPH_TORCH_FORCE_FALLBACK=1 PYTHONDONTWRITEBYTECODE=1 PYTHONSAFEPATH=1 \
    PYTHONPATH="$ROOT/$BUILD/python" "$PY" -m pytest -q -p no:cacheprovider -rP \
    -k "not error and not refuses" $TORCH_RESULT_TESTS) >"$LOG" 2>&1
  passed=$(grep -c '^PASSED ' "$LOG")
  if grep -qE '[0-9]+ failed' "$LOG" && [ "$passed" = 0 ]; then
    record "$name" CAUGHT
  else
    record "$name" "MISSED ($passed result tests passed on ATen, see $LOG)"
  fi
}

# A compat program's output replaced (zeros): harness.check must refuse it.
compat_output() {  # program output
  local name="compat $1.$2 all zeros"
  wanted "$name" || return 0
  (cd "$ROOT/tests/compat" && PYTHONSAFEPATH=1 PYTHONPATH="$PWD:$ROOT/$BUILD/python" "$PY" - "$1" "$2" <<'EOF'
import importlib
import sys

import numpy as np

import compat_harness as harness

prog, out = sys.argv[1:3]
h = harness.load(impl="dnngraph", device="cpu")
result = importlib.import_module(f"compat_programs.{prog}").run(h)
harness.check(result)  # unmutated: passes
result.outputs[out] = np.zeros_like(h.numpy(result.outputs[out]))
try:
    harness.check(result)
except AssertionError as e:
    print(e)
    sys.exit(1)
EOF
  ) >"$LOG" 2>&1
  record "$name" "$(verdict $?)"
}

# ---------------------------------------------------------------- C++ mutations
# name | file | old | new | tests (run in the copy)
CPP_MUTATIONS=(
  "reference gelu: erf(x/sqrt2) -> erf(x/2)|src/engines/reference/pointwise.cpp|return 0.5 * a * (1.0 + std::erf(a / std::numbers::sqrt2));|return 0.5 * a * (1.0 + std::erf(a / 2.0));|python/tests/test_pointwise.py"
  "reference softmax: no max subtraction|src/engines/reference/softmax.cpp|sum += (out[j] = std::exp(in[j] - mx));|sum += (out[j] = std::exp(in[j]));|python/tests/test_norms.py"
  "reference batchnorm: no Bessel correction|src/engines/reference/norm.cpp|const double unbias = m > 1.0 ? m / (m - 1.0) : 1.0;|const double unbias = 1.0;|tests/compat/test_compat.py -k batchnorm_train"
)
CPP_TESTS="python/tests/test_pointwise.py python/tests/test_norms.py tests/compat/test_compat.py"

cpp_tree() {  # the checkout (tracked and untracked, not ignored) copied into $WORK/tree and built
  local tree=$WORK/tree
  mkdir -p "$tree"
  git ls-files -z --cached --others --exclude-standard -- . ':!.venv' | tar --null --ignore-failed-read -T - -cf - | tar -xf - -C "$tree" ||
    die "cannot copy the checkout"
  # The venv at the same relative place as in the checkout: ccache's base_dir then maps every
  # path to the one the main build used, and the copy's first build is mostly cache hits.
  [ -e "$tree/.venv/bin/python" ] || ln -sfn "$ROOT/.venv" "$tree/.venv"
  if [ ! -f "$tree/build/release/CMakeCache.txt" ]; then
    cmake -S "$tree" -B "$tree/build/release" -DCMAKE_BUILD_TYPE=Release -DDNNGRAPH_BUILD_PYTHON=ON \
      -DDNNGRAPH_BUILD_TORCH=OFF -DPython_EXECUTABLE="$tree/.venv/bin/python" >"$LOG" 2>&1 ||
      die "configuring the copy failed (see $LOG)"
  fi
  build_tree || die "building the copy failed (see $LOG)"
}

build_tree() {
  cmake --build "$WORK/tree/build/release" -j "$JOBS" --target _dnngraph dnngraph_python_files \
    >"$LOG" 2>&1
}

cpp_mutations() {
  local spec name file old new tests rc any=0 tree=$WORK/tree
  for spec in "${CPP_MUTATIONS[@]}"; do
    IFS='|' read -r name file old new tests <<<"$spec"
    wanted "$name" && any=1
  done
  [ $any = 1 ] || return 0
  echo "building the C++ mutation copy in $tree ..."
  cpp_tree
  run_tests "$tree" "$tree/build/release/python" $CPP_TESTS ||
    die "the C++ mutations' tests fail unmutated (see $LOG)"
  for spec in "${CPP_MUTATIONS[@]}"; do
    IFS='|' read -r name file old new tests <<<"$spec"
    wanted "$name" || continue
    if ! replace "$tree/$file" "$old" "$new" 2>"$LOG"; then
      record "$name" "PATTERN NOT FOUND ($(tail -1 "$LOG"))"
      continue
    fi
    if build_tree; then
      run_tests "$tree" "$tree/build/release/python" $tests
      rc=$?
      record "$name" "$(verdict $rc)"
    else
      record "$name" "BUILD FAILED (see $LOG)"
    fi
    cp "$ROOT/$file" "$tree/$file"  # unmutated again (rebuilt by the next build)
  done
  build_tree || die "rebuilding the unmutated copy failed (see $LOG)"
}

# ---------------------------------------------------------------- run
echo "baseline: the Python-level mutations' tests pass unmutated ..."
run_tests "$ROOT" "$ROOT/$BUILD/python" python/tests/test_frontend_defaults.py $TORCH_RESULT_TESTS ||
  die "the tests fail without a mutation (see $LOG)"
echo "mutations:"
python_mutations
force_fallback
compat_output block_scale_quantize_mx S
compat_output sdpa_fp8 Amax_dP
cpp_mutations

echo
printf '%-46s %s\n' "mutation" "verdict"
for i in "${!NAMES[@]}"; do printf '%-46s %s\n' "${NAMES[$i]}" "${VERDICTS[$i]}"; done
if [ "$MISSED" -gt 0 ]; then
  echo "mutation-smoke: $MISSED of ${#NAMES[@]} mutations not caught"
  exit 1
fi
echo "mutation-smoke: all ${#NAMES[@]} mutations caught"
