"""Helpers of the property suite: hypothesis settings, the count of cases run (reported by
python/tests/conftest.py), and what a dnngraph error must look like.

DNNGRAPH_PROPERTY_SCALE multiplies every test's example count (default 0.01: a quick run inside `make test-python`;
CI sets it so that the suite runs >= 1e5 cases, see .ci/run). Every failure a case provokes
must be a dnngraph error with a message: ValueError, TypeError, dnngraph.NotSupportedError or
RuntimeError, never a crash, another exception type, or a UnicodeError."""

import os

import numpy as np
from hypothesis import HealthCheck, settings

import dnngraph as cudnn

SCALE = float(os.environ.get("DNNGRAPH_PROPERTY_SCALE", "0.01"))
CASES = {"n": 0}


def examples(n):
    return max(1, int(n * SCALE))


def prop_settings(n):
    # Derandomized by default, so CI's verdict does not depend on the run: the same >= 1e5 cases
    # every time. DNNGRAPH_PROPERTY_RANDOM=1 explores new cases (for hunting, not for gating).
    return settings(max_examples=examples(n), deadline=None, database=None,
                    derandomize=os.environ.get("DNNGRAPH_PROPERTY_RANDOM") != "1",
                    suppress_health_check=list(HealthCheck))


def count_case():
    CASES["n"] += 1


def min_cases():
    return int(os.environ.get("DNNGRAPH_PROPERTY_MIN_CASES", "0"))


# What a bad input may raise: dnngraph's errors, each with a message.
DNNGRAPH_ERRORS = (ValueError, TypeError, cudnn.NotSupportedError, RuntimeError, OverflowError)


def check_error(e):
    """`e` is a dnngraph error with a readable message (not a decode error or a C++ type)."""
    assert isinstance(e, DNNGRAPH_ERRORS), f"{type(e).__name__}: {e}"
    assert not isinstance(e, UnicodeError), f"{type(e).__name__}: {e}"
    msg = str(e)
    assert msg.strip(), f"{type(e).__name__} without a message"
    assert "nlohmann" not in msg and "std::" not in msg, msg


def ws(graph):
    return np.empty(max(graph.get_workspace_size(), 1), dtype=np.uint8)
