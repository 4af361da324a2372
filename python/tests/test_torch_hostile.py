"""dnngraph.torch under hostile and edge-case input: every call either gives torch's answer or
raises a clean error of the right type that names the op and the user's tensor.

Crashes (division by a zero stride or head count), wrong answers (relu of -inf, the
MultiheadAttention mask convention, double backward, Meta kernels that accept what eager
refuses, meta parameters next to CPU inputs), the edge shapes torch accepts (empty and broadcast
batches, 0 in_features, stride-0 inputs), out= into a tensor that requires grad, and the
reference engine's memory on a convolution with huge padding and stride."""

import os
import subprocess
import sys
import textwrap

import pytest

from torch_util import assert_close, assert_grads_close, rand, torch

import dnngraph.torch as dt
from dnngraph.torch import functional as F

TF = torch.nn.functional
ops = torch.ops.dnngraph
INF = float("inf")


# ---------------------------------------------------------------- crashes -> ValueError


@pytest.mark.parametrize("stride", [[0, 1], [1, 0], [-1, 1]])
def test_conv_bad_stride_is_a_value_error(stride):
    x, w = rand(1, 2, 6, 6), rand(3, 2, 3, 3)
    with pytest.raises(ValueError, match=r"conv2d_bias_act.*'stride'"):
        ops.conv2d_bias_act(x, w, None, stride, [0, 0], [1, 1], 1, "none")
    dy = rand(1, 3, 4, 4)
    with pytest.raises(ValueError, match=r"conv2d_bias_act_backward.*'stride'"):
        ops.conv2d_bias_act_backward(dy, x, w, None, stride, [0, 0], [1, 1], 1, "none", [True] * 3)
    with pytest.raises(ValueError, match=r"conv2d_bias_act.*'stride'"):
        ops.conv2d_bias_act(x.to("meta"), w.to("meta"), None, stride, [0, 0], [1, 1], 1, "none")


@pytest.mark.parametrize("what", ["dilation", "padding", "groups"])
def test_conv_bad_dilation_padding_groups_are_value_errors(what):
    x, w = rand(1, 2, 6, 6), rand(2, 2, 3, 3)
    args = dict(stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=1)
    args[what] = 0 if what == "groups" else ([0, 1] if what == "dilation" else [-1, 0])
    for dev in ("cpu", "meta"):
        with pytest.raises(ValueError, match=rf"conv2d_bias_act.*'{what}'"):
            ops.conv2d_bias_act(
                x.to(dev), w.to(dev), None, args["stride"], args["padding"], args["dilation"],
                args["groups"], "none",
            )


def test_conv_padding_or_dilation_beyond_int64_is_a_value_error():
    x, w = rand(1, 1, 4, 4), rand(1, 1, 2, 2)
    for dev in ("cpu", "meta"):
        for pad, dil in (([2**62, 0], [1, 1]), ([0, 0], [1, 2**63 - 1])):
            with pytest.raises(ValueError, match=r"conv2d_bias_act: padding .* beyond int64"):
                ops.conv2d_bias_act(x.to(dev), w.to(dev), None, [1, 1], pad, dil, 1, "none")
    # Huge but representable: a 3x3 output of padding, read at 9 positions.
    y = F.conv2d_bias_act(x, w[..., :1, :1], stride=2**40, padding=2**40)
    torch.testing.assert_close(y, TF.conv2d(x, w[..., :1, :1], stride=2**40, padding=2**40))


def test_sdpa_gqa_with_zero_kv_heads_is_a_value_error():
    q, k, v = rand(1, 4, 5, 8), rand(1, 0, 5, 8), rand(1, 0, 5, 8)
    for dev in ("cpu", "meta"):
        with pytest.raises(ValueError, match=r"sdpa.*'k' and 'v' have 0 heads"):
            ops.sdpa(q.to(dev), k.to(dev), v.to(dev), None, 0.0, False, None, True)
    dout, out, lse = rand(1, 4, 5, 8), rand(1, 4, 5, 8), rand(1, 4, 5)
    with pytest.raises(ValueError, match=r"sdpa_backward.*0 heads"):
        ops.sdpa_backward(dout, q, k, v, out, lse, None, 0.0, False, None, True)


