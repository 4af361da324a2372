"""Pointwise-only graphs on large 4-D tensors through a CUDA handle, each in its own process.

cuDNN's pointwise engines are sensitive to the shapes a graph reaches them in (the cuDNN engine
folds 4-D and 5-D pointwise graphs to 3-D, docs/cudnn-engine.md); a failure at execute can leave
the CUDA context unusable, so every case runs in a fresh interpreter. Each case either matches
torch (bf16 tolerance, NaN-poisoned output) or is refused with an error: never a crash, never a
wrong answer. Skips without a GPU."""

import json
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device visible to torch", allow_module_level=True)

CASE = r"""
import json, sys, torch
import dnngraph as cudnn
shape, channels_last = json.loads(sys.argv[1])
fmt = torch.channels_last if channels_last else torch.contiguous_format
torch.manual_seed(0)
dy = torch.randn(shape, device="cuda", dtype=torch.bfloat16).to(memory_format=fmt)
x = torch.randn(shape, device="cuda", dtype=torch.bfloat16).to(memory_format=fmt)
g = cudnn.pygraph(handle=cudnn.create_handle(device="cuda"), io_data_type=cudnn.data_type.BFLOAT16,
                  intermediate_data_type=cudnn.data_type.FLOAT, compute_data_type=cudnn.data_type.FLOAT)
DY, X = g.tensor_like(dy, "dy"), g.tensor_like(x, "x")
DX = g.relu_backward(loss=DY, input=X)
DX.set_output(True).set_dim(list(shape)).set_stride(list(dy.stride()))
try:
    g.build([cudnn.heur_mode.A])
except Exception as e:
    print(json.dumps({"refused": str(e)[:300]})); sys.exit(0)
out = torch.full_like(dy, float("nan"))
ws = torch.empty(max(g.get_workspace_size(), 1), device="cuda", dtype=torch.uint8)
g.execute({DY: dy, X: x, DX: out}, ws)
torch.cuda.synchronize()
ref = torch.where(x > 0, dy, torch.zeros_like(dy))
bad = (out.float() - ref.float()).abs().gt(1e-2).sum().item() + out.isnan().sum().item()
print(json.dumps({"wrong": bad, "n": out.numel()}))
"""

SHAPES = [([32, 64, 56, 56], True), ([64, 256, 14, 14], True), ([32, 64, 56, 56], False),
          ([8, 1024, 4096], False), ([4, 64, 32, 32], False)]


@pytest.mark.parametrize("shape,channels_last", SHAPES)
def test_relu_backward_large(shape, channels_last):
    r = subprocess.run([sys.executable, "-c", CASE, json.dumps([shape, channels_last])],
                       capture_output=True, text=True, timeout=120, env=dict(os.environ))
    assert r.returncode == 0, f"crashed or raised: {r.stderr[-1500:]}"
    res = json.loads(r.stdout.strip().splitlines()[-1])
    if "refused" in res:
        pytest.skip(f"refused with an error (allowed): {res['refused']}")
    assert res["wrong"] == 0, f"{res['wrong']} of {res['n']} elements wrong"
