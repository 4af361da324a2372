"""Differential test of torch.compile(backend="dnngraph") against eager on the CPU (reference
engine): every ATen op and fusion the backend maps, run in a tiny function or module on seeded
random inputs, forward and backward (gradients of inputs and parameters), with the outputs of
every fused graph poisoned first. Each case also asserts, from the backend's own decisions (what
``dnngraph.torch.explain`` prints), that the op under test really ran in a fused graph, or, for
the arguments the mapping does not take, that it stayed in ATen with its reason."""

import contextlib
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch_util import torch  # noqa: F401  (skips without dnngraph.torch)

import torch.nn as nn
import torch.nn.functional as F

import dnngraph.torch as dt
from dnngraph.torch.compile import _backend

TOL = {
    torch.float64: dict(atol=1e-9, rtol=1e-9),
    torch.float32: dict(atol=1e-5, rtol=1e-5),
    torch.bfloat16: dict(atol=2e-2, rtol=2e-2),
    torch.float16: dict(atol=1e-2, rtol=1e-2),
}


@pytest.fixture(autouse=True)
def _fresh():
    torch._dynamo.reset()
    torch.manual_seed(0)
    previous = torch.ops.dnngraph._run_graph_poison_outputs(True)
    yield
    torch.ops.dnngraph._run_graph_poison_outputs(previous)
    torch._dynamo.reset()


def rnd(*shape, dtype=torch.float32, grad=False, low=None):
    """Seeded random values (never zeros): normal, or uniform in [low, low + 1] (positive
    operands of log/sqrt)."""
    if low is None:
        t = torch.randn(shape, dtype=torch.float32)
    else:
        t = torch.rand(shape, dtype=torch.float32) + low
    return t.to(dtype).requires_grad_(grad)


def _leaves(fn, args):
    out = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
    if isinstance(fn, nn.Module):
        out += [p for p in fn.parameters() if p.requires_grad]
    return out


def _tensors(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _loss(outs, upstream):
    return sum((o.double() * u).sum() for o, u in zip(outs, upstream) if o.requires_grad)


def _close(actual, expected, dtype, scale, what):
    t = {k: v * scale for k, v in TOL[dtype].items()}
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != {expected.dtype}"
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    torch.testing.assert_close(actual, expected, equal_nan=True, msg=lambda m: f"{what}: {m}",
                               **t)


def fidelity(fn, *args, dtype=None, backward=True, fused=(), fused_bw=(), out=None,
             pointwise=True, scale=1.0, compile_kw=None, calls=None):
    """Runs ``fn(*args)`` eagerly and compiled with the dnngraph backend (inner: eager), compares
    outputs and the gradients of every input and parameter that requires grad, and returns the
    backend's decisions (``dt.compile.Explanation``) of the compiled run.

    ``fused``/``fused_bw``: ATen ops (substrings of their names) that must run in a fused graph
    of the forward/inference and of the backward graph. ``out``: {op substring: reason
    substring} of ops that must stay in ATen with that reason."""
    dtype = dtype or next(a.dtype for a in args if isinstance(a, torch.Tensor))
    leaves = _leaves(fn, args)
    for t in leaves:
        t.grad = None
    ref = _tensors(fn(*args))
    upstream = [torch.rand_like(o, dtype=torch.float64) + 0.5 for o in ref]
    if backward and leaves:
        _loss(ref, upstream).backward()
    ref_grads = [t.grad.clone() if t.grad is not None else None for t in leaves]
    for t in leaves:
        t.grad = None
    options = {"inner": "eager", "fuse_pointwise": pointwise}
    compiled = torch.compile(fn, backend="dnngraph", options=options, **(compile_kw or {}))
    with _backend.collect_reports() as reports:
        got = _tensors(compiled(*args))
        if backward and leaves:
            _loss(got, upstream).backward()
    for i, (g, r) in enumerate(zip(got, ref)):
        _close(g, r, dtype, scale, f"output {i}")
    for i, (t, r) in enumerate(zip(leaves, ref_grads)):
        if r is None:
            assert t.grad is None
        else:
            assert t.grad is not None, f"gradient {i} missing"
            _close(t.grad, r, dtype, scale * 4, f"gradient {i}")
    e = dt.compile.Explanation(list(reports))
    _assert_fused(e, fused, ("forward", "inference"))
    _assert_fused(e, fused_bw, ("backward",))
    for op, reason in (out or {}).items():
        rows = [(node, o, why) for _, node, o, why in e.left_out if op in o]
        assert rows, f"{op} is not among the ops left in ATen:\n{e}"
        assert all(reason in why for _, _, why in rows), f"{op}: {rows}\n{e}"
    return e


def _fused_ops(e, graphs, op):
    return [o for g, _, ops in e.partitions if g.startswith(graphs) for o in ops if op in o]


def _assert_fused(e, ops, graphs):
    for op in ops:
        assert _fused_ops(e, graphs, op), f"{op} not fused in {graphs}:\n{e}"


# ---- pointwise -----------------------------------------------------------------------------

UNARY = {
    "neg": (torch.neg, None),
    "exp": (torch.exp, None),
    "log": (torch.log, 0.5),
    "sqrt": (torch.sqrt, 0.5),
    "rsqrt": (torch.rsqrt, 0.5),
    "reciprocal": (torch.reciprocal, 0.5),
    "abs": (torch.abs, None),
    "tanh": (torch.tanh, None),
    "sigmoid": (torch.sigmoid, None),
    "relu": (torch.relu, None),
    "silu": (F.silu, None),
    "erf": (torch.erf, None),
    "gelu": (F.gelu, None),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), None),
    "pow3": (lambda x: x.pow(3), None),
    "pow2": (lambda x: x.pow(2), None),
    "pow_half": (lambda x: x.pow(0.5), 0.5),
    "pow_mhalf": (lambda x: x ** -0.5, 0.5),
    "pow_m1": (lambda x: x.pow(-1), 0.5),
    "pow_1p5": (lambda x: x.pow(1.5), 0.5),
}
ATEN_NAME = {"gelu_tanh": "gelu", "pow3": "pow", "pow2": "pow", "pow_half": "pow",
             "pow_mhalf": "pow", "pow_m1": "pow", "pow_1p5": "pow"}
