"""Training path of linear_act / matmul_epilogue / conv2d_bias_act: the forward graph emits the
pre-activation the backward needs (no forward graph runs in backward), the backward graphs fuse
the activation's derivative with the products, fused and unfused backward graphs agree with
torch, layouts (channels_last) are kept."""

import json

import pytest

from torch_util import ACTS, TF, assert_close, rand, run_without_plans, torch

import dnngraph.torch as dt
from dnngraph.torch import functional as F

ops = torch.ops.dnngraph
BWD_MODE = {
    "relu": "RELU_BWD",
    "gelu": "GELU_BWD",
    "gelu_tanh": "GELU_APPROX_TANH_BWD",
    "silu": "SILU_BWD",
    "tanh": "TANH_BWD",
    "sigmoid": "SIGMOID_BWD",
}
FWD_MODE = {
    "relu": "RELU",
    "gelu": "GELU",
    "gelu_tanh": "GELU_APPROX_TANH",
    "silu": "SILU",
    "tanh": "TANH",
    "sigmoid": "SIGMOID",
}


@pytest.fixture(params=[False, True], ids=["fused", "unfused"])
def unfused(request):
    ops._set_unfused_backward(request.param)
    yield request.param
    ops._set_unfused_backward(False)


def _nodes(graph_json):
    """(op kind, pointwise mode or None) of every node of a graph's JSON."""
    return [(n["kind"], n["attrs"].get("mode")) for n in json.loads(graph_json)["nodes"]]


def _modes(graph_json):
    return {m for _, m in _nodes(graph_json) if m is not None}


def _run_linear(act, m=6, k=12, n=10, dtype=torch.float32):
    x = rand(2, m, k, dtype=dtype, grad=True)
    w = rand(n, k, dtype=dtype, grad=True, scale=0.3)
    b = rand(n, dtype=dtype, grad=True)
    y = F.linear(x, w, b, act)
    dy = rand(*y.shape, dtype=dtype)
    y.backward(dy)
    return (x, w, b, dy), y


@pytest.mark.parametrize("act", list(ACTS))
def test_linear_backward_builds_no_forward_graph(act):
    dt.clear_cache()
    x = rand(2, 6, 12, grad=True)
    w = rand(10, 12, grad=True, scale=0.3)
    b = rand(10, grad=True)
    y = F.linear(x, w, b, act)
    assert dt.cache_info()["misses"] == 1  # one forward graph, the pre-activation its output
    (fwd,) = ops._graph_json("linear_act")
    if act not in ("none", "relu"):
        assert '"preactivation"' in fwd
    y.backward(rand(*y.shape))
    assert len(ops._graph_json("linear_act")) == 1
    bwd = ops._graph_json("linear_act_backward")
    assert len(bwd) == 2  # dgrad and wgrad(+dbias), nothing else
    for g in bwd:
        modes = _modes(g)
        if act != "none":
            assert BWD_MODE[act] in modes, modes
            assert FWD_MODE[act] not in modes, modes  # no forward activation recomputed
        kinds = [k for k, _ in _nodes(g)]
        assert kinds.count("matmul") == 1, kinds
    # A second step reuses every graph.
    misses = dt.cache_info()["misses"]
    y = F.linear(x, w, b, act)
    y.backward(rand(*y.shape))
    assert dt.cache_info()["misses"] == misses


@pytest.mark.parametrize("act", ["relu", "gelu", "silu"])
def test_conv_backward_builds_no_forward_graph(act):
    dt.clear_cache()
    x = rand(2, 4, 7, 7, grad=True).to(memory_format=torch.channels_last)
    x.retain_grad()
    w = rand(6, 4, 3, 3, grad=True, scale=0.3)
    b = rand(6, grad=True)
    y = F.conv2d_bias_act(x, w, b, 1, 1, 1, 1, act)
    y.backward(rand(*y.shape).to(memory_format=torch.channels_last))
    assert len(ops._graph_json("conv2d_bias_act")) == 1
    bwd = ops._graph_json("conv2d_bias_act_backward")
    assert len(bwd) == 2
    for g in bwd:
        modes = _modes(g)
        assert BWD_MODE[act] in modes and FWD_MODE[act] not in modes, modes
        kinds = [k for k, _ in _nodes(g)]
        assert "conv_fprop" not in kinds and len(kinds) in (2, 3), kinds