# ---------------------------------------------------------------- wrong answers


def test_fused_relu_of_minus_inf_is_zero():
    # Pre-activations of -inf, +inf and finite values through each op's fused relu.
    x = torch.tensor([[-INF], [INF], [0.5], [-2.0]])
    w = torch.tensor([[1.0], [2.0], [0.5]])
    want = TF.relu(TF.linear(x, w))  # rows: 0, inf, finite, 0
    assert not torch.isnan(want).any()
    y = F.linear(x, w, None, "relu")
    torch.testing.assert_close(y, want)
    y2 = F.matmul_epilogue(x.unsqueeze(0), w.t().unsqueeze(0), activation="relu")
    torch.testing.assert_close(y2[0], want)
    xc = torch.full((1, 1, 2, 2), -INF)
    xc[0, 0, 1, 1] = 3.0
    wc = torch.ones(1, 1, 1, 1)
    yc = F.conv2d_bias_act(xc, wc, activation="relu")
    torch.testing.assert_close(yc, TF.relu(xc))


def test_multihead_attention_bool_mask_follows_nn():
    torch.manual_seed(0)
    ref = torch.nn.MultiheadAttention(16, 4, batch_first=True)
    m = dt.MultiheadAttention(16, 4)
    m.load_state_dict(ref.state_dict())
    q = rand(2, 5, 16)
    causal = torch.triu(torch.ones(5, 5, dtype=torch.bool), 1)  # True = masked (nn's convention)
    want, _ = ref(q, q, q, attn_mask=causal, need_weights=False)
    got, _ = m(q, q, q, attn_mask=causal)
    assert_close(got, want, torch.float32, scale=10)
    # A float mask is added as is; a 3-D [B * H, L, S] mask is split per head.
    fmask = rand(5, 5)
    want, _ = ref(q, q, q, attn_mask=fmask, need_weights=False)
    got, _ = m(q, q, q, attn_mask=fmask)
    assert_close(got, want, torch.float32, scale=10)
    mask3 = torch.rand(2 * 4, 5, 5) > 0.7
    mask3[..., 0] = False  # every row attends somewhere
    want, _ = ref(q, q, q, attn_mask=mask3, need_weights=False)
    got, _ = m(q, q, q, attn_mask=mask3)
    assert_close(got, want, torch.float32, scale=10)


def _double_backward(fn, *inputs):
    y = fn(*inputs)
    grads = torch.autograd.grad(y.sum() if y.dim() else y, inputs, create_graph=True)
    sum(g.square().sum() for g in grads).backward()


@pytest.mark.parametrize("op", ["linear", "matmul_epilogue", "conv", "sdpa", "layer_norm", "rms_norm"])
def test_double_backward_raises(op):
    cases = {
        "linear": (lambda x, w: F.linear(x, w, None, "gelu"), (rand(3, 4), rand(5, 4))),
        "matmul_epilogue": (lambda a, b: F.matmul_epilogue(a, b), (rand(2, 3, 4), rand(2, 4, 5))),
        "conv": (lambda x, w: F.conv2d_bias_act(x, w, activation="relu"), (rand(1, 2, 5, 5), rand(3, 2, 3, 3))),
        "sdpa": (lambda q, k: F.scaled_dot_product_attention(q, k, k), (rand(1, 2, 4, 8), rand(1, 2, 4, 8))),
        "layer_norm": (lambda x, w: F.layer_norm(x, [4], w), (rand(3, 4), rand(4))),
        "rms_norm": (lambda x, w: F.rms_norm(x, [4], w), (rand(3, 4), rand(4))),
    }
    fn, inputs = cases[op]
    inputs = tuple(t.requires_grad_() for t in inputs)
    with pytest.raises(RuntimeError, match=r"derivative for dnngraph::\w+_backward is not implemented"):
        _double_backward(fn, *inputs)
    # A plain backward (and create_graph=True without a second derivative) still works.
    y = fn(*inputs)
    g = torch.autograd.grad(y.sum(), inputs, create_graph=True)
    assert all(t.shape == i.shape for t, i in zip(g, inputs))


