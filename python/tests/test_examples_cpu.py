"""examples/tutorial_cpu.py runs as documented (the tutorial's graphs on the CPU engine, each
checked against float64 numpy inside the script)."""

import pathlib
import subprocess
import sys

import pytest

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "tutorial_cpu.py"


@pytest.mark.skipif(not EXAMPLE.exists(), reason="examples/ not in this tree")
def test_tutorial_cpu_example_passes_its_checks():
    r = subprocess.run([sys.executable, str(EXAMPLE)], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = [line for line in r.stdout.splitlines() if "max rel error" in line]
    assert len(lines) == 3 and all(line.endswith("ok") for line in lines), r.stdout
