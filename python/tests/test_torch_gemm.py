"""dnngraph.torch linear_act / matmul_epilogue: forward and grads vs torch, AMAX, gradcheck,
opcheck, torch.compile, non-contiguous inputs, errors."""

import pytest

from torch_util import (ACTS, DEVICES, TF, assert_close, assert_grads_close, rand, ref_dtype,
                        run_without_fused_plans, torch)

import dnngraph.torch as dt
from dnngraph.torch import functional as F



@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("act", list(ACTS))
def test_linear_act_forward_backward(device, dtype, act):
    x = rand(2, 5, 24, dtype=dtype, device=device, grad=True)
    w = rand(16, 24, dtype=dtype, device=device, grad=True, scale=0.2)
    b = rand(16, dtype=dtype, device=device, grad=True)
    y = F.linear(x, w, b, act)
    rt = ref_dtype(dtype)
    xr, wr, br = (t.detach().to(rt).requires_grad_() for t in (x, w, b))
    yr = ACTS[act](TF.linear(xr, wr, br))
    assert_close(y, yr, dtype, device)
    assert_grads_close(y, yr, (x, w, b), (xr, wr, br), dtype, device, scale=4)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_matmul_epilogue_amax(device, dtype):
    a = rand(3, 8, 32, dtype=dtype, device=device, grad=True)
    b = rand(3, 32, 16, dtype=dtype, device=device, grad=True, scale=0.3)
    bias = rand(1, 1, 16, dtype=dtype, device=device, grad=True)
    y, amax = F.matmul_epilogue(a, b, bias, alpha=0.5, activation="gelu", amax=True)
    rt = ref_dtype(dtype)
    ar, br_, biasr = (t.detach().to(rt).requires_grad_() for t in (a, b, bias))
    yr = TF.gelu(torch.baddbmm(biasr.expand(3, 8, 16), ar, br_, alpha=0.5, beta=1.0))
    assert_close(y, yr, dtype, device)
    assert amax.dtype == torch.float32 and amax.shape == ()
    torch.testing.assert_close(amax, y.float().abs().max(), **{"atol": 1e-6, "rtol": 1e-6})
    assert_grads_close(y, yr, (a, b, bias), (ar, br_, biasr), dtype, device, scale=4)


def test_matmul_epilogue_broadcast_and_2d():
    a, b = rand(4, 6, 5), rand(1, 5, 7)
    assert_close(F.matmul_epilogue(a, b), a @ b, torch.float32)
    a2, b2, bias = rand(6, 5), rand(5, 7), rand(6, 1)
    assert_close(F.matmul_epilogue(a2, b2, bias, 2.0, "relu"), TF.relu(2 * a2 @ b2 + bias), torch.float32)


def test_gradcheck_fp64():
    d = torch.float64
    x, w, b = rand(2, 3, 6, dtype=d, grad=True), rand(4, 6, dtype=d, grad=True), rand(4, dtype=d, grad=True)
    for act in ("relu", "gelu", "silu", "tanh"):
        assert torch.autograd.gradcheck(lambda x, w, b: F.linear(x, w, b, act), (x, w, b))
    a, bb, bias = rand(3, 4, 6, dtype=d, grad=True), rand(1, 6, 5, dtype=d, grad=True), rand(5, dtype=d, grad=True)
    assert torch.autograd.gradcheck(
        lambda a, bb, bias: F.matmul_epilogue(a, bb, bias, 0.7, "gelu"), (a, bb, bias)
    )
    assert torch.autograd.gradcheck(lambda x, w: F.linear(x, w), (x, w))


def test_non_contiguous_inputs():
    x = rand(24, 10).t()  # [10, 24] column-major
    w = rand(24, 16).t()  # [16, 24] column-major
    assert_close(F.linear(x, w, None, "relu"), TF.relu(TF.linear(x, w)), torch.float32)
    a = rand(3, 9, 8)[:, ::2, :]  # strided rows
    b = rand(3, 7, 8).transpose(1, 2)
    assert_close(F.matmul_epilogue(a, b), a @ b, torch.float32)