def test_meta_kernels_refuse_what_eager_refuses():
    m = "meta"
    with pytest.raises(ValueError, match=r"matmul_epilogue.*'a' of shape \[2, 3\].*'b' of shape \[4, 5\].*disagree on K"):
        ops.matmul_epilogue(torch.empty(2, 3, device=m), torch.empty(4, 5, device=m))
    with pytest.raises(ValueError, match=r"matmul_epilogue.*'a' of shape \[2, 3\].*disagree on K"):
        ops.matmul_epilogue(torch.empty(2, 3), torch.empty(4, 5))
    with pytest.raises(ValueError, match=r"matmul_epilogue: 'a' and 'b' must both be 2-D"):
        ops.matmul_epilogue(torch.empty(2, 3, 4, device=m), torch.empty(4, 5, device=m))
    with pytest.raises(ValueError, match=r"linear_act: 'x' of shape \[3, 4\] does not end with in_features = 5"):
        ops.linear_act(torch.empty(3, 4, device=m), torch.empty(2, 5, device=m))
    with pytest.raises(ValueError, match=r"sdpa: shapes 'q'"):
        ops.sdpa(*(torch.empty(1, 2, 4, d, device=m) for d in (8, 6, 8)))
    with pytest.raises(ValueError, match=r"conv2d_bias_act: 'x' has 3 channels"):
        ops.conv2d_bias_act(torch.empty(1, 3, 5, 5, device=m), torch.empty(2, 2, 3, 3, device=m))
    with pytest.raises(ValueError, match=r"layer_norm: 'weight' has shape \[5\]"):
        ops.layer_norm(torch.empty(2, 4, device=m), [4], torch.empty(5, device=m))
    # Backward ops: the incoming gradient must have the forward output's shape, on meta too.
    for dev in ("cpu", m):
        x, w = torch.randn(3, 4).to(dev), torch.randn(2, 4).to(dev)
        with pytest.raises(ValueError, match=r"linear_act_backward: 'dy' has shape \[3, 5\]"):
            ops.linear_act_backward(torch.zeros(3, 5).to(dev), x, w, None, "none", [True] * 3)
        a, b = torch.randn(2, 3, 4).to(dev), torch.randn(2, 4, 5).to(dev)
        with pytest.raises(ValueError, match=r"matmul_epilogue_backward: 'dy' has shape \[3, 3, 5\]"):
            ops.matmul_epilogue_backward(torch.zeros(3, 3, 5).to(dev), a, b, None, 1.0, "none", [True] * 3)
    # Shapes that agree still trace.
    y, _ = ops.matmul_epilogue(torch.empty(0, 3, 4, device=m), torch.empty(1, 4, 5, device=m))
    assert y.shape == (0, 3, 5) and y.device.type == "meta"


def test_torch_compile_refuses_k_mismatch():
    a, b = rand(2, 3), rand(4, 5)
    fn = torch.compile(lambda a, b: F.matmul_epilogue(a, b), backend="eager", fullgraph=True)
    with pytest.raises(Exception, match="disagree on K"):
        fn(a, b)