@pytest.mark.parametrize("act", list(ACTS))
def test_linear_grads_fused_and_unfused(act, unfused):
    (x, w, b, dy), y = _run_linear(act)
    xr, wr, br = (t.detach().clone().requires_grad_() for t in (x, w, b))
    yr = ACTS[act](TF.linear(xr, wr, br))
    yr.backward(dy)
    assert_close(y, yr, torch.float32)
    for g, gr in ((x.grad, xr.grad), (w.grad, wr.grad), (b.grad, br.grad)):
        assert_close(g, gr, torch.float32, scale=4)
    assert w.grad.is_contiguous()


@pytest.mark.parametrize("act", ["relu", "gelu_tanh", "sigmoid"])
@pytest.mark.parametrize("case", ["3d", "a_broadcast", "b_broadcast", "2d"])
def test_matmul_epilogue_grads(act, case, unfused):
    shapes = {
        "3d": ((3, 5, 8), (3, 8, 7), (1, 1, 7)),
        "a_broadcast": ((1, 5, 8), (3, 8, 7), (3, 1, 7)),
        "b_broadcast": ((3, 5, 8), (1, 8, 7), (5, 7)),
        "2d": ((5, 8), (8, 7), (5, 1)),
    }[case]
    a, bb = rand(*shapes[0], grad=True), rand(*shapes[1], grad=True, scale=0.4)
    bias = rand(*shapes[2], grad=True)
    y = F.matmul_epilogue(a, bb, bias, 0.7, act)
    ar, bbr, biasr = (t.detach().clone().requires_grad_() for t in (a, bb, bias))
    yr = ACTS[act](0.7 * torch.matmul(ar, bbr) + biasr)
    dy = rand(*y.shape)
    y.backward(dy)
    yr.backward(dy)
    assert_close(y, yr, torch.float32)
    for g, gr in ((a.grad, ar.grad), (bb.grad, bbr.grad), (bias.grad, biasr.grad)):
        assert_close(g, gr, torch.float32, scale=4)


@pytest.mark.parametrize("act", ["none", "relu", "gelu", "tanh"])
@pytest.mark.parametrize("channels_last", [False, True])
def test_conv_grads_and_layouts(act, channels_last, unfused):
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    x = rand(2, 4, 9, 8).to(memory_format=fmt).requires_grad_()
    w = rand(6, 2, 3, 3, scale=0.3).to(memory_format=fmt).requires_grad_()
    b = rand(6, grad=True)
    y = F.conv2d_bias_act(x, w, b, (2, 1), 1, 1, 2, act)
    xr, wr, br = (t.detach().clone().requires_grad_() for t in (x, w, b))
    yr = ACTS[act](TF.conv2d(xr, wr, br, (2, 1), 1, 1, 2))
    dy = rand(*y.shape).to(memory_format=fmt)
    y.backward(dy)
    yr.backward(dy)
    assert_close(y, yr, torch.float32)
    for g, gr in ((x.grad, xr.grad), (w.grad, wr.grad), (b.grad, br.grad)):
        assert_close(g, gr, torch.float32, scale=4)
    assert y.is_contiguous(memory_format=fmt)
    assert x.grad.is_contiguous(memory_format=fmt) and w.grad.is_contiguous(memory_format=fmt)


def test_train_ops_return_the_preactivation():
    x, w, b = rand(3, 8), rand(5, 8), rand(5)
    for act in ACTS:
        y, z = ops.linear_act_train(x, w, b, act)
        assert_close(y, ACTS[act](TF.linear(x, w, b)), torch.float32)
        if act in ("none", "relu"):
            assert z.numel() == 0
        else:
            assert_close(z, TF.linear(x, w, b), torch.float32)
    xc, wc, bc = rand(1, 3, 6, 6), rand(4, 3, 3, 3), rand(4)
    y, z = ops.conv2d_bias_act_train(xc, wc, bc, [1, 1], [1, 1], [1, 1], 1, "silu")
    assert_close(z, TF.conv2d(xc, wc, bc, 1, 1), torch.float32)
    assert_close(y, TF.silu(z), torch.float32)


@pytest.mark.parametrize("act", ["relu", "gelu", "none"])
def test_direct_backward_ops_without_saved(act):
    d = torch.float64
    x, w, b, dy = rand(4, 6, dtype=d), rand(5, 6, dtype=d), rand(5, dtype=d), rand(4, 5, dtype=d)
    mask = [True, True, True]
    ref = ops.linear_act_backward(dy, x, w, b, act, mask)
    _, z = ops.linear_act_train(x, w, b, act)
    y = ops.linear_act(x, w, b, act)
    saved = y if act == "relu" else (z if act != "none" else None)
    got = ops.linear_act_train_backward(dy, x, w, b, act, saved, mask)
    xr, wr, br = (t.clone().requires_grad_() for t in (x, w, b))
    torch.autograd.backward(ACTS[act](TF.linear(xr, wr, br)), dy)
    for r, g, e in zip(ref, got, (xr.grad, wr.grad, br.grad)):
        torch.testing.assert_close(r, e)
        torch.testing.assert_close(g, e)


