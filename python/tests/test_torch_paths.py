"""Both ways into every dnngraph.torch functional op, with non-default arguments and with the
defaults: the direct entry (``_fast``, the eager path) and the ``torch.ops`` path (taken under
torch.compile, for tensor subclasses and torch function modes, and when the direct entries are
not built), forced here by hiding ``_fast``. Each result is checked against torch, the two paths
against each other, and the op's graph must be in dnngraph's cache (conftest.py makes a
fallback to ATen an error)."""

import pytest

from torch_util import DEVICES, assert_close, assert_grads_close, rand, torch

import dnngraph.torch as dt
from dnngraph.torch import functional as F

TF = torch.nn.functional
OPS = torch.ops.dnngraph


@pytest.fixture(params=["fast", "torch_ops"])
def path(request, monkeypatch):
    if request.param == "torch_ops":
        monkeypatch.setattr(F, "_fast", None)
    elif F._fast is None:
        pytest.fail("dnngraph.torch._fast is not built: the eager path is untested")
    dt.clear_cache()
    return request.param


def built_by_dnngraph(op):
    """The op's graph was built and cached: dnngraph computed the call."""
    assert OPS._graph_json(op), f"no cached graph of dnngraph::{op}"


def assert_values_and_grads(ours, ref, leaves, device, scale, grad_scale):
    """ours(*leaves) against ref(*copies of the leaves): the values, then every leaf's gradient
    for one seeded upstream gradient. Returns ours' result and the copies."""
    copies = [t.detach().clone().requires_grad_() for t in leaves]
    y, yr = ours(*leaves), ref(*copies)
    assert y.shape == yr.shape
    assert_close(y, yr, torch.float32, device, scale=scale)
    assert_grads_close(y, yr, leaves, copies, torch.float32, device, scale=grad_scale)
    return y, copies


# ---------------------------------------------------------------- norms


@pytest.mark.parametrize("device", DEVICES)
def test_layer_norm_non_default_arguments(path, device):
    # Rows with a small variance: eps = 1e-3 changes the result by far more than the tolerance.
    x = rand(3, 4, 5, 6, device=device, scale=0.03, grad=True)
    w, b = rand(5, 6, device=device, grad=True), rand(5, 6, device=device, grad=True)
    y, (xr, wr, br) = assert_values_and_grads(
        lambda x, w, b: F.layer_norm(x, (5, 6), w, b, eps=1e-3),
        lambda x, w, b: TF.layer_norm(x, (5, 6), w, b, eps=1e-3), (x, w, b), device, 1, 4)
    assert (y - TF.layer_norm(xr, (5, 6), wr, br, eps=1e-5)).abs().max() > 1e-2
    built_by_dnngraph("layer_norm")


@pytest.mark.parametrize("device", DEVICES)
def test_layer_norm_default_eps_is_torchs(path, device):
    # Variance ~1e-6: the default eps (1e-5) dominates it, so any other default shows.
    x = rand(4, 32, device=device, scale=1e-3)
    assert_close(F.layer_norm(x, 32), TF.layer_norm(x, (32,)), torch.float32, device)
    assert_close(F.layer_norm(x, [32], None, None), TF.layer_norm(x, [32], eps=1e-5),
                 torch.float32, device)
    built_by_dnngraph("layer_norm")


@pytest.mark.parametrize("device", DEVICES)
def test_rms_norm_non_default_and_default_eps(path, device):
    x = rand(2, 3, 16, device=device, scale=0.05)
    w = rand(16, device=device)
    assert_close(F.rms_norm(x, 16, w, eps=1e-2), TF.rms_norm(x, (16,), w, eps=1e-2),
                 torch.float32, device)
    assert (F.rms_norm(x, 16, w, eps=1e-2) - TF.rms_norm(x, (16,), w, eps=1e-6)).abs().max() > 1e-2
    # Default eps: torch.finfo(dtype).eps (1.2e-7), of the size of these rows' mean square.
    tiny = rand(2, 3, 16, device=device, scale=3e-4)
    want = TF.rms_norm(tiny, (16,), w, eps=torch.finfo(torch.float32).eps)
    assert_close(F.rms_norm(tiny, [16], w), want, torch.float32, device)
    assert_close(F.rms_norm(tiny, (16,), w, None), want, torch.float32, device)
    built_by_dnngraph("rms_norm")


