"""dnngraph.torch ops of Llama-style blocks: add_rms_norm, swiglu / swiglu_linear, rope, and
the LlamaBlock module against its eager PyTorch twin (examples/torch_blocks.py): forward and
gradients vs torch, fp64 gradcheck, opcheck, torch.compile(fullgraph=True)."""

import os
import sys

import pytest

from torch_util import (DEVICES, assert_close, assert_grads_close, assert_module_close, rand,
                        ref_dtype, run_python, run_without_plans, torch)

import dnngraph.torch as dt
from dnngraph.torch import functional as F

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "examples"))
import torch_blocks  # noqa: E402

TF = torch.nn.functional
ops = torch.ops.dnngraph


def _clones(*ts, dtype=None):
    return [t.detach().to(dtype or t.dtype).requires_grad_(t.requires_grad) for t in ts]


# ---------------------------------------------------------------- add_rms_norm


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("with_weight", [True, False])
def test_add_rms_norm(device, dtype, with_weight):
    x = rand(3, 5, 32, dtype=dtype, device=device, grad=True)
    r = rand(3, 5, 32, dtype=dtype, device=device, grad=True)
    w = rand(32, dtype=dtype, device=device, grad=True) if with_weight else None
    s, y = F.add_rms_norm(x, r, 32, w, 1e-5)
    rt = ref_dtype(dtype)
    xr, rr = _clones(x, r, dtype=rt)
    wr = _clones(w, dtype=rt)[0] if with_weight else None
    sr = xr + rr
    yr = TF.rms_norm(sr, [32], wr, 1e-5)
    assert_close(s, sr, dtype, device)
    assert_close(y, yr, dtype, device)
    ds, dy = rand(*s.shape, dtype=dtype, device=device), rand(*y.shape, dtype=dtype, device=device)
    torch.autograd.backward((s, y), (ds, dy))
    torch.autograd.backward((sr, yr), (ds.to(rt), dy.to(rt)))
    assert_close(x.grad, xr.grad, dtype, device, scale=4)
    assert_close(r.grad, rr.grad, dtype, device, scale=4)
    if with_weight:
        assert_close(w.grad, wr.grad, dtype, device, scale=8)


def test_add_rms_norm_one_output_used():
    x, r, w = rand(4, 16, grad=True), rand(4, 16, grad=True), rand(16, grad=True)
    _, y = F.add_rms_norm(x, r, 16, w)
    y.sum().backward()
    xr, rr, wr = _clones(x, r, w)
    TF.rms_norm(xr + rr, [16], wr, torch.finfo(torch.float32).eps).sum().backward()
    for g, gr in ((x.grad, xr.grad), (r.grad, rr.grad), (w.grad, wr.grad)):
        assert_close(g, gr, torch.float32, scale=4)
    x.grad = None
    s, _ = F.add_rms_norm(x, r, 16, w)
    (2 * s).sum().backward()
    assert_close(x.grad, torch.full_like(x, 2.0), torch.float32)


def test_add_rms_norm_gradcheck_opcheck_compile():
    d = torch.float64
    x, r, w = rand(2, 3, 8, dtype=d, grad=True), rand(2, 3, 8, dtype=d, grad=True), rand(8, dtype=d, grad=True)
    assert torch.autograd.gradcheck(lambda x, r, w: F.add_rms_norm(x, r, 8, w, 1e-6), (x, r, w))
    torch.library.opcheck(ops.add_rms_norm.default, (x, r, [8], w, 1e-6))
    torch.library.opcheck(ops.add_rms_norm.default, (x, r, [3, 8], None, None))
    s, _, rstd = ops.add_rms_norm(x.detach(), r.detach(), [8], w.detach(), 1e-6)
    dy = rand(2, 3, 8, dtype=d)
    torch.library.opcheck(ops.add_rms_norm_backward.default, (dy, dy, s, [8], rstd, w.detach(), [True, True]))
    torch.library.opcheck(ops.add_rms_norm_backward.default, (None, dy, s, [8], rstd, None, [True, False]))

    w32 = w.detach().float()

    def f(x, r):
        s, y = F.add_rms_norm(x, r, 8, w32)
        return (s * y).sum()

    xc = rand(2, 3, 8, grad=True)
    rc = rand(2, 3, 8, grad=True)
    out = torch.compile(f, fullgraph=True)(xc, rc)
    out.backward()
    xr, rr = _clones(xc, rc)
    sr = xr + rr
    ref = (sr * TF.rms_norm(sr, [8], w32, torch.finfo(torch.float32).eps)).sum()
    ref.backward()
    assert_close(out, ref, torch.float32, scale=10)
    assert_close(xc.grad, xr.grad, torch.float32, scale=10)