BACKWARD_OP = {"tanh": "tanh_backward", "sigmoid": "sigmoid_backward",
               "relu": "threshold_backward", "silu": "silu_backward", "gelu": "gelu_backward",
               "gelu_tanh": "gelu_backward"}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name):
    f, low = UNARY[name]

    def fn(x, w):
        return f(x * w + 0.25) * 1.5

    x = rnd(3, 2, 8, grad=True, low=low)
    w = rnd(8, grad=True, low=0.75)
    fidelity(fn, x, w, fused=[ATEN_NAME.get(name, name)],
             fused_bw=[BACKWARD_OP[name]] if name in BACKWARD_OP else [])


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float64])
@pytest.mark.parametrize("name", ["gelu", "gelu_tanh", "silu", "relu"])
def test_unary_other_dtypes(name, dtype):
    f, low = UNARY[name]
    x = rnd(4, 8, dtype=dtype, grad=True, low=low)
    w = rnd(8, 8, dtype=dtype, grad=True)
    fidelity(lambda x, w: f(x @ w) * 0.5, x, w, fused=["mm", ATEN_NAME.get(name, name)],
             fused_bw=[BACKWARD_OP[name]] if name in BACKWARD_OP else [])


BINARY = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "add_alpha": lambda a, b: torch.add(a, b, alpha=-1.5),
    "sub_alpha": lambda a, b: torch.sub(a, b, alpha=0.25),
    "maximum": torch.maximum,
    "minimum": torch.minimum,
}


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_tensors(name):
    f = BINARY[name]
    a, b = rnd(4, 6, grad=True), rnd(4, 6, grad=True, low=0.5)
    op = name.split("_")[0]
    fidelity(lambda a, b: torch.relu(f(a, b)) * 2.0, a, b, fused=[op])


SCALARS = [2.5, -3, 0.1, 7]


@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_binary_with_python_scalar(op, side):
    f = {"add": operator_add, "sub": operator_sub, "mul": operator_mul,
         "div": operator_div}[op]

    def fn(x):
        h = torch.relu(x)
        for s in SCALARS:
            h = f(h, s) if side == "right" else f(s, h + 4.0)
        return h

    x = rnd(3, 5, grad=True, low=0.5)
    fidelity(fn, x, fused=["relu"])


def operator_add(a, b):
    return a + b


def operator_sub(a, b):
    return a - b


def operator_mul(a, b):
    return a * b


def operator_div(a, b):
    return a / b


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_tensor_with_python_floats(dtype):
    def fn(x, w):
        h = x @ w
        return (h * 0.1 + 1.7) / 3.3 - 0.3

    fidelity(fn, rnd(4, 8, dtype=dtype, grad=True), rnd(8, 8, dtype=dtype, grad=True),
             fused=["mm", "mul", "add", "div", "sub"])


def test_fp32_tensor_with_fp64_scalar_tensor():
    # A 0-dim fp64 tensor does not promote an fp32 tensor: the result stays fp32.
    s = torch.tensor(0.3, dtype=torch.float64)

    def fn(x, w):
        return (x @ w) * s + s

    fidelity(fn, rnd(4, 8, grad=True), rnd(8, 8, grad=True), fused=["mm"])


def test_fp32_with_fp64_tensor_promotes():
    def fn(x, w, y):
        return torch.relu(x @ w) * y

    fidelity(fn, rnd(4, 8, grad=True), rnd(8, 8, grad=True),
             rnd(4, 8, dtype=torch.float64, grad=True), dtype=torch.float32, fused=["mm"])


def test_int_tensors_stay_in_aten():
    def fn(x, w, i):
        return torch.relu(x @ w) + (i * 3 + 1) * 2

    i = torch.randint(-5, 5, (4, 8))
    fidelity(fn, rnd(4, 8, grad=True), rnd(8, 8, grad=True), i, fused=["mm", "relu"],
             out={"aten.mul.Tensor": "dtype torch.int64"})


def test_comparisons_and_where():
    def fn(x, y, w):
        h = x @ w
        a = torch.where(h > 0.25, h, y) + torch.where(h <= y, y * 2.0, h)
        b = torch.where(h >= 0.0, h, 0.5 * y) * torch.where(h < y, h, y)
        c = torch.where(h == y, h, y) + torch.where(h != 1.0, h, y)
        return a + b + c

    fidelity(fn, rnd(4, 8), rnd(4, 8), rnd(8, 8), backward=False,
             fused=["where", "gt", "le", "ge", "lt", "eq", "ne"])


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_comparison_with_scalar_rounds_like_aten(dtype):
    # x compared with 0.1 in x's dtype (ATen rounds the scalar): values at the rounding edge.
    edge = torch.tensor(0.1, dtype=dtype).item()
    vals = torch.tensor([edge, 0.1, -edge, 0.2, 1.0, -1.0, 0.05, edge * 2], dtype=dtype)

    def fn(x, w):
        h = x @ w
        return torch.where(h > 0.1, h, -h) + torch.where(h == 0.1, h * 0.0 + 5.0, h)

    x = vals.view(8, 1).repeat(1, 8)
    w = torch.eye(8, dtype=dtype)
    fidelity(fn, x, w, backward=False, fused=["mm", "where"])


def test_where_with_mask_from_outside_stays():
    def fn(x, w, m):
        return torch.where(m, torch.relu(x @ w), x) * 2.0

    fidelity(fn, rnd(4, 8, grad=True), rnd(8, 8, grad=True), torch.rand(4, 8) > 0.5,
             fused=["mm"], out={"where": "bit-packed"})


@pytest.mark.parametrize("src,dst", [(torch.float32, torch.bfloat16),
                                     (torch.bfloat16, torch.float32),
                                     (torch.float32, torch.float16),
                                     (torch.float32, torch.float64),
                                     (torch.float64, torch.float32)])
def test_casts(src, dst):
    def fn(x, w):
        return (x @ w).to(dst) * 2.0 + 1.0

    dtype = src if TOL[src]["rtol"] > TOL[dst]["rtol"] else dst
    fidelity(fn, rnd(4, 8, dtype=src, grad=True), rnd(8, 8, dtype=src, grad=True),
             dtype=dtype, fused=["mm", "_to_copy"])


