"""Runs every frontend-style program of tests/compat/programs with `import dnngraph as cudnn`
(on the CPU reference engine here; on the GPU when one is visible and COMPAT_DEVICE != cpu)."""

import importlib
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from tests.compat import harness  # noqa: E402
from tests.compat.programs import NAMES  # noqa: E402


@pytest.fixture(scope="module")
def h():
    return harness.load(impl="dnngraph")


@pytest.mark.parametrize("name", NAMES)
def test_program(h, name):
    prog = importlib.import_module(f"tests.compat.programs.{name}")
    result = prog.run(h)
    if result is None:
        pytest.skip(f"{name} needs torch")
    harness.check(result)
