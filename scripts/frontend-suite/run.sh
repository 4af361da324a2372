#!/usr/bin/env bash
# Runs a subset of the cuDNN frontend's own Python tests twice on a GPU machine:
#   1. "frontend": against the real frontend wheel (import cudnn -> nvidia-cudnn-frontend);
#   2. "dnngraph": with dnngraph standing in for `import cudnn` (the shim in shim/cudnn),
#      the real frontend not on the path;
# and writes a junit XML per run plus a per-file comparison table (README.md here).
# The frontend's tests are third-party files and are not in this repository: put its
# test/python tree under .fetests/test/python (ignored by git), or point FE_TESTS_ROOT at it.
#
# Run from the repository root:   bash scripts/frontend-suite/run.sh
# On the device machine, carry .fetests and .whl (ignored paths); build dnngraph there first.
#
# Environment (all optional):
#   OUT                    output folder (default ./fe-suite-out; the device machine sets $OUT)
#   PYTHON                 interpreter (default python3)
#   FE_WHEELS              the frontend wheel(s) to install (default: .whl/*.whl)
#   DNNGRAPH_PYTHONPATH    folder that holds the built `dnngraph` package (default build/gpu/python)
#   FE_SUITE_TIMEOUT       wall-clock seconds per pytest run (default 240; SIGINT, so the junit
#                          XML of the tests done so far is still written; SIGKILL 30 s later)
#   CUDNN_TEST_TIMEOUT     per-test watchdog of the frontend's conftest (default here 90)
#   FE_TESTS_ROOT          the frontend's test/python tree (default .fetests/test/python)
#   FE_SUITE_WHEELS        folder of extra wheels the tests import (default .fetests/wheels:
#                          looseversion, from PyPI)
#   FE_SUITE_FILES         test files relative to FE_TESTS_ROOT (default: the 14 below)
#   FE_SUITE_SELECTION     default, or sdpa-wide (the wider SDPA selection of README.md)
#   FE_SUITE_K             pytest -k expression (default: all of every file except test_mhas.py,
#                          which is cut to 24 fp16/bshd/MHA fwd+bwd cases out of ~32k)
#   FE_SUITE_RUNS          "frontend dnngraph" (default), or just one of them
#   FE_SUITE_ISOLATION     1 (default): the conftest runs the tests in a pytest-xdist worker that
#                          is replaced after a crash (when pytest-xdist is installed); 0: in-process
#   FE_SUITE_EXTRA_PYTHONPATH, FE_SUITE_EXTRA_PYTEST_ARGS: for local debugging only
#   FE_SUITE_DEVICE        gpu (default), or cpu: the CPU dry run on a machine without a GPU
#                          (dnngraph run only, plugins/fe_cpu_dryrun.py redirects the tests' torch
#                          CUDA calls to the CPU and cudnn.create_handle() to dnngraph's CPU handle;
#                          NOT a GPU measurement). There DNNGRAPH_PYTHONPATH defaults to
#                          build/release/python, FE_SUITE_TIMEOUT to 7200, CUDNN_TEST_TIMEOUT to 60
#                          (a test cut by it is reported as a skip "CPU dry run timeout"; needs
#                          pytest-xdist, else the first timeout ends the run) and
#                          DNNGRAPH_REFERENCE_MAX_BYTES to 8 GiB (the CPU engine's fp64 memory)
set -u
DEVICE="${FE_SUITE_DEVICE:-gpu}"
CPU_LABEL="CPU dry run: torch CUDA calls redirected to the CPU, not a GPU measurement"

PY="${PYTHON:-python3}"
REPO="$PWD"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
TESTS_ROOT="${FE_TESTS_ROOT:-$REPO/.fetests/test/python}"
WHEELS="${FE_SUITE_WHEELS:-$REPO/.fetests/wheels}"
OUT="${OUT:-./fe-suite-out}"
mkdir -p "$OUT" && OUT="$(cd "$OUT" && pwd)"
if [ "$DEVICE" = cpu ]; then
    SUITE_TIMEOUT="${FE_SUITE_TIMEOUT:-7200}"
    export CUDNN_TEST_TIMEOUT="${CUDNN_TEST_TIMEOUT:-60}"
    # The reference engine's fp64 working memory, 4 GiB by default: test_rmsnorm.py's LLM-sized
    # backward needs about 4.6 GiB (and passes in ~20 s with 8).
    export DNNGRAPH_REFERENCE_MAX_BYTES="${DNNGRAPH_REFERENCE_MAX_BYTES:-8589934592}"
    DNNGRAPH_PY="${DNNGRAPH_PYTHONPATH:-$REPO/build/release/python}"
else
    SUITE_TIMEOUT="${FE_SUITE_TIMEOUT:-240}"
    export CUDNN_TEST_TIMEOUT="${CUDNN_TEST_TIMEOUT:-90}"
    DNNGRAPH_PY="${DNNGRAPH_PYTHONPATH:-$REPO/build/gpu/python}"
