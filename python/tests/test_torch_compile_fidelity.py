"""Differential test of torch.compile(backend="dnngraph") against eager on the CPU (reference
engine): every ATen op and fusion the backend maps, run in a tiny function or module on seeded
random inputs, forward and backward (gradients of inputs and parameters), with the outputs of
every fused graph poisoned first. Each case also asserts, from the backend's own decisions (what
``dnngraph.torch.explain`` prints), that the op under test really ran in a fused graph, or, for
the arguments the mapping does not take, that it stayed in ATen with its reason."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from compile_fidelity import (  # noqa: F401  (fresh: the autouse fixture)
    TOL, fidelity, fresh, rnd,
)
from torch_util import torch  # noqa: F401  (skips without dnngraph.torch)

import torch.nn as nn
import torch.nn.functional as F

import dnngraph.torch as dt


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


@settings(max_examples=8, deadline=None, derandomize=True,
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


CLAMPS = {
    "clamp": lambda h: torch.clamp(h, -0.5, 0.75),
    "clamp_min": lambda h: torch.clamp(h, min=-0.25),
    "clamp_max": lambda h: h.clamp(max=0.5),
    "relu6": F.relu6,
    "hardtanh": lambda h: F.hardtanh(h, -0.3, 0.6),
    "hardswish": F.hardswish,
    "rsub": lambda h: 1.5 - h,
    "rsub_tensor": lambda h: torch.rsub(h, h * h, alpha=2.0),
}


@pytest.mark.parametrize("name", sorted(CLAMPS))
def test_clamps_and_rsub(name):
    def fn(x, w):
        return CLAMPS[name](x @ w) * 2.0

    fidelity(fn, rnd(4, 8, grad=True), rnd(8, 8, grad=True), fused=["mm", name.split("_")[0]
             if name != "relu6" else "hardtanh"],
             fused_bw=[{"relu6": "hardtanh_backward", "hardtanh": "hardtanh_backward",
                        "hardswish": "hardswish_backward"}[name]]
             if name in ("relu6", "hardtanh", "hardswish") else [])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_softmax(dtype):
    def fn(x, w):
        return torch.softmax(x @ w * 0.5, dim=-1) * 3.0 + F.softmax(x, dim=1)

    fidelity(fn, rnd(4, 8, dtype=dtype, grad=True), rnd(8, 8, dtype=dtype, grad=True),
             fused=["mm", "_softmax"], fused_bw=["_softmax_backward_data"],
             scale=1.0 if dtype == torch.float32 else 2.0)


def test_softmax_other_dim_stays():
    def fn(x, w):
        return torch.softmax(x @ w, dim=0) * 3.0

    fidelity(fn, rnd(4, 8, grad=True), rnd(8, 8, grad=True),
             out={"_softmax.default": "last dim"})


def test_log_softmax_and_cross_entropy():
    lin = nn.Linear(8, 5)

    def fn(x, t):
        logits = lin(x)
        return F.log_softmax(logits * 2.0, dim=-1) * 1.5 + F.cross_entropy(logits, t)

    fidelity(fn, rnd(6, 8, grad=True), torch.randint(0, 5, (6,)),
             fused=["_log_softmax"], fused_bw=["_log_softmax_backward_data"])
