"""Random calls of the dnngraph.torch ops against the matching ATen op: random shapes (empty
dims included), dtypes, activations, and layouts (contiguous, permuted, sliced, stride-0
expanded, overlapping views, stride 0 on dims of extent 1). Each valid call must give ATen's
answer (forward and gradients); each call with perturbed shapes must give ATen's answer or
raise a clean error (ValueError, TypeError, NotImplementedError or RuntimeError naming the
op), never crash.
Devices: cpu, and cuda where a GPU and dnngraph's cuDNN engine are present (meta for the
hostile shapes).

The example counts follow DNNGRAPH_PROPERTY_SCALE (props.py): a handful per test by default,
about two thousand in `make test-property`."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from props import count_case, prop_settings

torch = pytest.importorskip("torch")
try:
    import dnngraph.torch  # noqa: F401
    from dnngraph.torch import functional as F
except ImportError as e:  # built without torch
    pytest.skip(f"dnngraph.torch not built: {e}", allow_module_level=True)

from torch_util import ACTS, TF  # noqa: E402

DTYPES = [torch.float32, torch.float64, torch.bfloat16]


def _cuda_usable():
    if not torch.cuda.is_available():
        return False
    try:
        import dnngraph

        dnngraph.create_handle(device="cuda")
        return True
    except Exception:
        return False


DEVICES = ["cpu"] + (["cuda"] if _cuda_usable() else [])
TOL = {torch.float64: 1e-9, torch.float32: 2e-5, torch.bfloat16: 3e-2}
LAYOUTS = ["contiguous", "permuted", "sliced", "expanded", "overlapping", "unit_stride0"]
ERRORS = (ValueError, TypeError, NotImplementedError, RuntimeError)


def make(shape, layout, dtype, gen, device="cpu"):
    """A tensor of `shape` on `device` with the given memory layout, values ~N(0, 1) (never all
    zeros)."""
    shape = list(shape)
    rnd = lambda s: torch.randn(*s, generator=gen, dtype=torch.float64).to(device, dtype)  # noqa: E731
    if layout == "permuted" and len(shape) >= 2:
        return rnd(shape[::-1]).permute(*reversed(range(len(shape))))
    if layout == "sliced" and shape:
        return rnd(shape[:-1] + [2 * shape[-1]])[..., ::2]
    if layout == "expanded" and shape:
        # Every other dim of extent > 1 broadcast from 1: stride 0 there.
        base = [1 if (i % 2 == 0 and s > 1) else s for i, s in enumerate(shape)]
        return rnd(base).expand(*shape)
    if layout == "overlapping" and len(shape) >= 2 and all(s > 0 for s in shape):
        # Rows that share elements: stride 1 along the last dim and along the one before it.
        strides = [1] * len(shape)
        for i in range(len(shape) - 3, -1, -1):
            strides[i] = strides[i + 1] * (shape[i + 1] + 1)
        size = 1 + sum((s - 1) * st_ for s, st_ in zip(shape, strides))
        return rnd([size]).as_strided(shape, strides)
    if layout == "unit_stride0" and 1 in shape:
        # Stride 0 on the dims of extent 1 (never stepped over).
        t = rnd(shape)
        return t.as_strided(shape, [0 if n == 1 else st_ for n, st_ in zip(shape, t.stride())])
    return rnd(shape)


def close(got, want, dtype, scale=1.0):
    tol = TOL[dtype] * scale
    if got.is_cuda and dtype == torch.float32:
        tol = max(tol, 5e-3)  # cuDNN may use TF32 tensor cores
    torch.testing.assert_close(got.double(), want.double(), atol=tol * (1 + want.abs().max().item() if want.numel() else 1), rtol=tol)


def grads_of(fn, inputs, dy):
    leaves = [t.detach().requires_grad_() if t is not None else None for t in inputs]
    y = fn(*leaves)
    y.backward(dy)
    return y, [t.grad if t is not None else None for t in leaves]


def check_against_aten(ours, aten, inputs, dtype, scale=1.0, grad=True, gen=None):
    """Forward (and, for fp32/fp64, every input's gradient) of `ours` against `aten` computed in
    fp64 on the same values."""
    count_case()
    y = ours(*inputs)
    ref_inputs = [t.double() if t is not None else None for t in inputs]
    want = aten(*ref_inputs)
    assert y.shape == want.shape and y.dtype == inputs[0].dtype
    close(y, want, dtype, scale)
    if not grad or dtype == torch.bfloat16:
        return
    dy = torch.randn(*y.shape, generator=gen, dtype=torch.float64).to(y.device, dtype)
    _, g = grads_of(ours, inputs, dy)
    _, g_ref = grads_of(aten, ref_inputs, dy.double())
    for a, b in zip(g, g_ref):
        if b is None:
            continue
        assert a is not None and a.shape == b.shape
        close(a, b, dtype, 4 * scale)


# ---------------------------------------------------------------- linear


@st.composite
def linear_cases(draw):
    lead = draw(st.lists(st.integers(0, 4), min_size=0, max_size=2))
    k, n = draw(st.integers(0, 6)), draw(st.integers(1, 5))
    return dict(
        lead=lead, k=k, n=n, bias=draw(st.booleans()), act=draw(st.sampled_from(sorted(ACTS))),
        dtype=draw(st.sampled_from(DTYPES)), lx=draw(st.sampled_from(LAYOUTS)),
        lw=draw(st.sampled_from(LAYOUTS)), seed=draw(st.integers(0, 2**31 - 1)),
        device=draw(st.sampled_from(DEVICES)),
    )


@prop_settings(1600)
@given(linear_cases())
def test_linear_matches_aten(c):
    gen = torch.Generator().manual_seed(c["seed"])
    dev = c["device"]
    x = make(c["lead"] + [c["k"]], c["lx"], c["dtype"], gen, dev)
    w = make([c["n"], c["k"]], c["lw"], c["dtype"], gen, dev)
    b = make([c["n"]], "contiguous", c["dtype"], gen, dev) if c["bias"] else None
    act = c["act"]
    check_against_aten(
        lambda x, w, b: F.linear(x, w, b, act),
        lambda x, w, b: ACTS[act](TF.linear(x, w, b)),
        [x, w, b], c["dtype"], scale=max(1, c["k"]), gen=gen,
    )


# ---------------------------------------------------------------- matmul_epilogue


@st.composite
def epilogue_cases(draw):
    three_d = draw(st.booleans())
    batch = draw(st.integers(0, 3))
    ba, bb = draw(st.sampled_from([(batch, batch), (1, batch), (batch, 1)]))
    m, k, n = draw(st.integers(1, 5)), draw(st.integers(1, 6)), draw(st.integers(1, 5))
    bias = draw(st.sampled_from(["none", "n", "mn", "1mn"]))
    return dict(
        three_d=three_d, ba=ba, bb=bb, m=m, k=k, n=n, bias=bias,
        alpha=draw(st.sampled_from([1.0, 0.5, -2.0])), act=draw(st.sampled_from(sorted(ACTS))),
        dtype=draw(st.sampled_from(DTYPES)), la=draw(st.sampled_from(LAYOUTS)),
        lb=draw(st.sampled_from(LAYOUTS)), seed=draw(st.integers(0, 2**31 - 1)),
        device=draw(st.sampled_from(DEVICES)),
    )


@prop_settings(1600)
@given(epilogue_cases())
def test_matmul_epilogue_matches_aten(c):
    gen = torch.Generator().manual_seed(c["seed"])
    lead_a = [c["ba"]] if c["three_d"] else []
    lead_b = [c["bb"]] if c["three_d"] else []
    dev = c["device"]
    a = make(lead_a + [c["m"], c["k"]], c["la"], c["dtype"], gen, dev)
    b = make(lead_b + [c["k"], c["n"]], c["lb"], c["dtype"], gen, dev)
    bias_shape = {"none": None, "n": [c["n"]], "mn": [c["m"], c["n"]], "1mn": [1, c["m"], c["n"]]}
    bs = bias_shape[c["bias"]]
    if bs is not None and not c["three_d"] and len(bs) == 3:
        bs = bs[1:]
    bias = make(bs, "contiguous", c["dtype"], gen, dev) if bs else None
    alpha, act = c["alpha"], c["act"]
    check_against_aten(
        lambda a, b, bias: F.matmul_epilogue(a, b, bias, alpha=alpha, activation=act),
        lambda a, b, bias: ACTS[act](alpha * torch.matmul(a, b) + (bias if bias is not None else 0)),
        [a, b, bias], c["dtype"], scale=c["k"] * abs(alpha), gen=gen,
    )


# ---------------------------------------------------------------- conv2d


@st.composite
def conv_cases(draw):
    groups = draw(st.sampled_from([1, 2]))
    return dict(
        n=draw(st.integers(0, 2)), cg=draw(st.integers(1, 3)), kg=draw(st.integers(1, 3)),
        groups=groups, h=draw(st.integers(1, 7)), w=draw(st.integers(1, 7)),
        r=draw(st.integers(1, 3)), s=draw(st.integers(1, 3)),
        stride=[draw(st.integers(1, 4)), draw(st.integers(1, 9))],
        padding=[draw(st.integers(0, 3)), draw(st.integers(0, 12))],
        dilation=[draw(st.integers(1, 2)), draw(st.integers(1, 3))],
        bias=draw(st.booleans()), act=draw(st.sampled_from(sorted(ACTS))),
        dtype=draw(st.sampled_from(DTYPES)), channels_last=draw(st.booleans()),
        lx=draw(st.sampled_from(["contiguous", "sliced", "expanded", "unit_stride0"])),
        seed=draw(st.integers(0, 2**31 - 1)), device=draw(st.sampled_from(DEVICES)),
    )


@prop_settings(1200)
@given(conv_cases())
def test_conv2d_matches_aten(c):
    gen = torch.Generator().manual_seed(c["seed"])
    g = c["groups"]
    dev = c["device"]
    x = make([c["n"], c["cg"] * g, c["h"], c["w"]], c["lx"], c["dtype"], gen, dev)
    if c["channels_last"]:
        x = x.contiguous(memory_format=torch.channels_last)
    w = make([c["kg"] * g, c["cg"], c["r"], c["s"]], "contiguous", c["dtype"], gen, dev)
    b = make([c["kg"] * g], "contiguous", c["dtype"], gen, dev) if c["bias"] else None
    kw = dict(stride=c["stride"], padding=c["padding"], dilation=c["dilation"], groups=g)
    act = c["act"]
    ours = lambda x, w, b: F.conv2d_bias_act(x, w, b, activation=act, **kw)  # noqa: E731
    aten = lambda x, w, b: ACTS[act](TF.conv2d(x, w, b, **kw))  # noqa: E731
    try:
        want = TF.conv2d(x.double(), w.double(), None if b is None else b.double(), **kw)
    except RuntimeError:  # torch refuses (output too small): so must we, cleanly
        count_case()
        with pytest.raises(ValueError, match="dnngraph::conv2d_bias_act"):
            ours(x, w, b)
        return
    del want
    check_against_aten(ours, aten, [x, w, b], c["dtype"], scale=c["cg"] * c["r"] * c["s"], gen=gen)


# ---------------------------------------------------------------- sdpa


@st.composite
def sdpa_cases(draw):
    hk = draw(st.integers(1, 3))
    return dict(
        b=draw(st.integers(1, 2)), hk=hk, rep=draw(st.integers(1, 2)), sq=draw(st.integers(1, 6)),
        skv=draw(st.integers(1, 6)), d=draw(st.sampled_from([4, 8])), dv=draw(st.sampled_from([4, 8])),
        causal=draw(st.booleans()), bias=draw(st.booleans()), scale=draw(st.sampled_from([None, 0.3])),
        dtype=draw(st.sampled_from([torch.float32, torch.float64])),
        lq=draw(st.sampled_from(["contiguous", "permuted", "sliced", "expanded", "unit_stride0"])),
        lk=draw(st.sampled_from(["contiguous", "permuted", "expanded", "unit_stride0"])),
        seed=draw(st.integers(0, 2**31 - 1)), device=draw(st.sampled_from(DEVICES)),
    )


@prop_settings(1200)
@given(sdpa_cases())
def test_sdpa_matches_aten(c):
    gen = torch.Generator().manual_seed(c["seed"])
    hq = c["hk"] * c["rep"]
    dt = c["dtype"]
    dev = c["device"]
    q = make([c["b"], hq, c["sq"], c["d"]], c["lq"], dt, gen, dev)
    k = make([c["b"], c["hk"], c["skv"], c["d"]], c["lk"], dt, gen, dev)
    v = make([c["b"], c["hk"], c["skv"], c["dv"]], c["lk"], dt, gen, dev)
    causal = c["causal"] and not c["bias"]
    bias = make([1, hq, c["sq"], c["skv"]], "contiguous", dt, gen, dev) if c["bias"] else None
    gqa, scale = c["rep"] > 1, c["scale"]
    check_against_aten(
        lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, m, is_causal=causal, scale=scale, enable_gqa=gqa),
        lambda q, k, v, m: TF.scaled_dot_product_attention(q, k, v, m, is_causal=causal, scale=scale, enable_gqa=gqa),
        [q, k, v, bias], dt, scale=10, gen=gen,
    )


# ---------------------------------------------------------------- norms


@st.composite
def norm_cases(draw):
    lead = draw(st.lists(st.integers(0, 3), min_size=0, max_size=2))
    normalized = draw(st.lists(st.integers(1, 5), min_size=1, max_size=2))
    return dict(
        lead=lead, normalized=normalized, which=draw(st.sampled_from(["layer_norm", "rms_norm"])),
        affine=draw(st.booleans()), dtype=draw(st.sampled_from(DTYPES)),
        lx=draw(st.sampled_from(LAYOUTS)), seed=draw(st.integers(0, 2**31 - 1)),
        device=draw(st.sampled_from(DEVICES)),
    )


@prop_settings(1200)
@given(norm_cases())
def test_norms_match_aten(c):
    gen = torch.Generator().manual_seed(c["seed"])
    dt, shape = c["dtype"], c["normalized"]
    x = make(c["lead"] + shape, c["lx"], dt, gen, c["device"])
    w = make(shape, "contiguous", dt, gen, c["device"]) if c["affine"] else None
    if c["which"] == "layer_norm":
        ours = lambda x, w: F.layer_norm(x, shape, w, None, 1e-5)  # noqa: E731
        aten = lambda x, w: TF.layer_norm(x, shape, w, None, 1e-5)  # noqa: E731
    else:
        ours = lambda x, w: F.rms_norm(x, shape, w, 1e-5)  # noqa: E731
        aten = lambda x, w: TF.rms_norm(x, shape, w, 1e-5)  # noqa: E731
    # A row whose values are all equal (an expanded or 1-wide row) has a variance of 0: its
    # normalized values are rounding noise amplified by 1/sqrt(eps), compared loosely.
    check_against_aten(ours, aten, [x, w], dt, scale=20, gen=gen)


# ---------------------------------------------------------------- hostile shapes


@st.composite
def hostile_cases(draw):
    op = draw(st.sampled_from(["linear", "matmul_epilogue", "conv", "sdpa"]))
    dims = lambda lo, hi: draw(st.lists(st.integers(0, 4), min_size=lo, max_size=hi))  # noqa: E731
    return dict(
        op=op, shapes=[dims(0, 5) for _ in range(4)], bias=draw(st.booleans()),
        ints=draw(st.lists(st.integers(-1, 3), min_size=7, max_size=7)),
        flag=draw(st.booleans()), device=draw(st.sampled_from(["meta"] + DEVICES)),
    )


@prop_settings(2400)
@given(hostile_cases())
def test_hostile_shapes_give_atens_answer_or_a_clean_error(c):
    count_case()
    s, i, dev = c["shapes"], c["ints"], c["device"]
    t = [torch.empty(shape, device=dev) if dev == "meta" else torch.randn(shape, device=dev) for shape in s]
    bias = t[2] if c["bias"] else None
    calls = {
        "linear": (lambda: F.linear(t[0], t[1], bias, "relu"), lambda: TF.relu(TF.linear(t[0], t[1], bias))),
        "matmul_epilogue": (
            lambda: F.matmul_epilogue(t[0], t[1], bias),
            lambda: torch.matmul(t[0], t[1]) + (bias if bias is not None else 0),
        ),
        "conv": (
            lambda: F.conv2d_bias_act(t[0], t[1], bias, stride=i[0:2], padding=i[2:4], dilation=i[4:6], groups=i[6]),
            lambda: TF.conv2d(t[0], t[1], bias, stride=i[0:2], padding=i[2:4], dilation=i[4:6], groups=i[6]),
        ),
        "sdpa": (
            lambda: F.scaled_dot_product_attention(t[0], t[1], t[3], bias, enable_gqa=c["flag"]),
            lambda: TF.scaled_dot_product_attention(t[0], t[1], t[3], bias, enable_gqa=c["flag"]),
        ),
    }
    ours, aten = calls[c["op"]]
    try:
        got = ours()
    except ERRORS as e:
        msg = str(e)
        assert "dnngraph" in msg and msg.strip(), msg
        assert "std::" not in msg and "matmul0" not in msg, msg
        return
    # We accepted it: the answer must be ATen's (its shape on meta tensors).
    want = aten()
    assert got.shape == want.shape and got.device == want.device
    if dev != "meta":
        tol = 1e-4 if dev == "cpu" else 5e-3
        torch.testing.assert_close(got, want, atol=tol, rtol=tol)