@pytest.mark.parametrize("which", ["linear", "conv", "sdpa", "layer_norm", "matmul_epilogue"])
def test_meta_parameter_next_to_cpu_inputs_is_a_device_error(which):
    meta = "meta"
    calls = {
        "linear": (lambda: ops.linear_act(rand(2, 4), torch.empty(3, 4, device=meta)), "'weight' is on meta"),
        "conv": (
            lambda: ops.conv2d_bias_act(rand(1, 2, 5, 5), rand(3, 2, 3, 3), torch.empty(3, device=meta)),
            "'bias' is on meta",
        ),
        "sdpa": (lambda: ops.sdpa(rand(1, 2, 4, 8), torch.empty(1, 2, 4, 8, device=meta), rand(1, 2, 4, 8)), "'k' is on meta"),
        "layer_norm": (lambda: ops.layer_norm(rand(2, 4), [4], torch.empty(4, device=meta)), "'weight' is on meta"),
        "matmul_epilogue": (lambda: ops.matmul_epilogue(torch.empty(2, 3, device=meta), rand(3, 4)), "'b' is on cpu"),
    }
    fn, msg = calls[which]
    with pytest.raises(ValueError, match=msg):
        fn()


def test_module_with_meta_parameters_is_a_device_error():
    with torch.device("meta"):
        lin = dt.Linear(4, 3)
    with pytest.raises(ValueError, match=r"linear_act: tensor 'weight' is on meta but 'x' is on cpu"):
        lin(rand(2, 4))


# ---------------------------------------------------------------- edge shapes torch accepts


@pytest.mark.parametrize("ba,bb", [(0, 1), (1, 0), (0, 0)])
def test_matmul_epilogue_empty_batch_broadcasts_like_torch(ba, bb):
    a, b = rand(ba, 3, 4, grad=True), rand(bb, 4, 5, grad=True)
    bias = rand(5, grad=True)
    y = F.matmul_epilogue(a, b, bias, activation="relu")
    want = TF.relu(torch.matmul(a, b) + bias)
    assert y.shape == want.shape == (0, 3, 5)
    y.sum().backward()
    assert a.grad.shape == a.shape and b.grad.shape == b.shape
    assert torch.count_nonzero(b.grad) == 0 and torch.count_nonzero(bias.grad) == 0
    with torch.device("meta"):
        ym, _ = ops.matmul_epilogue(torch.empty(ba, 3, 4), torch.empty(bb, 4, 5))
    assert ym.shape == y.shape


@pytest.mark.parametrize("bias", [True, False])
def test_linear_with_zero_in_features(bias):
    x = rand(2, 3, 0, grad=True)
    w = rand(4, 0, grad=True)
    b = rand(4, grad=True) if bias else None
    y = F.linear(x, w, b, "gelu")
    want = TF.gelu(TF.linear(x, w, b))
    assert y.shape == (2, 3, 4)
    assert_close(y, want, torch.float32)
    dy = rand(2, 3, 4)
    y.backward(dy)
    assert x.grad.shape == x.shape and w.grad.shape == w.shape
    if bias:
        xr, wr, br = (t.detach().requires_grad_() for t in (x, w, b))
        TF.gelu(TF.linear(xr, wr, br)).backward(dy)
        assert_close(b.grad, br.grad, torch.float32)


def test_conv_backward_with_empty_batch():
    x = rand(0, 2, 6, 6, grad=True)
    w, b = rand(3, 2, 3, 3, grad=True), rand(3, grad=True)
    y = F.conv2d_bias_act(x, w, b, padding=1, activation="relu")
    assert y.shape == (0, 3, 6, 6)
    y.sum().backward()
    assert x.grad.shape == x.shape
    torch.testing.assert_close(w.grad, torch.zeros_like(w))
    torch.testing.assert_close(b.grad, torch.zeros_like(b))


def test_stride_zero_inputs_to_linear():
    x = rand(1, 8).expand(5, 8)  # stride 0 along rows
    w = rand(1, 8).expand(3, 8).requires_grad_()
    bias = rand(1).expand(3)
    xr, wr = x.detach().requires_grad_(), w.detach().clone().requires_grad_()
    x.requires_grad_()
    y = F.linear(x, w, bias, "silu")
    want = TF.silu(TF.linear(xr, wr, bias))
    assert_close(y, want, torch.float32)
    dy = rand(5, 3)
    y.backward(dy)
    want.backward(dy)
    assert_close(x.grad, xr.grad, torch.float32)
    assert_close(w.grad, wr.grad, torch.float32)


