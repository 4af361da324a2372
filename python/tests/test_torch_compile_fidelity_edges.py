"""torch.compile(backend="dnngraph") against eager on the corner cases of the mapping: operand
layouts (strides, offsets, broadcasts, views between mapped ops), reductions over any dims
(hypothesis), partial gradients, attention shapes, fp64 graphs, NaN and inf as ATen treats them,
zero-size tensors."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from compile_fidelity import (  # noqa: F401  (fresh: the autouse fixture)
    assert_fused, close, fidelity, fresh, randomize, rnd,
)
from torch_util import torch  # noqa: F401  (skips without dnngraph.torch)

import torch.nn as nn
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensorMode

import dnngraph.torch as dt
from dnngraph.torch.compile import _backend


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


@settings(max_examples=8, deadline=None, derandomize=True,
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
    randomize(ln)
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
    ln = randomize(nn.LayerNorm(16))

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
                                  "gt", "softmax", "log_softmax"])
def test_special_values_forward(name):
    f = {
        "maximum": lambda h, y: torch.maximum(h, y) + torch.maximum(y, h * 0.5),
        "minimum": lambda h, y: torch.minimum(h, y) + torch.minimum(y * 2.0, h),
        "where": lambda h, y: torch.where(h > y, 0.5, h) * 2.0,
        "relu": lambda h, y: torch.relu(h) + y,
        "amax": lambda h, y: torch.amax(h * y, dim=-1, keepdim=True) + 1.0,
        "sigmoid": lambda h, y: torch.sigmoid(h) * y,
        "gt": lambda h, y: torch.where(h >= 1.0, h, y) + torch.where(h != h, y, h),
        "softmax": lambda h, y: torch.softmax(h, -1) + y,
        "log_softmax": lambda h, y: F.log_softmax(h, -1) * y,
    }[name]
    x = torch.tensor(SPECIAL)
    y = torch.tensor(SPECIAL[::-1]).roll(3)
    op = {"maximum": "maximum", "minimum": "minimum", "where": "where", "amax": "amax",
          "gt": "where", "softmax": "_softmax", "log_softmax": "_log_softmax"}.get(name, "mul")
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
    close(x.grad, ref, torch.float32, 1.0, "gradient")
    e = dt.compile.Explanation(list(reports))
    assert_fused(e, ["threshold_backward"], ("backward",))


ZERO_SIZE = {
    "batch": (lambda x, w: F.gelu(x @ w) * 2.0, [(0, 8), (8, 16)]),
    "k": (lambda x, w: torch.relu(x @ w + 1.0), [(4, 0), (0, 6)]),
    "conv": (lambda x, w: torch.relu(F.conv2d(x, w)) * 2.0, [(0, 3, 5, 5), (4, 3, 3, 3)]),
    "reduce": (lambda x, w: (x @ w).sum(0, keepdim=True) + 1.0, [(0, 8), (8, 4)]),
    "keys": (lambda q, k: F.scaled_dot_product_attention(q, k, k) * 2.0,
             [(1, 2, 4, 8), (1, 2, 0, 8)]),
}


@pytest.mark.parametrize("name", sorted(ZERO_SIZE))
def test_zero_sizetensors_of(name):
    # No crash and the same (empty or filled) result, fused or not.
    f, shapes = ZERO_SIZE[name]
    fidelity(f, *(rnd(*s) for s in shapes), backward=False)



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
    ln = randomize(nn.LayerNorm(16)).double()

    def fn(x, q, k, v, y):
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True) * 2.0
        return F.relu(conv(x)).sum() + a.sum() + (ln(y) * 3.0).sum()

    d = torch.float64
    # torch 2.11 traces fp64 attention's logsumexp as fp32 (its fake kernel; the real one gives
    # fp64): the backend then leaves attention in ATen rather than lose fp64 precision.
    q = rnd(1, 2, 8, 16, dtype=d)
    with FakeTensorMode() as mode:
        fq = mode.from_tensor(q)
        traced_lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(fq, fq, fq)[1]
    exact = traced_lse.dtype == torch.float64
    fidelity(lambda *t: fn(*t).reshape(1), rnd(2, 3, 6, 6, dtype=d, grad=True),
             *(rnd(1, 2, 8, 16, dtype=d, grad=True) for _ in range(3)),
             rnd(4, 16, dtype=d, grad=True),
             fused=["convolution", "native_layer_norm"] + (["scaled_dot_product"] if exact else []),
             fused_bw=["convolution_backward", "native_layer_norm_backward"],
             out={} if exact else {"scaled_dot_product": "lose fp64 precision"})


@pytest.mark.parametrize("name", ["clamp", "hardtanh", "hardswish"])
def test_clamp_special_values(name):
    # A NaN input stays NaN; the hardtanh gradient is a select (inf where clipped gives 0).
    f = {"clamp": lambda h: torch.clamp(h, -0.5, 1.5), "hardtanh": F.relu6,
         "hardswish": F.hardswish}[name]
    x = torch.tensor(SPECIAL).requires_grad_(True)
    upstream = torch.tensor([1.0, float("inf"), -float("inf"), 2.0, float("nan"), 3.0, 4.0, 5.0])
    f(x * 1.0).backward(upstream)
    ref, ref_out = x.grad.clone(), f(x * 1.0)
    x.grad = None
    compiled = torch.compile(lambda x: f(x * 1.0), backend="dnngraph",
                             options={"inner": "eager", "fuse_pointwise": True})
    with _backend.collect_reports() as reports:
        out = compiled(x)
        out.backward(upstream)
    close(out, ref_out, torch.float32, 1.0, "output")
    close(x.grad, ref, torch.float32, 1.0, "gradient")
    assert_fused(dt.compile.Explanation(list(reports)), [name], ("forward",))


def test_softmax_masked_rows():
    # -inf scores (a masked_fill mask) give 0; a row masked whole gives NaN, as in ATen.
    def fn(x, m):
        return torch.softmax((x * 2.0).masked_fill(m, -float("inf")), dim=-1) * 1.0

    m = torch.tensor([[False, True, False, True], [True, True, True, True],
                      [False, False, False, False]])
    fidelity(fn, rnd(3, 4), m, backward=False, fused=["_softmax"])
