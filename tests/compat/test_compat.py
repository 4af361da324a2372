"""Runs every frontend-style program of tests/compat/programs with `import dnngraph as cudnn`
(on the CPU reference engine here; on the GPU when one is visible and COMPAT_DEVICE != cpu)."""

import importlib
import os
import sys

import pytest

# tests/compat itself (not the repository root: its torch/ directory would pass for a torch
# package where torch is not installed).
HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import compat_harness as harness  # noqa: E402
from compat_programs import NAMES  # noqa: E402


@pytest.fixture(scope="module")
def h():
    return harness.load(impl="dnngraph")


@pytest.mark.parametrize("name", NAMES)
def test_program(h, name):
    prog = importlib.import_module(f"compat_programs.{name}")
    result = prog.run(h)
    if result is None:
        pytest.skip(f"{name} does not run here (it needs torch, or a GPU)")
    harness.check(result)