fi
case "$DNNGRAPH_PY" in /*) ;; *) DNNGRAPH_PY="$REPO/$DNNGRAPH_PY" ;; esac
RUNS="${FE_SUITE_RUNS:-frontend dnngraph}"
DRY_ARGS=()
TABLE_ARGS=()
if [ "$DEVICE" = cpu ]; then
    RUNS=dnngraph  # the real frontend needs a GPU
    DRY_ARGS=(-p fe_cpu_dryrun)
    TABLE_ARGS=(--title "$CPU_LABEL" --timeout-marker "CPU dry run timeout")
elif [ "$DEVICE" != gpu ]; then
    echo "[fe-suite] FE_SUITE_DEVICE must be gpu or cpu, not '$DEVICE'" >&2; exit 2
fi
# FE_SUITE_SELECTION=sdpa-wide: the wider SDPA selection of README.md (test_mhas.py only; GQA,
# bias / ALiBi / dropout / left bound, paged, ragged: 154 ids). FE_SUITE_FILES / FE_SUITE_K win.
case "${FE_SUITE_SELECTION:-default}" in
    default) ;;
    sdpa-wide)
        FE_SUITE_FILES="${FE_SUITE_FILES:-test_mhas.py}"
        FE_SUITE_K="${FE_SUITE_K:-(bfloat16 and bshd_bshd_bshd and group_query and paged0 and dropout0 and ragged0 and bias0 and alibi0 and left_bound0) or (bfloat16 and bshd_bshd_bshd and multi_head and paged0 and ragged0 and padding0 and (bias1 or alibi1 or dropout1 or left_bound1) and TOP_LEFT and (infer0 or test_sdpa_backward)) or (paged1 and bfloat16 and multi_head and bias0 and alibi0 and dropout0 and left_bound0 and TOP_LEFT) or (ragged1 and bfloat16 and multi_head and bias0 and alibi0 and dropout0 and left_bound0 and TOP_LEFT)}" ;;
    *) echo "[fe-suite] FE_SUITE_SELECTION must be default or sdpa-wide" >&2; exit 2 ;;
esac
FILES="${FE_SUITE_FILES:-conv/graph/test_conv_bias.py conv/graph/test_wgrads.py conv/graph/test_conv_genstats.py conv/graph/test_conv_reduction.py test_matmul_bias_relu.py core/graph/test_kernel_cache.py norm/graph/test_layernorm.py norm/graph/test_rmsnorm.py norm/graph/test_batchnorm.py norm/graph/test_instancenorm.py test_apply_rope.py test_silu_and_mul.py test_slice.py test_mhas.py}"
K_EXPR="${FE_SUITE_K:-not test_mhas or (not bfloat16 and bshd_bshd_bshd and multi_head and bias0 and alibi0 and dropout0 and ragged0 and left_bound0 and (paged0 or test_sdpa_backward))}"
EXTRA_PP="${FE_SUITE_EXTRA_PYTHONPATH:-}"
case "$EXTRA_PP" in ""|/*) ;; *) EXTRA_PP="$REPO/$EXTRA_PP" ;; esac
read -r -a EXTRA_ARGS <<< "${FE_SUITE_EXTRA_PYTEST_ARGS:-}"
read -r -a FILE_ARGS <<< "$FILES"

export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
if [ "${FE_SUITE_ISOLATION:-1}" = "0" ]; then export CUDNN_TEST_NO_ISOLATION=1; fi

WORK="$(mktemp -d /tmp/fe-suite.XXXXXX)"
FE_SITE="$WORK/frontend-site"
DEPS_SITE="$WORK/deps"
mkdir -p "$DEPS_SITE"
PREFLIGHT="$OUT/preflight.txt"
: > "$PREFLIGHT"
RUNINFO=""
if [ "$DEVICE" = cpu ]; then
    echo "*** $CPU_LABEL ***" | tee "$PREFLIGHT"
    RUNINFO="*** $CPU_LABEL ***
"
    "$PY" -c "import xdist" 2>/dev/null \
        || echo "[fe-suite] WARNING: pytest-xdist missing: the first per-test timeout ends the whole run"
fi

say() { echo "[fe-suite] $*"; }

# looseversion: imported by the frontend tests, absent from some images; shipped as a wheel.
if ! "$PY" -c "import looseversion" 2>/dev/null; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$DEPS_SITE" "$WHEELS"/*.whl \
        || say "WARNING: could not install looseversion from $WHEELS"
fi

case " $RUNS " in *" frontend "*)
    # shellcheck disable=SC2086
    if ! "$PY" -m pip install -q --no-deps --no-compile --target "$FE_SITE" ${FE_WHEELS:-.whl/*.whl}; then
        say "WARNING: installing the frontend wheel failed"
    fi ;;
esac

if [ ! -d "$DNNGRAPH_PY/dnngraph" ]; then
    say "WARNING: no dnngraph package under $DNNGRAPH_PY (set DNNGRAPH_PYTHONPATH)"
fi

# preflight NAME PYTHONPATH: what `import cudnn` resolves to, recorded in preflight.txt.
preflight() {
    local name="$1" pp="$2"
    {
        echo "== $name  PYTHONPATH=$pp"
        PYTHONPATH="$pp" FE_SUITE_RUN="$name" FE_SITE="$FE_SITE" FE_SUITE_DEVICE="$DEVICE" "$PY" - <<'PYEOF' 2>&1
import os, sys
run = os.environ["FE_SUITE_RUN"]
if os.environ.get("FE_SUITE_DEVICE") == "cpu":
    import fe_cpu_dryrun
    print(fe_cpu_dryrun.LABEL)
try:
    import cudnn
except Exception as exc:  # reported, and the run still goes on (collection errors are data)
    print(f"import cudnn FAILED: {type(exc).__name__}: {exc}")
    sys.exit(0)
print("cudnn.__name__ =", cudnn.__name__)
print("cudnn.__file__ =", getattr(cudnn, "__file__", None))
print("cudnn.__version__ =", getattr(cudnn, "__version__", None))
for fn in ("backend_version", "backend_version_string"):
    try:
        print(f"cudnn.{fn}() =", getattr(cudnn, fn)())
    except Exception as exc:
        print(f"cudnn.{fn}() raised {type(exc).__name__}: {exc}")
if run == "dnngraph":
    import dnngraph
    assert cudnn is dnngraph, "the shim did not make cudnn the dnngraph module"
    fe_site = os.environ.get("FE_SITE", "")
    leaked = [p for p in sys.path if fe_site and p.startswith(fe_site)]
    assert not leaked, f"frontend site on sys.path: {leaked}"
    print("OK: cudnn is dnngraph; the real frontend is not on sys.path")
else:
    assert "dnngraph" not in cudnn.__name__, "frontend run resolved cudnn to dnngraph"
    print("OK: cudnn is the real frontend")
PYEOF
    } >> "$PREFLIGHT"
}

# run_suite NAME PYTHONPATH
run_suite() {
    local name="$1" pp="$2" rc start end
    preflight "$name" "$pp"
    say "run '$name': pytest over ${#FILE_ARGS[@]} files, bounded to ${SUITE_TIMEOUT}s"
    local suite_name="$name"
    if [ "$DEVICE" = cpu ]; then
        say "$CPU_LABEL"
        suite_name="$name-cpu-dry-run"
    fi
    rm -f "$OUT/junit-$name.xml" "$OUT/live-$name.jsonl"
    start=$(date +%s)
    (
        cd "$TESTS_ROOT" || exit 99
        PYTHONPATH="$pp" FE_SUITE_LIVE_LOG="$OUT/live-$name.jsonl" timeout -s INT -k 30 "$SUITE_TIMEOUT" \
            "$PY" -m pytest -q -p no:cacheprovider -rs -p fe_suite_plugin ${DRY_ARGS[@]+"${DRY_ARGS[@]}"} \
            --continue-on-collection-errors --junitxml="$OUT/junit-$name.xml" -o junit_suite_name="$suite_name" \
            -k "$K_EXPR" ${EXTRA_ARGS[@]+"${EXTRA_ARGS[@]}"} "${FILE_ARGS[@]}"
    ) > "$OUT/log-$name.txt" 2>&1
    rc=$?
    end=$(date +%s)
    tail -n 25 "$OUT/log-$name.txt"
    local note=""
    [ "$rc" = 124 ] || [ "$rc" = 130 ] || [ "$rc" = 137 ] && note=" (hit the ${SUITE_TIMEOUT}s bound)"
    RUNINFO="${RUNINFO}run $name: pytest exit $rc$note, $((end - start)) s
"
    say "run '$name' done: exit $rc$note, $((end - start)) s"
}

join_pp() { local IFS=:; echo "$*"; }

for run in $RUNS; do
    case "$run" in
        frontend)
            run_suite frontend "$(join_pp "$FE_SITE" "$DEPS_SITE" "$HERE/plugins" ${EXTRA_PP:+"$EXTRA_PP"})" ;;
        dnngraph)
            run_suite dnngraph "$(join_pp "$HERE/shim" "$DNNGRAPH_PY" "$DEPS_SITE" "$HERE/plugins" ${EXTRA_PP:+"$EXTRA_PP"})" ;;
        *) say "unknown run '$run' (use frontend and/or dnngraph)" ;;
    esac
done

echo
cat "$PREFLIGHT"
echo
"$PY" "$HERE/junit_table.py" "$OUT/junit-frontend.xml" "$OUT/junit-dnngraph.xml" \
    --files "${FILE_ARGS[@]}" --out "$OUT/table.txt" \
    --live-frontend "$OUT/live-frontend.jsonl" --live-dnngraph "$OUT/live-dnngraph.jsonl" \
    ${TABLE_ARGS[@]+"${TABLE_ARGS[@]}"}
printf '%s' "$RUNINFO" | tee -a "$OUT/table.txt"
rm -rf "$WORK"
