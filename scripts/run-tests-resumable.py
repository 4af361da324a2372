"""Runs a pytest selection so that one hung or crashing test cannot hide the rest: each failure
is written to REPORT with its traceback as it happens (DNNGRAPH_TEST_REPORT, read by
python/tests/conftest.py), a test still running after --hang-s seconds dumps its threads' stacks
into REPORT and ends the process, and the run then resumes with the tests after it. Ends with one
line per failed, hung or crashed test. For the GPU machine, where a device call has a time limit.

    python scripts/run-tests-resumable.py --report out/failures.txt [--hang-s 120] -- PYTEST_ARGS
"""

import argparse
import os
import subprocess
import sys


def collect(pytest_args):
    args = [x for x in pytest_args if x not in ("-q", "-qq", "--quiet", "-v", "-vv")]
    r = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", *args],
                       capture_output=True, text=True)
    ids = [ln.strip() for ln in r.stdout.splitlines() if "::" in ln]
    if not ids:
        sys.exit(f"run-tests-resumable: nothing collected:\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
    return ids


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--report", required=True, help="file the failures are appended to")
    p.add_argument("--hang-s", type=float, default=120, help="seconds before a test counts as hung")
    p.add_argument("pytest_args", nargs=argparse.REMAINDER)
    a = p.parse_args()
    args = [x for x in a.pytest_args if x != "--"]
    # The test paths (files, folders, node ids) are replaced by the collected ids on a resume;
    # everything else (options and their values) is passed on as given.
    options = [x for x in args if ".py" not in x and not os.path.isdir(x)]
    ids = collect(args)
    env = dict(os.environ, DNNGRAPH_TEST_REPORT=a.report, DNNGRAPH_TEST_HANG_S=str(a.hang_s))
    running = a.report + ".running"
    ended = []  # (nodeid, why) of the tests that ended the process
    rc = 0
    while ids:
        if os.path.exists(running):
            os.remove(running)
        rc = subprocess.run([sys.executable, "-m", "pytest", *options, *ids], env=env).returncode
        if not os.path.exists(running):
            break  # the session finished
        with open(running) as f:
            stuck = f.read().strip()
        why = "hung" if rc == 1 else f"ended the process (exit code {rc})"
        ended.append((stuck, why))
        with open(a.report, "a") as f:
            f.write(f"==== {why.upper().split()[0]} {stuck}: the process ended during it "
                    f"(exit code {rc}); a stack dump above is its hang\n\n")
        ids = ids[ids.index(stuck) + 1:] if stuck in ids else []
        rc = rc or 1
    failed = []
    if os.path.exists(a.report):
        with open(a.report) as f:
            failed = [ln[len("==== FAILED "):].strip() for ln in f if ln.startswith("==== FAILED ")]
    for nodeid in failed:
        print(f"FAILED {nodeid}")
    for nodeid, why in ended:
        print(f"ENDED {nodeid}: {why}")
    sys.exit(1 if failed or ended else rc)


if __name__ == "__main__":
    main()
