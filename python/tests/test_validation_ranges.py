"""Validation from Python: extents that would wrap int64 and attributes out of range are
refused by validate() with a ValueError naming the tensor or the attribute, whether the graph
was built here, loaded from a tampered serialized blob or described with huge strides."""

import math

import numpy as np
import pytest

import dnngraph as cudnn

F32 = cudnn.data_type.FLOAT


def graph(name="g"):
    return cudnn.pygraph(handle=cudnn.create_handle(device="cpu"), name=name, io_data_type=F32)


# ---------------------------------------------------------------- extents

def test_strides_near_2_to_62_are_refused():
    g = graph()
    x = g.tensor(name="huge", dim=[3, 4], stride=[2**62, 1], data_type=F32)
    g.relu(input=x).set_output(True)
    with pytest.raises(ValueError, match=r"tensor 'huge'.*overflows int64 bytes"):
        g.validate()


def test_element_count_beyond_int64_is_refused():
    g = graph()
    x = g.tensor(name="wide", dim=[2**32, 2**32], data_type=F32)  # packed strides inferred
    g.relu(input=x).set_output(True)
    with pytest.raises(ValueError, match=r"tensor 'wide'.*element count overflows"):
        g.validate()


def test_inferred_output_beyond_int64_is_refused():
    g = graph()
    a = g.tensor(name="a", dim=[2**40, 1], data_type=F32)
    b = g.tensor(name="b", dim=[1, 2**40], data_type=F32)
    y = g.add(a=a, b=b, name="sum")
    y.set_output(True)
    with pytest.raises(ValueError, match=r"pointwise 'sum'.*element count overflows"):
        g.validate()


def test_tampered_serialized_graph_is_refused():
    g = graph("ser")
    x = g.tensor(name="x", dim=[3, 4], stride=[4, 1], data_type=F32)
    g.relu(input=x).set_output(True)
    g.build([cudnn.heur_mode.A])
    blob = bytes(g.serialize())
    assert b"[4,1]" in blob
    tampered = blob.replace(b"[4,1]", b"[4611686018427387904,1]", 1)
    back = graph("back")
    with pytest.raises(ValueError, match=r"tensor 'x'.*overflows int64 bytes"):
        back.deserialize(tampered)


# ---------------------------------------------------------------- attributes

def layernorm(eps):
    g = graph()
    x = g.tensor(name="x", dim=[2, 8], data_type=F32)
    s = g.tensor(name="gamma", dim=[1, 8], data_type=F32)
    b = g.tensor(name="beta", dim=[1, 8], data_type=F32)
    y, _, _ = g.layernorm(norm_forward_phase=cudnn.norm_forward_phase.TRAINING, input=x,
                          scale=s, bias=b, epsilon=eps, name="ln")
    y.set_output(True)
    return g


@pytest.mark.parametrize("eps", [math.nan, math.inf, -math.inf, -1e-5])
def test_norm_epsilon_out_of_range(eps):
    with pytest.raises(ValueError, match=r"norm_forward 'ln'.*EPSILON.*finite value >= 0"):
        layernorm(eps).validate()


def test_norm_epsilon_zero_is_accepted():
    layernorm(0.0).validate()


@pytest.mark.parametrize("kw", [{"padding": [-1, 0]}, {"stride": [0, 1]},
                                {"dilation": [1, -1]}])
def test_conv_negative_padding_stride_dilation(kw):
    g = graph()
    x = g.tensor(name="x", dim=[1, 4, 8, 8], data_type=F32)
    w = g.tensor(name="w", dim=[4, 4, 3, 3], data_type=F32)
    g.conv_fprop(image=x, weight=w, name="conv", **kw).set_output(True)
    field = next(iter(kw)).replace("padding", "pre_padding")
    with pytest.raises(ValueError, match=rf"conv_fprop 'conv'.*{field}.*below"):
        g.validate()


def sdpa_graph():
    g = graph()
    q, k, v = (g.tensor(name=n, dim=[1, 2, 4, 8], data_type=F32) for n in "qkv")
    return g, q, k, v


@pytest.mark.parametrize("p", [1.0, 1.5, -0.1, math.nan])
def test_sdpa_dropout_probability_outside_0_1(p):
    g, q, k, v = sdpa_graph()
    o, _ = g.sdpa(q=q, k=k, v=v, is_inference=True, dropout=(p, 1, 2), name="attn")
    o.set_output(True)
    with pytest.raises(ValueError, match=r"sdpa 'attn'.*dropout_probability.*outside \[0, 1\)"):
        g.validate()


@pytest.mark.parametrize("scale", [math.nan, math.inf])
def test_sdpa_scale_not_finite(scale):
    g, q, k, v = sdpa_graph()
    o, _ = g.sdpa(q=q, k=k, v=v, is_inference=True, attn_scale=scale, name="attn")
    o.set_output(True)
    with pytest.raises(ValueError, match=r"sdpa 'attn'.*attn_scale.*not finite"):
        g.validate()


def test_valid_graph_still_runs_after_the_checks():
    g = graph()
    x = g.tensor(name="x", dim=[2, 8], data_type=F32)
    s = g.tensor(name="gamma", dim=[1, 8], data_type=F32)
    b = g.tensor(name="beta", dim=[1, 8], data_type=F32)
    y, _, _ = g.layernorm(norm_forward_phase=cudnn.norm_forward_phase.TRAINING, input=x,
                          scale=s, bias=b, epsilon=1e-5, name="ln")
    y.set_output(True)
    g.build([cudnn.heur_mode.A])
    rng = np.random.default_rng(5)
    xv = rng.standard_normal((2, 8)).astype(np.float32)
    sv = rng.uniform(0.5, 2, (1, 8)).astype(np.float32)
    bv = rng.uniform(-1, 1, (1, 8)).astype(np.float32)
    yv = np.full((2, 8), np.nan, dtype=np.float32)
    ws = np.empty(max(g.get_workspace_size(), 1), dtype=np.uint8)
    g.execute({x: xv, s: sv, b: bv, y: yv}, ws)
    x64 = xv.astype(np.float64)
    mu = x64.mean(axis=1, keepdims=True)
    ref = (x64 - mu) / np.sqrt(x64.var(axis=1, keepdims=True) + 1e-5) * sv + bv
    np.testing.assert_allclose(yv, ref, rtol=1e-5, atol=1e-5)


def test_output_strides_that_make_elements_share_addresses_are_refused():
    # [2, 2] written with strides [1, 1]: elements (0, 1) and (1, 0) would share an address, so
    # the op's result could not be right; validate() says so and shows packed strides.
    g = graph("overlap")
    a = g.tensor(name="A", dim=[2, 3], data_type=F32)
    b = g.tensor(name="B", dim=[3, 2], data_type=F32)
    y = g.matmul(A=a, B=b)
    y.set_output(True).set_name("Y").set_stride([1, 1])
    with pytest.raises(ValueError, match=r"tensor 'Y'.*share addresses.*packed strides \[2,1\]"):
        g.validate()