def test_cast_down_and_back_rounds():
    # fp32 -> bf16 -> fp32 inside one graph: the value is rounded to bf16 as in ATen.
    def fn(x, w):
        return (x @ w).to(torch.bfloat16).to(torch.float32) * 3.0

    fidelity(fn, rnd(4, 8, grad=True), rnd(8, 8, grad=True), fused=["mm", "_to_copy"])


# ---- broadcasting --------------------------------------------------------------------------

BROADCASTS = [
    ([2, 3, 4], [4]),
    ([2, 3, 4], [3, 1]),
    ([2, 3, 4], [1, 3, 4]),
    ([2, 3, 4], [2, 1, 4]),
    ([2, 3, 4], []),
    ([2, 1, 4], [3, 1]),
    ([4], [2, 3, 4]),
    ([1, 3, 4], [2, 1, 4]),
]


@pytest.mark.parametrize("a,b", BROADCASTS)
def test_broadcast(a, b):
    def fn(x, y, w):
        h = torch.relu(x.view(-1, 4) @ w).view(x.shape)
        return h * y + (y - h) / 2.0

    x, y = rnd(*a, grad=True), rnd(*b, grad=True)
    fidelity(fn, x, y, rnd(4, 4, grad=True), fused=["mm", "relu"])


@settings(max_examples=12, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.integers(1, 3), min_size=1, max_size=4), st.data())
def test_broadcast_property(shape, data):
    other = [data.draw(st.sampled_from([1, n])) for n in shape]
    lead = data.draw(st.integers(0, len(other)))
    other = other[lead:]
    torch._dynamo.reset()

    def fn(x, y):
        return torch.sigmoid(x * y + 0.5) - y

    fidelity(fn, rnd(*shape, grad=True), rnd(*other, grad=True), fused=["sigmoid", "mul"])


# ---- reductions ----------------------------------------------------------------------------

REDUCTIONS = [
    ("sum", lambda x: x.sum(dim=[0, 2], keepdim=True)),
    ("sum", lambda x: x.sum(dim=-1)),
    ("sum", lambda x: x.sum(dim=(-3, -1))),
    ("sum", lambda x: x.sum()),
    ("mean", lambda x: x.mean(dim=1, keepdim=True)),
    ("mean", lambda x: x.mean(dim=[-1, 0])),
    ("amax", lambda x: torch.amax(x, dim=-2, keepdim=True)),
    ("amax", lambda x: torch.amax(x, dim=[0, 1])),
]


@pytest.mark.parametrize("k", range(len(REDUCTIONS)))
def test_reduction(k):
    name, f = REDUCTIONS[k]

    def fn(x, w):
        return f(torch.relu(x * w) * 2.0) + 1.0

    fidelity(fn, rnd(2, 3, 4, 5, grad=True), rnd(5, grad=True), fused=["relu", name])


def test_reduction_with_dtype_stays():
    def fn(x, w):
        return torch.relu(x @ w).sum(dim=-1, dtype=torch.float64) + 1.0

    fidelity(fn, rnd(4, 8, grad=True), rnd(8, 8, grad=True), dtype=torch.float32,
             fused=["mm", "relu"], out={"sum": "dtype"})


def test_reduction_bf16():
    def fn(x, w):
        h = x @ w
        return h.mean(dim=-1, keepdim=True) + h.sum(dim=0) * 0.1 + h.amax(dim=-1, keepdim=True)

    fidelity(fn, rnd(4, 8, dtype=torch.bfloat16, grad=True),
             rnd(8, 8, dtype=torch.bfloat16, grad=True), fused=["mm", "mean"], scale=2.0)


# ---- GEMMs ---------------------------------------------------------------------------------


@pytest.mark.parametrize("beta,alpha", [(0.5, 2.0), (0, 1.5), (-1.0, 0.25)])
@pytest.mark.parametrize("bias", [[6], [4, 6], [1, 6], [4, 1]])
def test_addmm(bias, beta, alpha):
    def fn(b, x, w):
        return torch.relu(torch.addmm(b, x, w, beta=beta, alpha=alpha))

    fidelity(fn, rnd(*bias, grad=True), rnd(4, 5, grad=True), rnd(5, 6, grad=True),
             fused=["addmm"])


@pytest.mark.parametrize("beta,alpha", [(1, 1), (0.5, -2.0), (0, 1.0)])
@pytest.mark.parametrize("bias", [[3, 4, 6], [4, 6], [3, 1, 6]])
def test_baddbmm(bias, beta, alpha):
    def fn(b, x, w):
        return torch.tanh(torch.baddbmm(b, x, w, beta=beta, alpha=alpha))

    fidelity(fn, rnd(*bias, grad=True), rnd(3, 4, 5, grad=True), rnd(3, 5, 6, grad=True),
             fused=["baddbmm"])


def test_bmm_and_mm_fp64():
    def fn(a, b, c):
        return torch.sigmoid(torch.bmm(a, b)) @ c

    fidelity(fn, rnd(2, 3, 4, dtype=torch.float64, grad=True),
             rnd(2, 4, 5, dtype=torch.float64, grad=True),
             rnd(5, 2, dtype=torch.float64, grad=True), fused=["bmm", "sigmoid"])


def test_linear_3d_and_transposed_weight():
    lin = nn.Linear(8, 6)

    def fn(x):
        return F.gelu(lin(x)) @ lin.weight

    fidelity(fn, rnd(2, 5, 8, grad=True), fused=["addmm", "gelu"], fused_bw=["gelu_backward"])


# ---- convolution ---------------------------------------------------------------------------

CONVS = [
    dict(stride=1, padding=1, dilation=1, bias=True),
    dict(stride=2, padding=0, dilation=1, bias=False),
    dict(stride=(2, 1), padding=(1, 2), dilation=(2, 1), bias=True),
    dict(stride=1, padding=2, dilation=2, bias=True),
]


