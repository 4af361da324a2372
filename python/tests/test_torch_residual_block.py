"""dnngraph.torch residual_block (the ResNet basic block without batch norm as one op, its
backward fused across the two convolutions): forward and every gradient vs torch, on the fused
and the unfused backward path, channels_last kept, equal to the same block built from two
Conv2dBiasAct ops, fp64 gradcheck, opcheck, torch.compile(fullgraph=True), the module, errors."""

import pytest

from torch_util import DEVICES, assert_close, rand, torch

import dnngraph.torch as dt
from dnngraph.torch import functional as F

TF = torch.nn.functional
ops = torch.ops.dnngraph


def eager_block(x, w1, b1, w2, b2):
    p = w1.shape[-1] // 2
    return TF.relu(x + TF.conv2d(TF.relu(TF.conv2d(x, w1, b1, padding=p)), w2, b2, padding=p))


def params(c, k, dtype=torch.float64, device="cpu", bias=True):
    w1 = rand(c, c, k, k, dtype=dtype, device=device, scale=0.3)
    w2 = rand(c, c, k, k, dtype=dtype, device=device, scale=0.3)
    b1 = rand(c, dtype=dtype, device=device) if bias else None
    b2 = rand(c, dtype=dtype, device=device) if bias else None
    return w1, b1, w2, b2


@pytest.fixture(params=[False, True], ids=["fused", "unfused"])
def backward_path(request):
    ops._set_unfused_backward(request.param)
    yield request.param
    ops._set_unfused_backward(False)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("k,bias", [(3, True), (1, False), (5, True)])
def test_matches_torch(device, channels_last, k, bias, backward_path):
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    x = rand(2, 6, 7, 5, device=device).to(memory_format=fmt)
    ps = [x] + [p for p in params(6, k, torch.float32, device, bias)]
    ps = [p.requires_grad_() if p is not None else None for p in ps]
    y = F.residual_block(*ps)
    refs = [p.detach().double().requires_grad_() if p is not None else None for p in ps]
    yr = eager_block(*refs)
    assert_close(y, yr, torch.float32, device)
    assert y.is_contiguous(memory_format=fmt)
    dy = rand(*y.shape, device=device).to(memory_format=fmt)
    y.backward(dy)
    yr.backward(dy.double())
    for name, p, r in zip(("x", "w1", "b1", "w2", "b2"), ps, refs):
        if p is None:
            continue
        assert p.grad is not None, name
        assert_close(p.grad, r.grad, torch.float32, device, scale=4)
    assert x.grad.is_contiguous(memory_format=fmt)