def test_add_rms_norm_errors():
    with pytest.raises(ValueError, match="add_rms_norm.*'residual' has shape"):
        F.add_rms_norm(rand(3, 8), rand(3, 7), 8)
    with pytest.raises(TypeError, match="add_rms_norm.*dtype"):
        F.add_rms_norm(rand(3, 8), rand(3, 8, dtype=torch.float64), 8)
    with pytest.raises(ValueError, match="normalized_shape"):
        F.add_rms_norm(rand(3, 8), rand(3, 8), 6)


# ---------------------------------------------------------------- swiglu


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_swiglu_linear(device, dtype):
    x = rand(2, 5, 24, dtype=dtype, device=device, grad=True)
    w = rand(2 * 16, 24, dtype=dtype, device=device, grad=True, scale=0.3)
    b = rand(2 * 16, dtype=dtype, device=device, grad=True)
    y = F.linear(x, w, b, "swiglu")
    assert y.shape == (2, 5, 16)
    rt = ref_dtype(dtype)
    xr, wr, br = _clones(x, w, b, dtype=rt)
    g, u = TF.linear(xr, wr, br).chunk(2, dim=-1)
    yr = TF.silu(g) * u
    assert_close(y, yr, dtype, device)
    assert_grads_close(y, yr, (x, w, b), (xr, wr, br), dtype, device, scale=4)


def test_swiglu_strided_input_and_gradcheck():
    z = rand(6, 20)[:, ::2]  # [6, 10], stride 2
    assert_close(F.swiglu(z), TF.silu(z[:, :5]) * z[:, 5:], torch.float32)
    d = torch.float64
    z = rand(3, 4, 12, dtype=d, grad=True)
    assert torch.autograd.gradcheck(F.swiglu, (z,))
    x, w = rand(3, 6, dtype=d, grad=True), rand(8, 6, dtype=d, grad=True)
    assert torch.autograd.gradcheck(lambda x, w: F.linear(x, w, None, "swiglu"), (x, w))


def test_swiglu_opcheck_compile_errors():
    d = torch.float64
    z = rand(3, 4, 12, dtype=d, grad=True)
    torch.library.opcheck(ops.swiglu.default, (z,))
    torch.library.opcheck(ops.swiglu_backward.default, (rand(3, 4, 6, dtype=d), z.detach()))
    x, w = rand(3, 6, dtype=d, grad=True), rand(8, 6, dtype=d, grad=True)
    torch.library.opcheck(ops.swiglu_linear.default, (x, w, None))
    mlp = dt.SwiGLU(8, 12)
    xc = rand(4, 8, grad=True)
    out = torch.compile(lambda t: mlp(t).square().sum(), fullgraph=True)(xc)
    out.backward()
    xr = xc.detach().clone().requires_grad_()
    g, u = TF.linear(xr, mlp.w13.weight).chunk(2, dim=-1)
    ref = TF.linear(TF.silu(g) * u, mlp.w2.weight).square().sum()
    ref.backward()
    assert_close(out, ref, torch.float32, scale=10)
    assert_close(xc.grad, xr.grad, torch.float32, scale=10)
    with pytest.raises(ValueError, match="swiglu.*even"):
        F.swiglu(rand(3, 5))
    with pytest.raises(ValueError, match="swiglu_linear.*packed"):
        F.linear(rand(3, 6), rand(7, 6), None, "swiglu")


# ---------------------------------------------------------------- rope


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rope_strided_head_split(device, dtype):
    b, s, h, d = 2, 7, 3, 8
    qkv = rand(b, s, 2 * h * d, dtype=dtype, device=device, grad=True)
    q = qkv[..., : h * d].view(b, s, h, d).transpose(1, 2)  # strided view
    cos, sin = F.rope_cos_sin(s, d, device=device)
    y = F.rope(q, cos, sin)
    assert y.transpose(1, 2).is_contiguous() and y.dtype == dtype  # [B, S, H, D] storage
    rt = ref_dtype(dtype)
    (qkvr,) = _clones(qkv, dtype=rt)
    qr = qkvr[..., : h * d].view(b, s, h, d).transpose(1, 2)
    yr = torch_blocks.rotate_half(qr, cos.to(rt), sin.to(rt))
    assert_close(y, yr, dtype, device)
    dy = rand(*y.shape, dtype=dtype, device=device)
    y.backward(dy)
    yr.backward(dy.to(rt))
    assert_close(qkv.grad, qkvr.grad, dtype, device, scale=2)