@pytest.mark.parametrize("k", range(len(CONVS)))
def test_conv2d(k):
    conv = nn.Conv2d(3, 4, 3, **CONVS[k])

    def fn(x):
        return F.relu(conv(x))

    fidelity(fn, rnd(2, 3, 9, 8, grad=True), fused=["convolution", "relu"],
             fused_bw=["convolution_backward", "threshold_backward"])


def test_conv3d():
    conv = nn.Conv3d(2, 3, 3, padding=1, stride=(1, 2, 1))
    fidelity(lambda x: torch.sigmoid(conv(x)), rnd(2, 2, 4, 5, 4, grad=True),
             fused=["convolution"], fused_bw=["convolution_backward"])


def test_conv_channels_last_bf16():
    conv = nn.Conv2d(4, 8, 3, padding=1).to(torch.bfloat16, memory_format=torch.channels_last)
    x = rnd(2, 4, 6, 6, dtype=torch.bfloat16).contiguous(memory_format=torch.channels_last)
    fidelity(lambda x: F.silu(conv(x)), x.requires_grad_(True), fused=["convolution"],
             scale=2.0)


@pytest.mark.parametrize("cin,cout,groups,bias", [(4, 8, 2, True), (4, 8, 4, False),
                                                   (6, 6, 6, True), (6, 12, 3, True)])
def test_grouped_and_depthwise_conv(cin, cout, groups, bias):
    conv = nn.Conv2d(cin, cout, 3, padding=1, stride=2, groups=groups, bias=bias)
    fidelity(lambda x: F.relu(conv(x)) * 2.0, rnd(2, cin, 7, 6, grad=True),
             fused=["convolution"], fused_bw=["convolution_backward"])


def test_conv1d():
    conv = nn.Conv1d(3, 4, 3, padding=2, dilation=2)
    fidelity(lambda x: F.relu(conv(x)) * 2.0, rnd(2, 3, 10, grad=True),
             fused=["convolution"], fused_bw=["convolution_backward"])


def test_transposed_conv_stays():
    conv = nn.ConvTranspose2d(3, 4, 3, stride=2)
    fidelity(lambda x: F.relu(conv(x)) * 2.0, rnd(2, 3, 5, 5, grad=True),
             out={"convolution.default": "transposed"})


# ---- norms ---------------------------------------------------------------------------------


@pytest.mark.parametrize("shape,normalized", [([4, 16], [16]), ([2, 3, 8], [8]),
                                              ([2, 3, 4, 5], [4, 5])])
def test_layer_norm(shape, normalized):
    ln = nn.LayerNorm(normalized, eps=1e-3)
    with torch.no_grad():
        ln.weight.uniform_(0.5, 1.5)
        ln.bias.uniform_(-0.5, 0.5)

    def fn(x, r):
        return ln(x + r) * 2.0 + x

    fidelity(fn, rnd(*shape, grad=True), rnd(*shape, grad=True), fused=["native_layer_norm"],
             fused_bw=["native_layer_norm_backward"])


def test_layer_norm_without_affine_stays():
    ln = nn.LayerNorm(16, elementwise_affine=False)
    lin = nn.Linear(16, 16)
    fidelity(lambda x: lin(ln(x)), rnd(4, 16, grad=True),
             out={"native_layer_norm.default": "without weight"})


def test_layer_norm_bf16():
    ln = nn.LayerNorm(32).to(torch.bfloat16)
    lin = nn.Linear(32, 32).to(torch.bfloat16)
    fidelity(lambda x: F.gelu(lin(ln(x))), rnd(4, 32, dtype=torch.bfloat16, grad=True),
             fused=["native_layer_norm"], fused_bw=["native_layer_norm_backward"], scale=2.0)


@pytest.mark.parametrize("affine", [True, False])
def test_rms_norm(affine):
    norm = nn.RMSNorm(16, eps=1e-5, elementwise_affine=affine)
    if affine:
        with torch.no_grad():
            norm.weight.uniform_(0.5, 1.5)
    lin = nn.Linear(16, 16)
    fidelity(lambda x: lin(norm(x)), rnd(2, 3, 16, grad=True),
             fused=["rms_norm_pattern"] if affine else ["mean", "rsqrt"])


# ---- attention -----------------------------------------------------------------------------


@pytest.mark.parametrize("causal,scale", [(False, 0.3), (True, None)])
@pytest.mark.parametrize("lq,lk", [(8, 8), (4, 8), (8, 4)])
def test_sdpa(causal, scale, lq, lk):
    def fn(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale) * 2.0

    q = rnd(2, 3, lq, 16, grad=True)
    k, v = rnd(2, 3, lk, 16, grad=True), rnd(2, 3, lk, 16, grad=True)
    fidelity(fn, q, k, v, fused=["scaled_dot_product"], fused_bw=["scaled_dot_product"])


def test_sdpa_gqa():
    def fn(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True) + 1.0

    fidelity(fn, rnd(2, 4, 8, 16, grad=True), rnd(2, 2, 8, 16, grad=True),
             rnd(2, 2, 8, 16, grad=True), fused=["scaled_dot_product"])


def test_sdpa_mask_and_dropout_stay():
    def fn(q, k, v, m):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m) * 2.0

    q, k, v = (rnd(2, 3, 8, 16, grad=True) for _ in range(3))
    fidelity(fn, q, k, v, rnd(8, 8), out={"flash_attention_for_cpu.": "attention mask"})

    def dropped(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, dropout_p=0.5) * 2.0

    # On the CPU attention with dropout runs decomposed (ATen's math form): the random mask
    # stays in ATen, the GEMMs around it may fuse.
    e = dt.explain(dropped, q, k, v)
    rand_ops = [(op, why) for _, _, op, why in e.left_out
                if "dropout" in op or "bernoulli" in op or "rand" in op]
    assert rand_ops and all(why for _, why in rand_ops), str(e)
    assert not any("scaled_dot_product" in op for _, _, ops in e.partitions for op in ops)


# ---- stock models --------------------------------------------------------------------------


