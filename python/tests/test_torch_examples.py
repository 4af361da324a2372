"""The examples/ programs: the guide's pattern on dnngraph's Python API, and the blocks built
from dnngraph.torch ops training like their PyTorch twins."""

import os
import subprocess
import sys

import pytest

from torch_util import torch

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "examples"))

import guide_custom_op  # noqa: E402
import torch_blocks  # noqa: E402


def test_guide_pattern_op_matches_torch():
    x = torch.randn(3, 5, 16, requires_grad=True)
    w = torch.randn(16, requires_grad=True)
    b = torch.randn(16, requires_grad=True)
    y = guide_custom_op.layer_norm(x, w, b)
    xr, wr, br = (t.detach().clone().requires_grad_() for t in (x, w, b))
    yr = torch.nn.functional.layer_norm(xr, [16], wr, br)
    torch.testing.assert_close(y, yr, atol=1e-5, rtol=1e-5)
    dy = torch.randn_like(y)
    y.backward(dy)
    yr.backward(dy)
    for g, gr in ((x.grad, xr.grad), (w.grad, wr.grad), (b.grad, br.grad)):
        torch.testing.assert_close(g, gr, atol=1e-4, rtol=1e-4)
    torch.library.opcheck(torch.ops.dnngraph_guide.layer_norm.default, (x, w, b, 1e-5))
    f = torch.compile(lambda x: guide_custom_op.layer_norm(x, w, b).sum(), fullgraph=True)
    torch.testing.assert_close(f(x), yr.sum(), atol=1e-4, rtol=1e-5)


def test_guide_pattern_exits_without_leak_warnings():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run(
        [sys.executable, os.path.join(ROOT, "examples", "guide_custom_op.py")],
        capture_output=True, text=True, env=env, timeout=600,
    )
    assert r.returncode == 0, r.stderr
    assert "OK" in r.stdout
    assert "leak" not in r.stderr.lower(), r.stderr


@pytest.mark.parametrize("kind", ["transformer", "llama", "resnet"])
def test_blocks_train_like_torch(kind):
    ours, ref = torch_blocks.pair(kind, "cpu")
    x, target = torch_blocks.batch(kind, "cpu")
    a = torch_blocks.train(ours, x, target)
    b = torch_blocks.train(ref, x, target)
    assert a[-1] < a[0]  # it learns
    torch.testing.assert_close(torch.tensor(a), torch.tensor(b), atol=1e-5, rtol=1e-4)
