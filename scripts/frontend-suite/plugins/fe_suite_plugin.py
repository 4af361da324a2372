"""pytest plugin of the frontend-suite harness (ours; not part of the frontend's tests).

1. Seeds Python's `random` module from each test's node id before the test runs. test_mhas.py
   draws its shapes with `random.choice` (it seeds only torch); with this, the frontend run and
   the dnngraph run draw the same shapes.
2. When FE_SUITE_LIVE_LOG names a file, appends one JSON line per test report as it arrives
   (on the xdist controller when xdist is in use), so the outcomes of a run that is cut short
   (timeout, kill) survive even when the junit XML, written only at the session's end, does not.
"""
import json
import os
import random
import zlib

_live_path = None


def pytest_configure(config):
    global _live_path
    if hasattr(config, "workerinput"):  # an xdist worker: the controller records
        return
    _live_path = os.environ.get("FE_SUITE_LIVE_LOG") or None
    if _live_path:
        open(_live_path, "w").close()


def _record(entry):
    if not _live_path:
        return
    try:
        with open(_live_path, "a") as fh:
            fh.write(json.dumps(entry) + "\n")
    except OSError:
        pass


def pytest_runtest_setup(item):
    random.seed(zlib.crc32(item.nodeid.encode("utf-8")))


def pytest_runtest_logreport(report):
    _record({"nodeid": report.nodeid, "when": report.when, "outcome": report.outcome})


def pytest_collectreport(report):
    if report.failed:
        _record({"nodeid": report.nodeid, "when": "collect", "outcome": "failed"})