def _randomize(model):
    """Seeded non-trivial parameters and norm statistics (affine weights around 1)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("weight") and p.dim() == 1:
                p.uniform_(0.5, 1.5)
            elif name.endswith("bias"):
                p.uniform_(-0.5, 0.5)
        for m in model.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 1.5)
    return model


def _model_fidelity(model, x, scale=4.0, **kw):
    """Compiled against eager on deep copies of one model (train-mode statistics of the eager
    run must not leak into the compiled one), outputs, input and parameter gradients."""
    import copy

    ref = copy.deepcopy(model)
    xr = x.detach().clone().requires_grad_(x.requires_grad)
    out = ref(xr)
    upstream = torch.rand_like(out) + 0.5
    if x.requires_grad:
        (out * upstream).sum().backward()
    options = {"inner": "eager"}
    compiled = torch.compile(model, backend="dnngraph", options=options, **kw)
    with _backend.collect_reports() as reports:
        got = compiled(x)
        if x.requires_grad:
            (got * upstream).sum().backward()
    _close(got, out, torch.float32, scale, "output")
    if x.requires_grad:
        _close(x.grad, xr.grad, torch.float32, scale * 4, "input gradient")
        for (n, p), (_, pr) in zip(model.named_parameters(), ref.named_parameters()):
            _close(p.grad, pr.grad, torch.float32, scale * 4, f"gradient of {n}")
    for (n, b), (_, br) in zip(model.named_buffers(), ref.named_buffers()):
        _close(b, br, b.dtype if b.is_floating_point() else torch.float32, scale, f"buffer {n}")
    return dt.compile.Explanation(list(reports))


class MLP(nn.Module):
    def __init__(self, d=16, hidden=32):
        super().__init__()
        self.ln, self.fc1, self.fc2 = nn.LayerNorm(d), nn.Linear(d, hidden), nn.Linear(hidden, d)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(self.ln(x))))


class GPTBlock(nn.Module):
    def __init__(self, d=32, heads=4):
        super().__init__()
        self.h = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate="tanh"),
                                 nn.Linear(4 * d, d))

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (t.view(b, s, self.h, d // self.h).transpose(1, 2) for t in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, s, d))
        return x + self.mlp(self.ln2(x))


def test_mlp_layer_norm_gelu():
    e = _model_fidelity(_randomize(MLP()), rnd(2, 5, 16, grad=True))
    _assert_fused(e, ["addmm", "gelu"], ("forward",))
    _assert_fused(e, ["native_layer_norm_backward", "gelu_backward"], ("backward",))


def test_gpt_block():
    e = _model_fidelity(_randomize(GPTBlock()), rnd(2, 8, 32, grad=True))
    _assert_fused(e, ["native_layer_norm", "addmm", "gelu"], ("forward",))
    _assert_fused(e, ["native_layer_norm_backward", "gelu_backward"], ("backward",))


def test_vit_block_stock_encoder_layer():
    layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, activation="gelu",
                                       batch_first=True, norm_first=True)
    e = _model_fidelity(_randomize(layer), rnd(2, 6, 32, grad=True))
    _assert_fused(e, ["native_layer_norm"], ("forward",))


def test_llama_block():
    import os
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
    import torch_blocks

    block = torch_blocks.TorchLlamaBlock(32, 4, 2, 64, max_seq_len=16)
    e = _model_fidelity(_randomize(block), rnd(2, 8, 32, grad=True))
    _assert_fused(e, ["rms_norm_pattern", "mm"], ("forward",))
    _assert_fused(e, ["silu_backward"], ("backward",))


class Bottleneck(nn.Module):
    def __init__(self, c=8, mid=4):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(c, mid, 1, bias=False), nn.BatchNorm2d(mid)
        self.c2, self.b2 = nn.Conv2d(mid, mid, 3, padding=1, bias=False), nn.BatchNorm2d(mid)
        self.c3, self.b3 = nn.Conv2d(mid, c, 1, bias=False), nn.BatchNorm2d(c)

    def forward(self, x):
        h = F.relu(self.b1(self.c1(x)))
        h = F.relu(self.b2(self.c2(h)))
        return F.relu(x + self.b3(self.c3(h)))


@pytest.mark.parametrize("train", [False, True])
def test_resnet_bottleneck_batch_norm(train):
    m = _randomize(Bottleneck()).train(train)
    x = rnd(2, 8, 6, 6, grad=True)
    e = _model_fidelity(m, x)
    _assert_fused(e, ["convolution"], ("forward",))
    with torch.no_grad():
        torch._dynamo.reset()
        e = _model_fidelity(m, x.detach())
    if not train:
        # Inference: each batch norm unfolds to x * scale + shift: the whole block is one graph.
        (p,) = e.partitions
        assert p[2].count("aten.convolution.default") == 3, str(e)


def test_mobilenet_depthwise_separable():
    m = nn.Sequential(
        nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=False), nn.BatchNorm2d(8), nn.ReLU6(),
        nn.Conv2d(8, 16, 1, bias=False), nn.BatchNorm2d(16), nn.Hardswish(),
    )
    m = _randomize(m).eval()
    e = _model_fidelity(m, rnd(2, 8, 7, 7, grad=True))
    rows = [why for _, _, op, why in e.left_out if "hardtanh" in op or "hardswish" in op]
    assert rows and all(why == "op not mapped" for why in rows)
    with torch.no_grad():
        torch._dynamo.reset()
        e = _model_fidelity(m, rnd(2, 8, 7, 7))
    # The depthwise convolution and its unfolded batch norm run as one graph.
    assert any(ops.count("aten.convolution.default") == 1 and "aten.mul.Tensor" in ops
               for _, _, ops in e.partitions), str(e)


class UNetish(nn.Module):
    def __init__(self, c=4):
        super().__init__()
        self.down = nn.Conv2d(c, 2 * c, 3, stride=2, padding=1)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.fuse = nn.Conv2d(3 * c, c, 3, padding=1)

    def forward(self, x):
        h = F.silu(self.down(x))
        return F.relu(self.fuse(torch.cat([x, self.up(h)], dim=1)))


def test_unet_conv_upsample_cat():
    e = _model_fidelity(_randomize(UNetish()), rnd(2, 4, 8, 8, grad=True))
    _assert_fused(e, ["convolution"], ("forward",))
    _assert_fused(e, ["convolution_backward"], ("backward",))


def test_dropout_train_mode():
    m = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Dropout(0.3), nn.Linear(32, 16))
    x = rnd(4, 16, grad=True)
    # Same random stream for both runs: the dropout mask is drawn by ATen in both.
    torch.manual_seed(1)
    import copy

    ref = copy.deepcopy(m)
    out = ref(x)
    torch.manual_seed(1)
    got = torch.compile(m, backend="dnngraph", options={"inner": "eager"})(x)
    _close(got, out, torch.float32, 4.0, "output")
    e = dt.explain(m, x)
    rows = [why for _, _, op, why in e.left_out if "dropout" in op or "bernoulli" in op]
    assert rows and all(rows), str(e)


class InPlace(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        h = self.fc(x).relu_()
        y = h * 1.0
        y.add_(x, alpha=0.5)
        y.mul_(2.0)
        return y


def test_in_place_ops():
    e = _model_fidelity(_randomize(InPlace()), rnd(4, 16, grad=True))
    _assert_fused(e, ["addmm", "relu"], ("forward",))


class Counter(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)
        self.register_buffer("ema", torch.zeros(16))

    def forward(self, x):
        h = F.gelu(self.fc(x))
        with torch.no_grad():
            self.ema.mul_(0.9).add_(h.mean(0), alpha=0.1)
        return h * 2.0 + self.ema


def test_mutated_buffer():
    m = _randomize(Counter())
    e = _model_fidelity(m, rnd(4, 16, grad=True))
    _assert_fused(e, ["addmm", "gelu"], ("forward",))


def test_no_grad_inference():
    m = _randomize(GPTBlock())
    x = rnd(2, 8, 32)
    with torch.no_grad():
        e = _model_fidelity(m, x)
    assert [r for r in e.reports if r.graph.startswith("inference")]
    _assert_fused(e, ["native_layer_norm", "addmm", "gelu"], ("inference",))


def test_dynamic_batch():
    m = _randomize(MLP())
    compiled = torch.compile(m, backend="dnngraph", options={"inner": "eager"}, dynamic=True)
    for batch in (3, 5):
        x = rnd(batch, 16, grad=True)
        xr = x.detach().clone().requires_grad_(True)
        out, ref = compiled(x), m(xr)
        _close(out, ref, torch.float32, 4.0, f"batch {batch}")
        out.sum().backward()
        ref.sum().backward()
        _close(x.grad, xr.grad, torch.float32, 16.0, f"batch {batch} gradient")


def test_graph_breaks_print_and_item():
    lin = _randomize(nn.Linear(16, 16))

    def fn(x):
        h = F.gelu(lin(x))
        print("graph break")
        s = h.sum().item()
        return torch.relu(lin(h)) * (1.0 + abs(s) * 1e-3)

    e = fidelity(fn, rnd(4, 16, grad=True), fused=["addmm", "gelu"], scale=4.0)
    assert len([r for r in e.reports if r.graph.startswith("forward")]) >= 2


# ---- layouts, views and operand corner cases -----------------------------------------------


def test_non_contiguous_sliced_and_expanded_inputs():
    def fn(x, y, b, w):
        h = x.t() @ w  # transposed input of the GEMM
        return torch.relu(h + y[:, 1:5]) * b.expand(6, 4)

    x, y = rnd(8, 6, grad=True), rnd(6, 7, grad=True)
    fidelity(fn, x, y, rnd(1, 4, grad=True), rnd(8, 4, grad=True), fused=["mm", "relu"])


def test_same_input_twice_and_outputs_read_inside():
    def fn(x):
        h = x @ x.t()
        s = torch.sigmoid(h)
        return s, s * h + x.sum(-1, keepdim=True), h

    fidelity(fn, rnd(5, 5, grad=True), fused=["mm", "sigmoid"])


def test_view_chains_between_mapped_ops():
    w1, w2 = rnd(8, 12, grad=True), rnd(12, 8, grad=True)

    def fn(x, b, c):
        h = (x.view(-1, 8) @ w1).view(2, 3, 12)
        h = F.silu(h + b)  # b: [12], broadcast in the viewed dims
        h = h.view(6, 12) @ w2
        return h.view(2, 3, 8) * 0.5 + c  # c: [3, 1]: cannot follow the view

    fidelity(fn, rnd(2, 3, 8, grad=True), rnd(12, grad=True), rnd(3, 1, grad=True),
             fused=["mm", "silu"], out={"aten.add.Tensor": "does not broadcast"})


def test_threshold_backward_other_threshold():
    def fn(x, w):
        return F.threshold(x @ w, 0.3, 0.0) * 2.0

    fidelity(fn, rnd(4, 8, grad=True), rnd(8, 8, grad=True))


def test_where_with_scalar_operands():
    # torch.where with a number: ATen makes it a 0-dim tensor (scalar_tensor), read as a
    # constant. In training the backward saves the masks, which then stay in ATen.
    def fn(x, w):
        h = x @ w
        return torch.where(h > 0, h, 0.0) + torch.where(h < 0.5, h * 2.0, -1.5) * h

    fidelity(fn, rnd(4, 8), rnd(8, 8), fused=["mm", "where", "gt", "lt"])
    torch._dynamo.reset()
    fidelity(fn, rnd(4, 8, grad=True), rnd(8, 8, grad=True), out={"where": "bit-packed"})


def test_mixed_dtypes_bf16_gemm_fp32_residual():
    def fn(x, w, r):
        return (x @ w).float() + r * 2.0

    fidelity(fn, rnd(4, 8, dtype=torch.bfloat16, grad=True),
             rnd(8, 8, dtype=torch.bfloat16, grad=True), rnd(4, 8, grad=True),
             dtype=torch.bfloat16, fused=["mm"])


@settings(max_examples=10, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.integers(1, 4), min_size=1, max_size=4), st.data())
def test_reduction_property(shape, data):
    n = len(shape)
    dims = data.draw(st.lists(st.integers(-n, n - 1), min_size=1, max_size=n,
                              unique_by=lambda d: d % n))
    keepdim = data.draw(st.booleans())
    op = data.draw(st.sampled_from(["sum", "mean", "amax"]))
    torch._dynamo.reset()

    def fn(x, w):
        h = torch.tanh(x * w)
        return getattr(torch, op)(h, dim=dims, keepdim=keepdim) * 2.0 + 1.0

    x = rnd(*shape, grad=True)
    fidelity(fn, x, rnd(shape[-1], grad=True), fused=["tanh"])


def test_layer_norm_backward_partial_grads():
    ln = nn.LayerNorm(16)
    _randomize(ln)
    ln.bias.requires_grad_(False)
    lin = nn.Linear(16, 16)

    def fn(x):
        return lin(ln(x) * 2.0 + 1.0)

    fidelity(fn, rnd(4, 16), fused=["native_layer_norm"])
    fidelity(fn, rnd(4, 16, grad=True), fused=["native_layer_norm"],
             fused_bw=["native_layer_norm_backward"])


@pytest.mark.parametrize("e,ev", [(16, 8), (8, 16)])
def test_sdpa_value_head_dim_differs(e, ev):
    def fn(q, k, v):
        return F.scaled_dot_product_attention(q, k, v) * 2.0

    fidelity(fn, rnd(2, 2, 6, e, grad=True), rnd(2, 2, 6, e, grad=True),
             rnd(2, 2, 6, ev, grad=True))


def test_sdpa_bf16():
    def fn(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True) * 2.0

    q, k, v = (rnd(2, 2, 8, 16, dtype=torch.bfloat16, grad=True) for _ in range(3))
    fidelity(fn, q, k, v, fused=["scaled_dot_product"], fused_bw=["scaled_dot_product"],
             scale=2.0)


def test_sdpa_gqa_backward():
    def fn(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, enable_gqa=True, scale=0.2) * 2.0

    fidelity(fn, rnd(2, 6, 8, 16, grad=True), rnd(2, 2, 8, 16, grad=True),
             rnd(2, 2, 8, 16, grad=True), fused=["scaled_dot_product"],
             fused_bw=["scaled_dot_product"])


def test_amax_with_ties():
    # The gradient of amax is shared evenly between tied maxima.
    def fn(x, w):
        return torch.amax(torch.relu(x * w), dim=-1, keepdim=True) * 3.0

    x = torch.tensor([[1.0, 3.0, 3.0, -1.0], [2.0, 2.0, 2.0, 2.0], [-1.0, -2.0, -3.0, -4.0]])
    fidelity(fn, x.requires_grad_(True), torch.ones(4, requires_grad=True), fused=["amax"])


def test_rms_norm_bf16_and_default_eps():
    norm = nn.RMSNorm(16).to(torch.bfloat16)
    lin = nn.Linear(16, 16).to(torch.bfloat16)
    fidelity(lambda x: lin(norm(x)), rnd(2, 3, 16, dtype=torch.bfloat16, grad=True), scale=2.0)


def test_layer_norm_bf16_input_fp32_params():
    ln = _randomize(nn.LayerNorm(16))

    def fn(x, w):
        h = x @ w
        return F.layer_norm(h, (16,), ln.weight, ln.bias) * 2.0

    fidelity(fn, rnd(4, 16, dtype=torch.bfloat16, grad=True),
             rnd(16, 16, dtype=torch.bfloat16, grad=True), scale=2.0)


def test_conv_backward_channels_last_first_layer():
    # The input needs no gradient (first layer): convolution_backward without dgrad.
    m = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU())
    m = m.to(memory_format=torch.channels_last)
    x = rnd(2, 3, 6, 6).contiguous(memory_format=torch.channels_last)
    fidelity(m, x, fused=["convolution"], fused_bw=["convolution_backward"])


# ---- special values: NaN and inf as ATen treats them ---------------------------------------

SPECIAL = [float("nan"), float("inf"), -float("inf"), 1.0, -1.0, 0.0, 2.0, -0.5]


@pytest.mark.parametrize("name", ["maximum", "minimum", "where", "relu", "amax", "sigmoid",
                                  "gt"])
def test_special_values_forward(name):
    f = {
        "maximum": lambda h, y: torch.maximum(h, y) + torch.maximum(y, h * 0.5),
        "minimum": lambda h, y: torch.minimum(h, y) + torch.minimum(y * 2.0, h),
        "where": lambda h, y: torch.where(h > y, 0.5, h) * 2.0,
        "relu": lambda h, y: torch.relu(h) + y,
        "amax": lambda h, y: torch.amax(h * y, dim=-1, keepdim=True) + 1.0,
        "sigmoid": lambda h, y: torch.sigmoid(h) * y,
        "gt": lambda h, y: torch.where(h >= 1.0, h, y) + torch.where(h != h, y, h),
    }[name]
    x = torch.tensor(SPECIAL)
    y = torch.tensor(SPECIAL[::-1]).roll(3)
    op = {"maximum": "maximum", "minimum": "minimum", "where": "where", "amax": "amax",
          "gt": "where"}.get(name, "mul")
    fidelity(lambda x, y: f(x * 1.0, y), x.view(2, 4), y.view(2, 4), backward=False,
             fused=[op])


def test_relu_backward_blocks_inf_and_passes_nan_input():
    # ATen's threshold_backward selects: 0 where x <= 0 (also for an inf gradient there),
    # the gradient elsewhere (also where x is NaN).
    def fn(x):
        return torch.relu(x * 1.0) * 2.0

    x = torch.tensor(SPECIAL).requires_grad_(True)
    upstream = torch.tensor([1.0, float("inf"), float("inf"), float("nan"), float("inf"),
                             -float("inf"), 3.0, float("nan")])
    fn(x).backward(upstream)
    ref = x.grad.clone()
    x.grad = None
    compiled = torch.compile(fn, backend="dnngraph",
                             options={"inner": "eager", "fuse_pointwise": True})
    with _backend.collect_reports() as reports:
        compiled(x).backward(upstream)
    _close(x.grad, ref, torch.float32, 1.0, "gradient")
    e = dt.compile.Explanation(list(reports))
    _assert_fused(e, ["threshold_backward"], ("backward",))


ZERO_SIZE = {
    "batch": (lambda x, w: F.gelu(x @ w) * 2.0, [(0, 8), (8, 16)]),
    "k": (lambda x, w: torch.relu(x @ w + 1.0), [(4, 0), (0, 6)]),
    "conv": (lambda x, w: torch.relu(F.conv2d(x, w)) * 2.0, [(0, 3, 5, 5), (4, 3, 3, 3)]),
    "reduce": (lambda x, w: (x @ w).sum(0, keepdim=True) + 1.0, [(0, 8), (8, 4)]),
    "keys": (lambda q, k: F.scaled_dot_product_attention(q, k, k) * 2.0,
             [(1, 2, 4, 8), (1, 2, 0, 8)]),
}


@pytest.mark.parametrize("name", sorted(ZERO_SIZE))
def test_zero_size_tensors(name):
    # No crash and the same (empty or filled) result, fused or not.
    f, shapes = ZERO_SIZE[name]
    fidelity(f, *(rnd(*s) for s in shapes), backward=False)


# ---- GPU (cuDNN): skipped without CUDA; what the mapping added for the CPU, checked there ----

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def _gpu_fidelity(model, x, fused=None):
    """bf16 on the GPU (inner compiler: eager): outputs and gradients against eager; the ops
    in ``fused`` must have run in a fused graph (cuDNN's support check took them)."""
    import copy

    ref = copy.deepcopy(model)
    xr = x.detach().clone().requires_grad_(True)
    out = ref(xr)
    up = torch.rand_like(out) + 0.5
    (out.float() * up).sum().backward()
    compiled = torch.compile(model, backend="dnngraph", options={"inner": "eager"})
    with _backend.collect_reports() as reports:
        got = compiled(x)
        (got.float() * up).sum().backward()
    _close(got, out, torch.bfloat16, 2.0, "output")
    _close(x.grad, xr.grad, torch.bfloat16, 4.0, "input gradient")
    for (n, p), (_, pr) in zip(model.named_parameters(), ref.named_parameters()):
        _close(p.grad, pr.grad, torch.bfloat16, 8.0, f"gradient of {n}")
    e = dt.compile.Explanation(list(reports))
    _assert_fused(e, fused or [], ("forward",))
    return e


@needs_cuda
@pytest.mark.parametrize("groups", [1, 4, 32])
def test_gpu_grouped_and_depthwise_conv_bf16(groups):
    m = nn.Sequential(nn.Conv2d(32, 64, 3, padding=1, groups=groups), nn.ReLU())
    m = m.to("cuda", torch.bfloat16).to(memory_format=torch.channels_last)
    x = rnd(4, 32, 16, 16, dtype=torch.bfloat16).to("cuda")
    x = x.contiguous(memory_format=torch.channels_last).requires_grad_(True)
    e = _gpu_fidelity(m, x)
    print(e)  # whether cuDNN took the grouped convolution, and why not


@needs_cuda
def test_gpu_relu_backward_maximum_and_casts_bf16():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(64, 64), nn.Linear(64, 64)

        def forward(self, x):
            h = torch.relu(self.a(x))
            h = torch.maximum(h, self.b(x) * 0.5)
            return h.float().to(torch.bfloat16) * 2.0

    m = M().to("cuda", torch.bfloat16)
    e = _gpu_fidelity(m, rnd(32, 64, dtype=torch.bfloat16).to("cuda").requires_grad_(True),
                      fused=["addmm"])
    print(e)


@needs_cuda
def test_gpu_llama_block_bf16_still_fuses():
    import os
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
    import torch_blocks

    block = torch_blocks.TorchLlamaBlock(128, 4, 2, 256, max_seq_len=64).to("cuda", torch.bfloat16)
    x = rnd(2, 64, 128, dtype=torch.bfloat16).to("cuda").requires_grad_(True)
    e = _gpu_fidelity(block, x)
    assert e.partitions, str(e)


def test_strided_and_offset_operands():
    # Every operand a view with its own strides and storage offset: step slices, transposes,
    # narrowed rows, a broadcast (stride 0) bias.
    def fn(x, w, b, r):
        h = torch.addmm(b.expand(5, 6), x[1:, ::2], w.t()[2:, :6])
        return torch.sigmoid(h) * r[::2, 1:7] + r[1::2, :6].t().t()

    fidelity(fn, rnd(6, 16, grad=True), rnd(9, 10, grad=True), rnd(6, grad=True),
             rnd(10, 8, grad=True), fused=["addmm", "sigmoid"])


def test_bmm_strided_batches():
    def fn(a, b):
        return torch.tanh(torch.bmm(a.transpose(1, 2), b[:, ::2])) * 2.0

    fidelity(fn, rnd(3, 5, 4, grad=True), rnd(3, 10, 6, grad=True), fused=["bmm", "tanh"])


def test_fp32_comparison_in_an_fp64_graph():
    # The graph computes in fp64 (it reads an fp64 tensor); the fp32 values it compares are
    # rounded to fp32 first, as ATen compares them. h is exactly fp32(0.3) where x is 0.1.
    def fn(x, d):
        h = x * 3.0
        return torch.where(h > 0.3, h, -h) + torch.where(h == 0.3, 5.0, h).double() * d

    x = torch.tensor([[0.1, 0.2, 0.3, 0.1000001]]).repeat(2, 1)
    fidelity(fn, x, rnd(2, 4, dtype=torch.float64), backward=False, dtype=torch.float32,
             fused=["where"])


def test_fp64_conv_norm_attention():
    conv = nn.Conv2d(3, 4, 3, padding=1).double()
    ln = _randomize(nn.LayerNorm(16)).double()

    def fn(x, q, k, v, y):
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True) * 2.0
        return F.relu(conv(x)).sum() + a.sum() + (ln(y) * 3.0).sum()

    d = torch.float64
    fidelity(lambda *t: fn(*t).reshape(1), rnd(2, 3, 6, 6, dtype=d, grad=True),
             *(rnd(1, 2, 8, 16, dtype=d, grad=True) for _ in range(3)),
             rnd(4, 16, dtype=d, grad=True),
             fused=["convolution", "scaled_dot_product", "native_layer_norm"],
             fused_bw=["convolution_backward", "native_layer_norm_backward"])