@pytest.mark.parametrize("device", DEVICES)
def test_bf16_equals_two_conv_ops(device):
    """The fused backward against the same block as two Conv2dBiasAct ops: the same forward
    graphs (equal outputs), gradients equal up to bf16 rounding of the intermediates."""
    torch.manual_seed(3)
    block = dt.ResidualBlock(8, device=device, dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    x = rand(2, 8, 6, 6, dtype=torch.bfloat16, device=device).to(memory_format=torch.channels_last)
    xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
    c1, c2 = block.conv1, block.conv2
    y = block(xa)
    h = F.conv2d_bias_act(xb, c1.weight, c1.bias, 1, 1, 1, 1, "relu")
    y2 = F.conv2d_bias_act(h, c2.weight, c2.bias, 1, 1, 1, 1, "relu", residual=xb)
    assert torch.equal(y, y2)
    dy = rand(*y.shape, dtype=torch.bfloat16, device=device).to(memory_format=torch.channels_last)
    ga = torch.autograd.grad(y, [xa, c1.weight, c1.bias, c2.weight, c2.bias], dy)
    gb = torch.autograd.grad(y2, [xb, c1.weight, c1.bias, c2.weight, c2.bias], dy)
    for a, b in zip(ga, gb):
        assert_close(a, b, torch.bfloat16, device, scale=4)


def test_backward_graphs_fuse_across_the_convolutions():
    x = rand(1, 4, 5, 5, grad=True)
    w1, b1, w2, b2 = (p.float().requires_grad_() for p in params(4, 3))
    dt.clear_cache()
    F.residual_block(x, w1, b1, w2, b2).sum().backward()
    fused = ops._graph_json("residual_block_backward")
    # dZ1 = relu'(h) * dgrad(dZ2, W2) with db1 in the same graph, and dX = dgrad(dZ1, W1) + dZ2
    assert len(fused) == 2
    assert any('"db1"' in g and '"dz1"' in g for g in fused)
    assert any('"dx"' in g and '"dz2"' in g for g in fused)


def test_gradcheck_opcheck_compile():
    d = torch.float64
    x = rand(1, 3, 4, 4, dtype=d, grad=True)
    w1, b1, w2, b2 = (p.requires_grad_() for p in params(3, 3))
    assert torch.autograd.gradcheck(F.residual_block, (x, w1, b1, w2, b2))
    assert torch.autograd.gradcheck(lambda x, w1, w2: F.residual_block(x, w1, None, w2, None), (x, w1, w2))
    plain = [t.detach() for t in (x, w1, b1, w2, b2)]
    torch.library.opcheck(ops.residual_block.default, tuple(plain))
    torch.library.opcheck(ops.residual_block.default, (plain[0], plain[1], None, plain[3], None))
    torch.library.opcheck(ops.residual_block_train.default, tuple(plain))
    y, h = ops.residual_block_train(*plain)
    dy = rand(*y.shape, dtype=d)
    torch.library.opcheck(ops.residual_block_backward.default,
                          (dy, *plain, h, y, [True, True, True, True, True]))
    torch.library.opcheck(ops.residual_block_backward.default,
                          (dy, *plain, h, y, [False, True, False, False, True]))
    block = dt.ResidualBlock(3)
    xc = rand(2, 3, 4, 4).to(memory_format=torch.channels_last).requires_grad_()
    out = torch.compile(lambda t: block(t).square().sum(), fullgraph=True)(xc)
    out.backward()
    xr = xc.detach().clone().requires_grad_()
    c1, c2 = block.conv1, block.conv2
    ref = eager_block(xr, c1.weight, c1.bias, c2.weight, c2.bias).square().sum()
    ref.backward()
    assert_close(out, ref, torch.float32, scale=10)
    assert_close(xc.grad, xr.grad, torch.float32, scale=10)


def test_module_state_dict_and_empty_batch():
    block = dt.ResidualBlock(4, kernel_size=3)
    ref = torch.nn.Module()
    ref.conv1, ref.conv2 = torch.nn.Conv2d(4, 4, 3, padding=1), torch.nn.Conv2d(4, 4, 3, padding=1)
    block.load_state_dict(ref.state_dict())
    x = rand(2, 4, 5, 5)
    assert_close(block(x), eager_block(x, ref.conv1.weight, ref.conv1.bias, ref.conv2.weight, ref.conv2.bias), torch.float32)
    e = torch.zeros(0, 4, 5, 5, requires_grad=True)
    y = block(e)
    assert y.shape == e.shape
    y.sum().backward()
    assert e.grad.shape == e.shape and block.conv1.weight.grad.abs().sum() == 0


def test_errors():
    x = rand(1, 4, 5, 5)
    w, b = rand(4, 4, 3, 3), rand(4)
    with pytest.raises(ValueError, match=r"residual_block: 'w2' must be \[C, C, k, k\] with C = 4"):
        F.residual_block(x, w, b, rand(8, 4, 3, 3), b)
    with pytest.raises(ValueError, match="residual_block: 'w1' must be .*odd k"):
        F.residual_block(x, rand(4, 4, 2, 2), b, w, b)
    with pytest.raises(ValueError, match=r"residual_block: 'b1' must be \[C\]"):
        F.residual_block(x, w, rand(3), w, b)
    with pytest.raises(ValueError, match=r"residual_block: 'x' must be \[N, C, H, W\]"):
        F.residual_block(rand(4, 5, 5), w, b, w, b)
    with pytest.raises(TypeError, match="residual_block.*w2"):
        F.residual_block(x, w, b, w.double(), b)
    with pytest.raises(ValueError, match="ResidualBlock: kernel_size=2"):
        dt.ResidualBlock(4, kernel_size=2)
    with pytest.raises(ValueError, match="ResidualBlock: channels=0"):
        dt.ResidualBlock(0)