@pytest.mark.aten_fallback
def test_rope_aten_path_matches_the_rotation():
    """The ATen path of rope (taken where the GPU engine has no plan; forced here with
    DNNGRAPH_TORCH_FORCE_FALLBACK): forward and backward on a strided head split, fp32 cos/sin
    with bf16 x, against the rotation written out in float64."""
    code = (
        "import torch, dnngraph.torch\n"
        "from dnngraph.torch import functional as F\n"
        "torch.manual_seed(0)\n"
        "b, s, h, d = 2, 5, 3, 8\n"
        "for dt in (torch.float32, torch.bfloat16):\n"
        "    qkv = torch.randn(b, s, 2 * h * d).to(dt).requires_grad_()\n"
        "    q = qkv[..., : h * d].view(b, s, h, d).transpose(1, 2)\n"
        "    cos, sin = F.rope_cos_sin(s, d)\n"
        "    y = F.rope(q, cos, sin)\n"
        "    qr = q.detach().double().requires_grad_()\n"
        "    c, sn = cos.double(), sin.double()\n"
        "    x1, x2 = qr[..., : d // 2], qr[..., d // 2 :]\n"
        "    yr = torch.cat([x1 * c - x2 * sn, x2 * c + x1 * sn], -1)\n"
        "    tol = dict(atol=1e-5, rtol=1e-5) if dt == torch.float32 else dict(atol=2e-2, rtol=1e-2)\n"
        "    torch.testing.assert_close(y.double(), yr, **tol)\n"
        "    dy = torch.randn(y.shape).to(dt)\n"
        "    y.backward(dy)\n"
        "    yr.backward(dy.double())\n"
        "    torch.testing.assert_close(qkv.grad[..., : h * d].view(b, s, h, d).transpose(1, 2).double(),\n"
        "                               qr.grad, **tol)\n"
        "    assert qkv.grad[..., h * d :].abs().sum() == 0\n"
        "print('OK')\n"
    )
    stderr = run_without_plans(code, log=True)
    assert "rope: the rotation runs as ATen's kernels" in stderr, stderr[-3000:]


@pytest.mark.skipif("cuda" not in DEVICES, reason="needs a CUDA GPU")
def test_rope_is_one_gpu_graph_on_a_head_split():
    """At a Llama head size (D = 128, bf16, batch > 1) the rotation and its backward run as one
    cuDNN graph each, not as ATen's kernels: the log of a fresh process says no part ran on
    ATen, and the result matches the rotation in float64."""
    code = (
        "import torch, dnngraph.torch\n"
        "from dnngraph.torch import functional as F\n"
        "torch.manual_seed(0)\n"
        "b, s, h, d = 3, 64, 4, 128\n"
        "qkv = torch.randn(b, s, 2 * h * d, device='cuda').bfloat16().requires_grad_()\n"
        "q = qkv[..., h * d :].view(b, s, h, d).transpose(1, 2)\n"
        "cos, sin = F.rope_cos_sin(s, d, device='cuda')\n"
        "y = F.rope(q, cos, sin)\n"
        "qr = q.detach().double().requires_grad_()\n"
        "c, sn = cos.double(), sin.double()\n"
        "yr = torch.cat([qr[..., :64] * c - qr[..., 64:] * sn, qr[..., 64:] * c + qr[..., :64] * sn], -1)\n"
        "torch.testing.assert_close(y.double(), yr, atol=2e-2, rtol=1e-2)\n"
        "dy = torch.randn(y.shape, device='cuda').bfloat16()\n"
        "y.backward(dy)\n"
        "yr.backward(dy.double())\n"
        "g = qkv.grad[..., h * d :].view(b, s, h, d).transpose(1, 2).double()\n"
        "torch.testing.assert_close(g, qr.grad, atol=2e-2, rtol=1e-2)\n"
        "print('OK')\n"
    )
    stderr = run_python(code, DNNGRAPH_LOG="info")
    assert "runs as ATen's kernels" not in stderr, stderr[-3000:]


