"""dnngraph.compat.install_as_cudnn(): frontend-written imports (`import cudnn`,
`from cudnn.experimental.ops import ...`) reach dnngraph, and a real frontend is never shadowed
unless asked. Each test runs in a fresh interpreter so that sys.modules starts clean."""

import os
import subprocess
import sys
import textwrap

import pytest


def run(code, extra_path=None):
    env = dict(os.environ)
    if extra_path:
        env["PYTHONPATH"] = extra_path + os.pathsep + env.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_frontend_imports_reach_dnngraph():
    out = run("""
        import importlib.util, sys
        assert importlib.util.find_spec("cudnn") is None, "a real frontend is importable here"
        import dnngraph
        cudnn = dnngraph.compat.install_as_cudnn()
        assert cudnn is dnngraph and dnngraph.compat.install_as_cudnn() is dnngraph
        import cudnn
        import cudnn.experimental.ops
        from cudnn.experimental.ops import rms_norm
        from cudnn.experimental import ops
        from cudnn import datatypes, wrapper
        assert cudnn is dnngraph and ops is dnngraph.experimental.ops
        assert rms_norm is dnngraph.experimental.ops.rms_norm
        assert cudnn.experimental.ops is ops and datatypes is dnngraph.datatypes
        g = cudnn.pygraph(handle=cudnn.create_handle(device="cpu"))
        print("ok", type(g).__module__.split(".")[0])
        """)
    assert out.split() == ["ok", "dnngraph"]


def test_a_real_frontend_is_not_shadowed(tmp_path):
    fake = tmp_path / "cudnn"
    fake.mkdir()
    (fake / "__init__.py").write_text("REAL = True\n")
    out = run("""
        import sys
        import dnngraph
        try:
            dnngraph.compat.install_as_cudnn()
        except RuntimeError as e:
            assert "force=True" in str(e) and "cudnn" in str(e), str(e)
            print("refused")
        assert "cudnn" not in sys.modules
        import cudnn
        assert cudnn.REAL
        assert dnngraph.compat.install_as_cudnn(force=True) is dnngraph
        import cudnn
        from cudnn.experimental.ops import layer_norm
        assert cudnn is dnngraph
        print("forced")
        """, extra_path=str(tmp_path))
    assert out.split() == ["refused", "forced"]
