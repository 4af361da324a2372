"""dnngraph.torch conv2d_bias_add_act (the residual add fused into a convolution's epilogue)
and activation_backward: forward and gradients (residual's included) vs torch, channels_last
kept, fp64 gradcheck, opcheck, torch.compile(fullgraph=True), errors."""

import pytest

from torch_util import DEVICES, assert_close, rand, ref_dtype, torch

import dnngraph.torch as dt
from dnngraph.torch import functional as F

TF = torch.nn.functional
ops = torch.ops.dnngraph
ACTS = {"none": lambda z: z, "relu": TF.relu, "gelu": TF.gelu, "silu": TF.silu}


def away_from_kink(x, w, b, r):
    """The residual moved so that every pre-activation lies at least 0.25 from 0, where relu's
    derivative jumps: a bf16 path that rounds the convolution's output before the add (ATen's,
    which NCHW takes on cuDNN) may land on the other side of 0 than the float reference, and
    the gradients then differ by whole elements of dy."""
    pre = TF.conv2d(x.detach().float(), w.detach().float(), b.detach().float(), 1, 1) + r.float()
    return (r.float() + 0.25 * torch.where(pre >= 0, 1.0, -1.0)).to(r.dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("act", list(ACTS))
@pytest.mark.parametrize("channels_last", [False, True])
def test_conv_residual(device, dtype, act, channels_last):
    # (On cuDNN 9.19 the residual add behind an NCHW convolution has no fused plan: the
    # convolution then runs as its own graph, the add and activation as ATen's kernels.)
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    x = rand(2, 6, 7, 7, dtype=dtype, device=device).to(memory_format=fmt).requires_grad_()
    w = rand(6, 6, 3, 3, dtype=dtype, device=device, scale=0.2).to(memory_format=fmt).requires_grad_()
    b = rand(6, dtype=dtype, device=device, grad=True)
    r = away_from_kink(x, w, b, rand(2, 6, 7, 7, dtype=dtype, device=device))
    r = r.to(memory_format=fmt).requires_grad_()
    y = F.conv2d_bias_act(x, w, b, 1, 1, 1, 1, act, residual=r)
    rt = ref_dtype(dtype)
    xr, wr, br, rr = (t.detach().to(rt).requires_grad_() for t in (x, w, b, r))
    yr = ACTS[act](TF.conv2d(xr, wr, br, 1, 1) + rr)
    assert_close(y, yr, dtype, device)
    assert y.is_contiguous(memory_format=fmt)
    dy = rand(*y.shape, dtype=dtype, device=device).to(memory_format=fmt)
    y.backward(dy)
    yr.backward(dy.to(rt))
    for g, gr in ((x.grad, xr.grad), (w.grad, wr.grad), (b.grad, br.grad), (r.grad, rr.grad)):
        assert_close(g, gr, dtype, device, scale=4)
    assert x.grad.is_contiguous(memory_format=fmt) and r.grad.is_contiguous(memory_format=fmt)


def test_module_residual_and_basic_block_graphs():
    conv = dt.Conv2dBiasAct(4, 4, 3, padding=1, activation="relu")
    x, h = rand(1, 4, 5, 5), rand(1, 4, 5, 5)
    assert_close(conv(h, residual=x), TF.relu(TF.conv2d(h, conv.weight, conv.bias, padding=1) + x), torch.float32)
    dt.clear_cache()
    conv(h.requires_grad_(), residual=x.requires_grad_()).sum().backward()
    (fwd,) = ops._graph_json("conv2d_bias_add_act")
    assert '"residual"' in fwd
    assert len(ops._graph_json("activation_backward")) == 1
    assert len(ops._graph_json("conv2d_bias_act_backward")) == 2  # dgrad, wgrad + dbias


def test_gradcheck_opcheck_compile():
    d = torch.float64
    x, w = rand(1, 2, 5, 5, dtype=d, grad=True), rand(3, 2, 3, 3, dtype=d, grad=True)
    b, r = rand(3, dtype=d, grad=True), rand(1, 3, 3, 3, dtype=d, grad=True)
    for act in ("relu", "gelu", "none"):
        assert torch.autograd.gradcheck(
            lambda x, w, b, r: F.conv2d_bias_act(x, w, b, 1, 0, 1, 1, act, residual=r), (x, w, b, r)
        )
    args = ([1, 1], [0, 0], [1, 1], 1)
    torch.library.opcheck(ops.conv2d_bias_add_act.default, (x, w, b, r, *args, "silu"))
    torch.library.opcheck(ops.conv2d_bias_add_act.default, (x, w, None, r, *args, "relu"))
    torch.library.opcheck(ops.conv2d_bias_add_act_train.default, (x.detach(), w.detach(), b.detach(), r.detach(), *args, "gelu"))
    torch.library.opcheck(ops.activation_backward.default, (rand(1, 3, 3, 3, dtype=d), r.detach(), "gelu"))
    conv = dt.Conv2dBiasAct(3, 3, 3, padding=1, activation="relu")
    xc = rand(2, 3, 4, 4).to(memory_format=torch.channels_last).requires_grad_()
    out = torch.compile(lambda t: conv(t, residual=t).square().sum(), fullgraph=True)(xc)
    out.backward()
    xr = xc.detach().clone().requires_grad_()
    ref = TF.relu(TF.conv2d(xr, conv.weight, conv.bias, padding=1) + xr).square().sum()
    ref.backward()
    assert_close(out, ref, torch.float32, scale=10)
    assert_close(xc.grad, xr.grad, torch.float32, scale=10)


def test_errors():
    with pytest.raises(ValueError, match="conv2d_bias_add_act.*'residual' has shape"):
        F.conv2d_bias_act(rand(1, 2, 5, 5), rand(3, 2, 3, 3), None, residual=rand(1, 3, 5, 5))
    with pytest.raises(TypeError, match="conv2d_bias_add_act.*residual"):
        F.conv2d_bias_act(rand(1, 2, 5, 5), rand(3, 2, 3, 3), None, residual=rand(1, 3, 3, 3, dtype=torch.float64))