def test_rope_gradcheck_opcheck_compile_errors():
    d = torch.float64
    x = rand(2, 2, 5, 6, dtype=d, grad=True)
    cos, sin = F.rope_cos_sin(5, 6, dtype=d)
    assert torch.autograd.gradcheck(lambda x: F.rope(x, cos, sin), (x,))
    torch.library.opcheck(ops.rope.default, (x, cos, sin))
    torch.library.opcheck(ops.rope_backward.default, (rand(2, 2, 5, 6, dtype=d), cos, sin))
    c32, s32 = F.rope_cos_sin(5, 6)
    xc = rand(2, 2, 5, 6, grad=True)
    out = torch.compile(lambda t: F.rope(t, c32, s32).square().sum(), fullgraph=True)(xc)
    out.backward()
    xr = xc.detach().clone().requires_grad_()
    ref = torch_blocks.rotate_half(xr, c32, s32).square().sum()
    ref.backward()
    assert_close(out, ref, torch.float32, scale=10)
    assert_close(xc.grad, xr.grad, torch.float32, scale=10)
    with pytest.raises(ValueError, match="rope.*\\[S, D/2\\]"):
        F.rope(rand(1, 1, 5, 6), *F.rope_cos_sin(4, 6))
    with pytest.raises(ValueError, match="rope.*even D"):
        F.rope(rand(1, 1, 5, 5), *F.rope_cos_sin(5, 6))
    with pytest.raises(ValueError, match="rope.*require grad"):
        F.rope(rand(1, 1, 5, 6), c32.clone().requires_grad_(), s32)


# ---------------------------------------------------------------- LlamaBlock


@pytest.mark.parametrize("heads,kv_heads,head_dim", [(4, 2, None), (4, 4, None), (4, 1, 16)])
def test_llama_block_matches_eager(heads, kv_heads, head_dim):
    sizes = dict(dim=32, heads=heads, kv_heads=kv_heads, hidden=48, max_seq_len=64, head_dim=head_dim)
    ours, ref = torch_blocks.pair("llama", "cpu", **sizes)
    x = rand(2, 9, 32)
    xo, xr = x.clone().requires_grad_(), x.clone().requires_grad_()
    y, yr = ours(xo), ref(xr)
    assert_close(y, yr, torch.float32, scale=4)
    dy = rand(*y.shape)
    y.backward(dy)
    yr.backward(dy)
    assert_close(xo.grad, xr.grad, torch.float32, scale=20)
    for (n, p), (nr, pr) in zip(ours.named_parameters(), ref.named_parameters()):
        assert n == nr
        assert_close(p.grad, pr.grad, torch.float32, scale=20)


def test_llama_block_trains_like_torch_and_compiles():
    ours, ref = torch_blocks.pair("llama", "cpu")
    x, target = torch_blocks.batch("llama", "cpu")
    a = torch_blocks.train(ours, x, target)
    b = torch_blocks.train(ref, x, target)
    assert a[-1] < a[0]
    torch.testing.assert_close(torch.tensor(a), torch.tensor(b), atol=1e-5, rtol=1e-4)
    compiled = torch.compile(ours, fullgraph=True)
    assert_module_close(compiled, ref, x)


def test_llama_block_errors():
    with pytest.raises(ValueError, match="multiple of kv_heads"):
        dt.LlamaBlock(32, 4, 3)
    blk = dt.LlamaBlock(16, 2, 1, 32, max_seq_len=4)
    with pytest.raises(ValueError, match="max_seq_len"):
        blk(rand(1, 5, 16))


def test_direct_entries_of_the_block_ops():
    from dnngraph.torch import _fast

    x, r, w = rand(3, 8, grad=True), rand(3, 8, grad=True), rand(8, grad=True)
    z = rand(3, 12, grad=True)
    q = rand(1, 2, 5, 6, grad=True)
    cos, sin = F.rope_cos_sin(5, 6)
    # Same values and gradients through the direct entries as through torch.ops.
    for inputs, fast, boxed in (
        ((x, r, w), lambda: _fast.add_rms_norm(x, r, 8, w, 1e-6)[1], lambda: ops.add_rms_norm.default(x, r, [8], w, 1e-6)[1]),
        ((z,), lambda: _fast.swiglu(z), lambda: ops.swiglu.default(z)),
        ((q,), lambda: _fast.rope(q, cos, sin), lambda: ops.rope.default(q, cos, sin)),
    ):
        y, yr = fast(), boxed()
        torch.testing.assert_close(y, yr, rtol=0, atol=0)
        assert y.grad_fn is not None
        g = rand(*y.shape)
        for u, v in zip(torch.autograd.grad(y, inputs, g), torch.autograd.grad(yr, inputs, g)):
            torch.testing.assert_close(u, v, rtol=0, atol=0)

    class Sub(torch.Tensor):
        pass

    assert _fast.swiglu(z.detach().as_subclass(Sub)) is NotImplemented