def test_norm_modules_default_eps(path):
    x = rand(3, 24, scale=1e-3)
    ln, ref = dt.LayerNorm(24), torch.nn.LayerNorm(24)
    assert ln.eps == ref.eps == 1e-5
    with torch.no_grad():
        ln.weight.copy_(rand(24)), ln.bias.copy_(rand(24))
    ref.load_state_dict(ln.state_dict())
    assert_close(ln(x), ref(x), torch.float32)
    rms, rref = dt.RMSNorm(24), torch.nn.RMSNorm(24)
    assert rms.eps is None and rref.eps is None
    tiny = rand(3, 24, scale=3e-4)
    assert_close(rms(tiny), rref(tiny), torch.float32)
    built_by_dnngraph("layer_norm")
    built_by_dnngraph("rms_norm")


# ---------------------------------------------------------------- gemm


GELU_TANH = lambda z: TF.gelu(z, approximate="tanh")  # noqa: E731
LINEAR_ACTS = {"gelu_tanh": GELU_TANH, "tanh": torch.tanh, "sigmoid": torch.sigmoid,
               "silu": TF.silu}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("act", list(LINEAR_ACTS))
def test_linear_with_bias_and_activation(path, device, act):
    x, w, b = rand(2, 5, 12, device=device), rand(7, 12, device=device), rand(7, device=device)
    assert_close(F.linear(x, w, b, act), LINEAR_ACTS[act](TF.linear(x, w, b)), torch.float32,
                 device)
    assert_close(F.linear(x, w, b, activation=act), LINEAR_ACTS[act](TF.linear(x, w, b)),
                 torch.float32, device)
    built_by_dnngraph("linear_act")


@pytest.mark.parametrize("device", DEVICES)
def test_linear_defaults(path, device):
    x, w = rand(6, 12, device=device), rand(7, 12, device=device)
    assert_close(F.linear(x, w), TF.linear(x, w), torch.float32, device)
    built_by_dnngraph("linear_act")


@pytest.mark.parametrize("device", DEVICES)
def test_matmul_epilogue_non_default_arguments(path, device):
    a, b = rand(3, 4, 8, device=device), rand(3, 8, 5, device=device)
    bias = rand(5, device=device)
    y, amax = F.matmul_epilogue(a, b, bias, alpha=-0.75, activation="silu", amax=True)
    want = TF.silu(-0.75 * (a @ b) + bias)
    assert_close(y, want, torch.float32, device)
    assert amax.dim() == 0 and amax.dtype == torch.float32
    assert_close(amax, want.abs().max(), torch.float32, device)
    y2 = F.matmul_epilogue(a, b[:1], None, 2.5, "gelu")  # b broadcast over the batch
    assert_close(y2, TF.gelu(2.5 * (a @ b[:1])), torch.float32, device)
    built_by_dnngraph("matmul_epilogue")


@pytest.mark.parametrize("device", DEVICES)
def test_matmul_epilogue_defaults(path, device):
    a, b = rand(4, 8, device=device), rand(8, 5, device=device)
    y = F.matmul_epilogue(a, b)
    assert isinstance(y, torch.Tensor)  # amax=False: y alone
    assert_close(y, a @ b, torch.float32, device)
    built_by_dnngraph("matmul_epilogue")


# ---------------------------------------------------------------- conv


CONV_CASES = [  # stride, padding, dilation, groups: each differs from the others and per axis
    ((2, 1), (0, 2), (1, 2), 2),
    (2, 1, 1, 1),
    ((1, 3), (2, 0), 1, 1),
    (3, 2, 2, 2),
]


@pytest.mark.parametrize("device", DEVICES)
def test_conv2d_bias_act_keywords_and_defaults(path, device):
    x, w = rand(1, 3, 9, 8, device=device), rand(5, 3, 3, 2, device=device, scale=0.3)
    assert_close(F.conv2d_bias_act(x, w), TF.conv2d(x, w), torch.float32, device, scale=2)
    got = F.conv2d_bias_act(x, w, padding=(1, 0), stride=(1, 2), activation="sigmoid")
    want = torch.sigmoid(TF.conv2d(x, w, None, stride=(1, 2), padding=(1, 0)))
    assert_close(got, want, torch.float32, device, scale=2)
    built_by_dnngraph("conv2d_bias_act")


# ---------------------------------------------------------------- sdpa


@pytest.mark.parametrize("device", DEVICES)
def test_sdpa_bool_mask_causal_and_defaults(path, device):
    q, k, v = (rand(1, 2, 6, 8, device=device) for _ in range(3))
    keep = torch.rand(6, 6, generator=torch.Generator().manual_seed(5)) > 0.3
    keep |= torch.eye(6, dtype=torch.bool)  # every row attends somewhere
    keep = keep.to(device)
    assert_close(F.scaled_dot_product_attention(q, k, v, keep),
                 TF.scaled_dot_product_attention(q, k, v, keep), torch.float32, device, scale=2)
    assert_close(F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.2),
                 TF.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.2),
                 torch.float32, device, scale=2)
    # Defaults: no mask, not causal, scale 1/sqrt(D).
    assert_close(F.scaled_dot_product_attention(q, k, v), TF.scaled_dot_product_attention(q, k, v),
                 torch.float32, device, scale=2)
    built_by_dnngraph("sdpa")