def test_gradcheck_fp64_training_path():
    d = torch.float64
    x, w, b = rand(2, 3, 6, dtype=d, grad=True), rand(4, 6, dtype=d, grad=True), rand(4, dtype=d, grad=True)
    for act in ("relu", "gelu_tanh", "sigmoid", "silu"):
        assert torch.autograd.gradcheck(lambda x, w, b: F.linear(x, w, b, act), (x, w, b))
    xc = rand(1, 2, 5, 5, dtype=d).to(memory_format=torch.channels_last).requires_grad_()
    wc, bc = rand(3, 2, 3, 3, dtype=d, grad=True), rand(3, dtype=d, grad=True)
    assert torch.autograd.gradcheck(
        lambda x, w, b: F.conv2d_bias_act(x, w, b, 1, 1, 1, 1, "gelu"), (xc, wc, bc)
    )


def test_opcheck_train_ops():
    d = torch.float64
    x, w, b = rand(2, 3, 6, dtype=d), rand(4, 6, dtype=d), rand(4, dtype=d)
    dy = rand(2, 3, 4, dtype=d)
    torch.library.opcheck(ops.linear_act_train.default, (x, w, b, "gelu"))
    torch.library.opcheck(ops.linear_act_train.default, (x, w, None, "relu"))
    _, z = ops.linear_act_train(x, w, b, "gelu")
    torch.library.opcheck(ops.linear_act_train_backward.default, (dy, x, w, b, "gelu", z, [True, True, True]))
    torch.library.opcheck(ops.linear_act_train_backward.default, (dy, x, w, None, "none", None, [True, False, False]))
    a, bb = rand(3, 4, 6, dtype=d), rand(1, 6, 5, dtype=d)
    torch.library.opcheck(ops.matmul_epilogue_train.default, (a, bb, None, 0.5, "silu", True))
    _, _, za = ops.matmul_epilogue_train(a, bb, None, 0.5, "silu", False)
    torch.library.opcheck(
        ops.matmul_epilogue_train_backward.default,
        (rand(3, 4, 5, dtype=d), a, bb, None, 0.5, "silu", za, [True, True, False]),
    )
    xc, wc, bc = rand(1, 2, 5, 5, dtype=d), rand(3, 2, 3, 3, dtype=d), rand(3, dtype=d)
    args = ([1, 1], [1, 1], [1, 1], 1, "tanh")
    torch.library.opcheck(ops.conv2d_bias_act_train.default, (xc, wc, bc, *args))
    _, zc = ops.conv2d_bias_act_train(xc, wc, bc, *args)
    torch.library.opcheck(
        ops.conv2d_bias_act_train_backward.default,
        (rand(1, 3, 5, 5, dtype=d), xc, wc, bc, *args, zc, [True, True, True]),
    )


def test_compile_fullgraph_training_step():
    lin = dt.Linear(8, 6, activation="gelu")
    conv = dt.Conv2dBiasAct(3, 4, 3, padding=1, activation="silu")

    def f(x, img):
        return lin(x).square().sum() + conv(img).sum()

    x = rand(5, 8, grad=True)
    img = rand(2, 3, 6, 6).to(memory_format=torch.channels_last).requires_grad_()
    loss = torch.compile(f, fullgraph=True)(x, img)
    loss.backward()
    xr, imgr = x.detach().clone().requires_grad_(), img.detach().clone().requires_grad_()
    ref = TF.gelu(TF.linear(xr, lin.weight, lin.bias)).square().sum() + TF.silu(
        TF.conv2d(imgr, conv.weight, conv.bias, padding=1)
    ).sum()
    ref.backward()
    assert_close(loss, ref, torch.float32, scale=10)
    assert_close(x.grad, xr.grad, torch.float32, scale=4)
    assert_close(img.grad, imgr.grad, torch.float32, scale=4)