def test_opcheck_every_gemm_op():
    d = torch.float64
    x, w, b = rand(2, 3, 6, dtype=d, grad=True), rand(4, 6, dtype=d, grad=True), rand(4, dtype=d, grad=True)
    torch.library.opcheck(torch.ops.dnngraph.linear_act.default, (x, w, b, "gelu"))
    torch.library.opcheck(torch.ops.dnngraph.linear_act.default, (x, w, None, "none"))
    a, bb = rand(3, 4, 6, dtype=d, grad=True), rand(3, 6, 5, dtype=d, grad=True)
    bias = rand(5, dtype=d, grad=True)
    torch.library.opcheck(torch.ops.dnngraph.matmul_epilogue.default, (a, bb, bias, 0.5, "relu", True))
    dy = rand(2, 3, 4, dtype=d)
    torch.library.opcheck(
        torch.ops.dnngraph.linear_act_backward.default,
        (dy, x.detach(), w.detach(), b.detach(), "silu", [True, True, True]),
    )
    torch.library.opcheck(
        torch.ops.dnngraph.matmul_epilogue_backward.default,
        (rand(3, 4, 5, dtype=d), a.detach(), bb.detach(), bias.detach(), 0.5, "gelu", [True, True, True]),
    )


def test_compile_fullgraph_forward_backward():
    lin = dt.Linear(8, 6, activation="gelu")

    def f(x):
        y, amax = F.matmul_epilogue(lin(x), x.new_ones(6, 3), None, 0.5, "relu", amax=True)
        return y.sum() + amax

    x = rand(4, 8, grad=True)
    loss = torch.compile(f, fullgraph=True)(x)
    loss.backward()
    xr = x.detach().clone().requires_grad_()
    yr = TF.relu(0.5 * TF.gelu(TF.linear(xr, lin.weight, lin.bias)) @ xr.new_ones(6, 3))
    ref = yr.sum() + yr.abs().max().detach()
    ref.backward()
    assert_close(loss, ref, torch.float32)
    assert_close(x.grad, xr.grad, torch.float32)


def test_linear_module_loads_torch_state_dict():
    ref = torch.nn.Linear(10, 7)
    ours = dt.Linear(10, 7, activation="silu")
    ours.load_state_dict(ref.state_dict())
    x = rand(3, 10)
    assert_close(ours(x), TF.silu(ref(x)), torch.float32)
    ours_nb = dt.Linear(10, 7, bias=False)
    ours_nb.load_state_dict(torch.nn.Linear(10, 7, bias=False).state_dict())


def test_errors():
    with pytest.raises(ValueError, match="linear_act.*in_features"):
        F.linear(rand(3, 5), rand(4, 6))
    with pytest.raises(ValueError, match="unknown activation 'mish'"):
        F.linear(rand(3, 6), rand(4, 6), None, "mish")
    with pytest.raises(ValueError, match="disagree on K"):
        F.matmul_epilogue(rand(2, 3, 4), rand(2, 5, 6))
    with pytest.raises(ValueError, match="'bias' of shape"):
        F.matmul_epilogue(rand(2, 3, 4), rand(2, 4, 6), rand(5))
    with pytest.raises(TypeError, match="dtype"):
        F.linear(rand(3, 6), rand(4, 6, dtype=torch.float64))


def test_without_fused_plans_the_matmul_is_still_dnngraphs():
    """Where the engine has no plan for a GEMM with its epilogue (scale, bias, activation,
    AMAX, the saved pre-activation), the matmul still runs as a dnngraph graph and the rest as
    ATen's kernels (the activation and AMAX: a pointwise graph on the CPU). Forced with every
    graph of more than one op refused: the fp32 value, gradient and AMAX tests pass under the
    "error" fallback policy, and the log says which parts ran on ATen."""
    out = run_without_fused_plans(
        "(test_linear_act_forward_backward and dtype0) or (test_matmul_epilogue_amax and dtype0)"
        " or broadcast_and_2d or non_contiguous or gradcheck",
        "test_torch_gemm.py")
    assert "the scale and bias runs" in out, out[-3000:]