def test_stride_zero_inputs_to_matmul_epilogue():
    a = rand(1, 3, 4).expand(6, 3, 4)
    b = rand(6, 4, 1).expand(6, 4, 5)
    bias = rand(1, 1, 5).expand(6, 3, 5)
    y, amax = F.matmul_epilogue(a, b, bias, alpha=0.5, activation="tanh", amax=True)
    want = torch.tanh(torch.baddbmm(bias, a, b, alpha=0.5))
    assert_close(y, want, torch.float32)
    torch.testing.assert_close(amax, want.abs().max())


def test_stride_zero_inputs_to_sdpa():
    q = rand(2, 4, 6, 8, grad=True)
    k0, v0 = rand(2, 1, 6, 8), rand(2, 1, 6, 8)
    k, v = k0.expand(2, 4, 6, 8), v0.expand(2, 4, 6, 8)  # one k/v head shared: stride 0 on H
    k.requires_grad_(), v.requires_grad_()
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    qr, kr, vr = (t.detach().requires_grad_() for t in (q, k, v))
    want = TF.scaled_dot_product_attention(qr, kr, vr, is_causal=True)
    assert_close(out, want, torch.float32, scale=10)
    dout = rand(2, 4, 6, 8)
    out.backward(dout)
    want.backward(dout)
    for g, gr in ((q.grad, qr.grad), (k.grad, kr.grad), (v.grad, vr.grad)):
        assert_close(g, gr, torch.float32, scale=10)


def test_stride_zero_on_unit_dims_and_expanded_params_to_conv():
    # Stride 0 on a dim of extent 1 (never stepped over), and an expanded bias and weight.
    x = rand(3, 5, 5).as_strided((1, 3, 5, 5), (0, 25, 5, 1)).requires_grad_()
    w = rand(1, 3, 3, 3).expand(2, 3, 3, 3).requires_grad_()
    b = rand(1).expand(2).requires_grad_()
    y = F.conv2d_bias_act(x, w, b, padding=1, activation="relu")
    xr, wr, br = (t.detach().clone().requires_grad_() for t in (x, w, b))
    want = TF.relu(TF.conv2d(xr, wr, br, padding=1))
    assert_close(y, want, torch.float32)
    assert_grads_close(y, want, (x, w, b), (xr, wr, br), torch.float32)


def test_refusals_name_the_users_tensors():
    with pytest.raises(ValueError) as e:
        F.linear(rand(3, 4), rand(5, 6))
    assert "'x'" in str(e.value) and "'weight'" in str(e.value)
    assert "matmul0" not in str(e.value) and "'a'" not in str(e.value)
    with pytest.raises(ValueError) as e:
        F.matmul_epilogue(rand(2, 3, 4), rand(3, 4, 5))
    assert "'a'" in str(e.value) and "'b'" in str(e.value) and "matmul0" not in str(e.value)


# ---------------------------------------------------------------- out= and grad


@pytest.mark.parametrize("op", ["linear_act", "matmul_epilogue", "conv2d_bias_act", "layer_norm"])
def test_out_into_a_tensor_that_requires_grad_is_refused(op):
    x4, w4 = rand(1, 2, 5, 5), rand(3, 2, 3, 3)
    calls = {
        "linear_act": lambda o: ops.linear_act.out(rand(3, 4), rand(2, 4), out=o[0]),
        "matmul_epilogue": lambda o: ops.matmul_epilogue.out(rand(3, 4), rand(4, 2), out=o[0], amax=o[1]),
        "conv2d_bias_act": lambda o: ops.conv2d_bias_act.out(x4, w4, out=o[0]),
        "layer_norm": lambda o: ops.layer_norm.out(rand(3, 2), [2], out0=o[0], out1=o[1], out2=o[2]),
    }
    outs = [torch.empty(0, requires_grad=True), torch.empty(0), torch.empty(0)]
    with pytest.raises(RuntimeError, match=r"out= variants do not support automatic differentiation"):
        calls[op](outs)
    with torch.no_grad():  # as ATen: allowed without grad mode
        calls[op](outs)
    assert outs[0].numel() > 0