def test_bf16_saved_preactivation_matches_eager():
    (x, w, b, dy), y = _run_linear("gelu", dtype=torch.bfloat16)
    xr, wr, br = (t.detach().float().requires_grad_() for t in (x, w, b))
    yr = TF.gelu(TF.linear(xr, wr, br))
    yr.backward(dy.float())
    assert_close(y, yr, torch.bfloat16)
    for g, gr in ((x.grad, xr.grad), (w.grad, wr.grad), (b.grad, br.grad)):
        assert_close(g, gr, torch.bfloat16, scale=4)


@pytest.mark.aten_fallback
def test_without_plans_the_unfused_path_is_logged_and_aten_matches():
    """With no plan at all (DNNGRAPH_TORCH_FORCE_FALLBACK), the backward goes fused -> unfused
    -> ATen: the unfused step is logged at info level once per op, the results still match."""
    code = (
        "import torch, dnngraph.torch as dt\n"
        "from dnngraph.torch import functional as F\n"
        "torch.manual_seed(0)\n"
        "x = torch.randn(4, 6, requires_grad=True); w = torch.randn(5, 6, requires_grad=True)\n"
        "b = torch.randn(5, requires_grad=True)\n"
        "F.linear(x, w, b, 'gelu').square().sum().backward()\n"
        "xr, wr, br = (t.detach().clone().requires_grad_() for t in (x, w, b))\n"
        "torch.nn.functional.gelu(torch.nn.functional.linear(xr, wr, br)).square().sum().backward()\n"
        "for g, r in ((x.grad, xr.grad), (w.grad, wr.grad), (b.grad, br.grad)):\n"
        "    torch.testing.assert_close(g, r, atol=1e-5, rtol=1e-5)\n"
        "print('OK')\n"
    )
    stderr = run_without_plans(code, log=True)
    assert stderr.count("linear_act_backward: no plan for a fused backward graph") == 1, stderr[-3000:]


@pytest.mark.aten_fallback
def test_aten_backward_parts_take_any_layout_and_every_activation():
    """The backward's ATen parts (what runs on a GPU where cuDNN has no engine; forced here with
    DNNGRAPH_TORCH_FORCE_FALLBACK): every activation's derivative and the bias gradient of a
    linear layer, and a channels_last residual conv block whose output gradient arrives NCHW (as
    from a loss), against eager in fp32; the input's gradient keeps channels_last."""
    code = (
        "import torch\n"
        "import torch.nn.functional as TF\n"
        "import dnngraph.torch as dt\n"
        "from dnngraph.torch import functional as F\n"
        "torch.manual_seed(0)\n"
        "ref = {'none': lambda t: t, 'relu': TF.relu, 'gelu': TF.gelu, 'silu': TF.silu,\n"
        "       'gelu_tanh': lambda t: TF.gelu(t, approximate='tanh'), 'tanh': torch.tanh,\n"
        "       'sigmoid': torch.sigmoid}\n"
        "for act, f in ref.items():\n"
        "    x = torch.randn(3, 4, 6, requires_grad=True); w = torch.randn(5, 6, requires_grad=True)\n"
        "    b = torch.randn(5, requires_grad=True); g = torch.randn(3, 4, 5)\n"
        "    F.linear(x, w, b, act).backward(g)\n"
        "    xr, wr, br = (t.detach().clone().requires_grad_() for t in (x, w, b))\n"
        "    f(TF.linear(xr, wr, br)).backward(g)\n"
        "    for a, r in ((x.grad, xr.grad), (w.grad, wr.grad), (b.grad, br.grad)):\n"
        "        torch.testing.assert_close(a, r, atol=1e-5, rtol=1e-5, msg=act)\n"
        "cl = torch.channels_last\n"
        "c1 = dt.Conv2dBiasAct(4, 4, 3, padding=1, activation='relu').to(memory_format=cl)\n"
        "c2 = dt.Conv2dBiasAct(4, 4, 3, padding=1, activation='relu').to(memory_format=cl)\n"
        "x = torch.randn(2, 4, 5, 5).to(memory_format=cl).requires_grad_()\n"
        "g = torch.randn(2, 4, 5, 5)  # NCHW, as a loss over the block gives it\n"
        "c2(c1(x), residual=x).backward(g)\n"
        "assert x.grad.is_contiguous(memory_format=cl)\n"
        "xr = x.detach().clone().requires_grad_()\n"
        "h = TF.relu(TF.conv2d(xr, c1.weight, c1.bias, padding=1))\n"
        "TF.relu(xr + TF.conv2d(h, c2.weight, c2.bias, padding=1)).backward(g)\n"
        "torch.testing.assert_close(x.grad, xr.grad, atol=1e-4, rtol=1e-4)\n"
        "print('OK')\n"
    )
    run_without_plans(code)