# ---------------------------------------------------------------- values and gradients


def conv_case(stride, padding, dilation, groups):
    def make(device):
        x = rand(2, 4, 11, 10, device=device, grad=True)
        w = rand(6, 4 // groups, 3, 3, device=device, scale=0.3, grad=True)
        b = rand(6, device=device, grad=True)
        return ((x, w, b),
                lambda x, w, b: F.conv2d_bias_act(x, w, b, stride, padding, dilation, groups,
                                                  "tanh"),
                lambda x, w, b: torch.tanh(TF.conv2d(x, w, b, stride, padding, dilation, groups)))
    return make


def sdpa_mask_scale_gqa(device):
    q = rand(2, 4, 5, 8, device=device, grad=True)
    k, v = rand(2, 2, 7, 8, device=device, grad=True), rand(2, 2, 7, 8, device=device, grad=True)
    mask = rand(1, 1, 5, 7, device=device)
    kw = dict(attn_mask=mask, scale=0.3, enable_gqa=True)
    return ((q, k, v), lambda q, k, v: F.scaled_dot_product_attention(q, k, v, **kw),
            lambda q, k, v: TF.scaled_dot_product_attention(q, k, v, **kw))


# (op, inputs and the two calls, value tolerance scale, gradient tolerance scale)
GRAD_CASES = [
    *(pytest.param("conv2d_bias_act", conv_case(*c), 2, 8, id=f"conv2d_bias_act-{i}")
      for i, c in enumerate(CONV_CASES)),
    pytest.param("sdpa", sdpa_mask_scale_gqa, 2, 4, id="sdpa-mask-scale-gqa"),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op, make, scale, grad_scale", GRAD_CASES)
def test_values_and_gradients_non_default_arguments(path, device, op, make, scale, grad_scale,
                                                    allow_aten_fallback):
    fp32_attention_on_gpu = op == "sdpa" and device == "cuda"
    if fp32_attention_on_gpu:
        allow_aten_fallback("cuDNN has no fp32 attention: ATen's runs it")
    leaves, ours, ref = make(device)
    assert_values_and_grads(ours, ref, leaves, device, scale, grad_scale)
    if not fp32_attention_on_gpu:
        built_by_dnngraph(op)


def test_paths_agree_exactly(monkeypatch):
    """The two ways in run one op: equal bits for the same non-default arguments."""
    x, w, lw = rand(2, 4, 9, 7), rand(6, 2, 3, 3), rand(3, 7)
    q, k, v = rand(1, 4, 5, 8), rand(1, 2, 5, 8), rand(1, 2, 5, 8)
    calls = [
        lambda: F.layer_norm(x, (9, 7), None, None, 1e-2),
        lambda: F.rms_norm(x, 7, None, 1e-3),
        lambda: F.linear(x, lw, None, "gelu"),
        lambda: F.matmul_epilogue(x[0], x[1].transpose(1, 2), None, 0.5, "relu", True)[1],
        lambda: F.conv2d_bias_act(x, w, None, (2, 1), (1, 0), (1, 2), 2, "silu"),
        lambda: F.scaled_dot_product_attention(q, k, v, None, 0.0, True, 0.4, True),
    ]
    fast = [c() for c in calls]
    monkeypatch.setattr(F, "_fast", None)
    for i, (c, y) in enumerate(zip(calls, fast)):
        torch.testing.assert_close(c(), y, rtol=0, atol=0, msg=f"call {i}")


@pytest.mark.parametrize("bad", [dict(stride=(0, 1)), dict(stride=-1), dict(padding=(1, -1)),
                                 dict(dilation=(2, 0))])
def test_conv2d_bias_act_refuses_non_positive_stride_dilation_and_negative_padding(path, bad):
    x, w = rand(1, 2, 6, 6), rand(3, 2, 3, 3)
    (name,) = bad
    msg = rf"'{name}' is .*; each value must be >= {0 if name == 'padding' else 1}"
    with pytest.raises(ValueError, match=msg):
        F.conv2d_bias_act(x, w, **bad)
    with pytest.raises(ValueError, match=msg):
        F.conv2d_bias_act(x.to("meta"), w.to("meta"), **bad)
