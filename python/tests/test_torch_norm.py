"""dnngraph.torch layer_norm / rms_norm: forward and grads vs torch, gradcheck, opcheck,
torch.compile, non-contiguous inputs, errors."""

import pytest

from torch_util import DEVICES, assert_close, rand, ref_dtype, torch

import dnngraph.torch as dt
from dnngraph.torch import functional as F

TF = torch.nn.functional


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_forward_backward(device, dtype, affine):
    x = rand(3, 5, 16, dtype=dtype, device=device, grad=True)
    w = rand(16, dtype=dtype, device=device, grad=True) if affine else None
    b = rand(16, dtype=dtype, device=device, grad=True) if affine else None
    y = F.layer_norm(x, [16], w, b, eps=1e-5)
    rt = ref_dtype(dtype)
    xr = x.detach().to(rt).requires_grad_()
    wr = w.detach().to(rt).requires_grad_() if affine else None
    br = b.detach().to(rt).requires_grad_() if affine else None
    yr = TF.layer_norm(xr, [16], wr, br, eps=1e-5)
    assert_close(y, yr, dtype, device)
    dy = rand(*y.shape, dtype=dtype, device=device)
    y.backward(dy)
    yr.backward(dy.to(rt))
    assert_close(x.grad, xr.grad, dtype, device, scale=2)
    if affine:
        assert_close(w.grad, wr.grad, dtype, device, scale=4)
        assert_close(b.grad, br.grad, dtype, device, scale=4)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rms_norm_forward_backward(device, dtype):
    x = rand(4, 2, 3, 8, dtype=dtype, device=device, grad=True)
    w = rand(3, 8, dtype=dtype, device=device, grad=True)
    y = F.rms_norm(x, [3, 8], w)
    rt = ref_dtype(dtype)
    xr, wr = (t.detach().to(rt).requires_grad_() for t in (x, w))
    yr = TF.rms_norm(xr, [3, 8], wr, eps=torch.finfo(dtype).eps)
    assert_close(y, yr, dtype, device)
    dy = rand(*y.shape, dtype=dtype, device=device)
    y.backward(dy)
    yr.backward(dy.to(rt))
    assert_close(x.grad, xr.grad, dtype, device, scale=2)
    assert_close(w.grad, wr.grad, dtype, device, scale=4)


def test_norm_statistics_match_aten():
    x = rand(6, 10, dtype=torch.float64)
    y, mean, rstd = torch.ops.dnngraph.layer_norm(x, [10], None, None, 1e-5)
    ry, rmean, rrstd = torch.ops.aten.native_layer_norm(x, [10], None, None, 1e-5)
    for a, b in ((y, ry), (mean, rmean), (rstd, rrstd)):
        assert a.shape == b.shape
        torch.testing.assert_close(a, b)
    _, rstd = torch.ops.dnngraph.rms_norm(x, [10], None, 1e-6)
    torch.testing.assert_close(rstd, torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))


def test_gradcheck_fp64():
    x = rand(3, 4, 5, dtype=torch.float64, grad=True)
    w = rand(4, 5, dtype=torch.float64, grad=True)
    b = rand(4, 5, dtype=torch.float64, grad=True)
    assert torch.autograd.gradcheck(lambda x, w, b: F.layer_norm(x, [4, 5], w, b), (x, w, b))
    assert torch.autograd.gradcheck(lambda x, b: F.layer_norm(x, [4, 5], None, b), (x, b))
    assert torch.autograd.gradcheck(lambda x, w: F.rms_norm(x, [5], w[0]), (x, w))


def test_non_contiguous_input():
    x = rand(16, 6, dtype=torch.float32).t()  # [6, 16], strides (1, 6)
    assert not x.is_contiguous()
    w, b = rand(16), rand(16)
    assert_close(F.layer_norm(x, [16], w, b), TF.layer_norm(x, [16], w, b), torch.float32)
    assert_close(F.rms_norm(x, [16], w, 1e-6), TF.rms_norm(x, [16], w, 1e-6), torch.float32)


def test_opcheck_every_norm_op():
    x, w, b = rand(3, 4, 8, dtype=torch.float64, grad=True), rand(8, dtype=torch.float64, grad=True), rand(8, dtype=torch.float64, grad=True)
    torch.library.opcheck(torch.ops.dnngraph.layer_norm.default, (x, [8], w, b, 1e-5))
    torch.library.opcheck(torch.ops.dnngraph.rms_norm.default, (x, [8], w, None))
    y, mean, rstd = torch.ops.dnngraph.layer_norm(x.detach(), [8], w.detach(), b.detach(), 1e-5)
    dy = rand(3, 4, 8, dtype=torch.float64)
    torch.library.opcheck(
        torch.ops.dnngraph.layer_norm_backward.default,
        (dy, x.detach(), [8], mean, rstd, w.detach(), b.detach(), [True, True, True]),
    )
    _, rstd = torch.ops.dnngraph.rms_norm(x.detach(), [8], w.detach(), None)
    torch.library.opcheck(
        torch.ops.dnngraph.rms_norm_backward.default, (dy, x.detach(), [8], rstd, w.detach(), [True, True])
    )


def test_compile_fullgraph_forward_backward():
    ln = dt.LayerNorm(8)
    rms = dt.RMSNorm(8)

    def f(x):
        return rms(ln(x)).square().sum()

    x = rand(2, 3, 8, grad=True)
    loss = torch.compile(f, fullgraph=True)(x)
    loss.backward()
    xr = x.detach().clone().requires_grad_()
    ref = TF.rms_norm(TF.layer_norm(xr, [8], ln.weight, ln.bias), [8], rms.weight).square().sum()
    ref.backward()
    assert_close(loss, ref, torch.float32)
    assert_close(x.grad, xr.grad, torch.float32)


def test_modules_load_torch_state_dicts():
    ref = torch.nn.LayerNorm(12)
    with torch.no_grad():
        ref.weight.normal_(), ref.bias.normal_()
    ours = dt.LayerNorm(12)
    ours.load_state_dict(ref.state_dict())
    x = rand(5, 12)
    assert_close(ours(x), ref(x), torch.float32)
    rref = torch.nn.RMSNorm(12, eps=1e-6)
    with torch.no_grad():
        rref.weight.normal_()
    rours = dt.RMSNorm(12, eps=1e-6)
    rours.load_state_dict(rref.state_dict())
    assert_close(rours(x), rref(x), torch.float32)


def test_errors_name_the_op_and_tensor():
    x = rand(3, 8)
    with pytest.raises(ValueError, match="layer_norm.*normalized_shape"):
        F.layer_norm(x, [7])
    with pytest.raises(ValueError, match="'weight' has shape"):
        F.layer_norm(x, [8], rand(7))
    with pytest.raises(TypeError, match="'x' has dtype"):
        F.layer_norm(torch.ones(3, 8, dtype=torch.int64), [8])
    with pytest.raises(TypeError, match="'weight' has dtype"):
        F.rms_norm(x, [8], rand(8, dtype=torch.float64))