# ---------------------------------------------------------------- memory of the reference engine


def test_conv_with_huge_padding_and_stride_stays_small():
    """A 1x1 convolution of an 8x8 image with padding 7000 and stride 7000 through the Python
    API and through the torch op: the process grows by far less than the 1.5 GiB a zero-padded
    copy took, and the answer is torch's."""
    code = textwrap.dedent(
        """
        import resource, numpy as np, torch, dnngraph as dn
        import dnngraph.torch as dt
        from dnngraph.torch import functional as F
        def peak():
            return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        x = torch.randn(1, 1, 8, 8)
        w = torch.randn(1, 1, 1, 1)
        want = torch.nn.functional.conv2d(x, w, stride=7000, padding=7000)
        F.conv2d_bias_act(torch.randn(1, 1, 3, 3), torch.randn(1, 1, 1, 1))  # warm up
        before = peak()
        y = F.conv2d_bias_act(x, w, stride=7000, padding=7000)
        assert torch.equal(y, want), (y, want)
        F32 = dn.data_type.FLOAT
        g = dn.pygraph(handle=dn.create_handle(device="cpu"), name="sparse", io_data_type=F32,
                       compute_data_type=F32)
        X = g.tensor(name="X", dim=[1, 1, 8, 8], stride=[64, 64, 8, 1], data_type=F32)
        W = g.tensor(name="W", dim=[1, 1, 1, 1], stride=[1, 1, 1, 1], data_type=F32)
        Y = g.conv_fprop(image=X, weight=W, padding=[7000, 7000], stride=[7000, 7000],
                         dilation=[1, 1])
        Y.set_output(True)
        g.build([dn.heur_mode.A])
        out = np.full((1, 1, 3, 3), np.nan, dtype=np.float32)
        ws = np.empty(max(g.get_workspace_size(), 1), dtype=np.uint8)
        g.execute({X: x.numpy(), W: w.numpy(), Y: out}, ws)
        np.testing.assert_array_equal(out, want.numpy())
        print("GROWTH", peak() - before)
        """
    )
    env = dict(os.environ, OMP_NUM_THREADS="1")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    growth = int(r.stdout.split("GROWTH")[1])
    assert growth < 64 << 20, f"grew by {growth / 2**20:.0f} MiB"


@pytest.mark.parametrize("seed", range(4))
def test_conv_large_stride_and_padding_match_torch(seed):
    g = torch.Generator().manual_seed(seed)
    pad = [int(torch.randint(0, 40, (1,), generator=g)) for _ in range(2)]
    stride = [int(torch.randint(5, 30, (1,), generator=g)) for _ in range(2)]
    dil = [int(torch.randint(1, 4, (1,), generator=g)) for _ in range(2)]
    x = rand(2, 4, 9, 7, grad=True)
    w = rand(6, 2, 2, 3, grad=True)
    b = rand(6, grad=True)
    y = F.conv2d_bias_act(x, w, b, stride=stride, padding=pad, dilation=dil, groups=2, activation="relu")
    xr, wr, br = (t.detach().requires_grad_() for t in (x, w, b))
    want = TF.relu(TF.conv2d(xr, wr, br, stride=stride, padding=pad, dilation=dil, groups=2))
    assert_close(y, want, torch.float32)
    assert_grads_close(y, want, (x, w, b), (xr, wr, br), torch.float32)
