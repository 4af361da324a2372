"""The tutorial's graphs at reduced sizes on the CPU reference engine, checked against numpy."""

import math

import numpy as np

import dnngraph as cudnn
from conftest import (assert_close, build, channels_last, conv2d_nchw, elem_strides, gelu,
                      poisoned, tensor_of, workspace_for)


def test_conv_bias_relu_nhwc(handle, rng):
    n, c, h, w, k, r, s = 2, 8, 6, 7, 16, 3, 3
    x = channels_last(rng.standard_normal((n, c, h, w)).astype(np.float32))
    wt = channels_last(rng.standard_normal((k, c, r, s)).astype(np.float32))
    b = rng.standard_normal((1, k, 1, 1)).astype(np.float32)
    y = channels_last(poisoned((n, k, h, w)))
    assert elem_strides(x) == [h * w * c, 1, w * c, c]  # really NHWC

    g = cudnn.pygraph(handle=handle, name="conv_bias_relu", io_data_type=cudnn.data_type.FLOAT,
                      intermediate_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT)
    X = tensor_of(g, x, "X")
    W = tensor_of(g, wt, "W")
    B = tensor_of(g, b, "bias")
    conv = g.conv_fprop(image=X, weight=W, padding=[1, 1], stride=[1, 1], dilation=[1, 1],
                        compute_data_type=cudnn.data_type.FLOAT)
    Y = g.relu(input=g.bias(input=conv, bias=B))
    Y.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    Y.set_dim(list(y.shape)).set_stride(elem_strides(y))
    build(g)
    g.execute({X: x, W: wt, B: b, Y: y}, workspace_for(g))

    ref = np.maximum(conv2d_nchw(x, wt, (1, 1), (1, 1), (1, 1)) + b, 0.0)
    assert_close(y, ref, rtol=1e-5)


def test_conv_half_io(handle, rng):
    x = channels_last(rng.standard_normal((1, 4, 5, 5)).astype(np.float16))
    wt = channels_last(rng.standard_normal((8, 4, 3, 3)).astype(np.float16))
    y = channels_last(poisoned((1, 8, 3, 3), np.float16))
    g = cudnn.pygraph(handle=handle, io_data_type=cudnn.data_type.HALF)
    X, W = tensor_of(g, x, "X"), tensor_of(g, wt, "W")
    Y = g.conv_fprop(image=X, weight=W, padding=[0, 0], stride=[1, 1], dilation=[1, 1])
    Y.set_output(True).set_dim(list(y.shape)).set_stride(elem_strides(y))
    build(g)
    g.execute({X: x, W: wt, Y: y}, workspace_for(g))
    assert_close(y, conv2d_nchw(x, wt, (0, 0), (1, 1), (1, 1)), rtol=1e-2)


def test_matmul_alpha_bias_gelu_amax(handle, rng):
    bsz, m, kd, nd = 2, 5, 8, 6
    a = rng.standard_normal((bsz, m, kd)).astype(np.float32)
    bm = rng.standard_normal((bsz, kd, nd)).astype(np.float32)
    bias = rng.standard_normal((1, 1, nd)).astype(np.float32)
    out = poisoned((bsz, m, nd))
    amax = poisoned((1, 1, 1))
    alpha = np.full((1, 1, 1), 0.125, dtype=np.float32)

    g = cudnn.pygraph(handle=handle, name="matmul_epilogue", io_data_type=cudnn.data_type.FLOAT,
                      intermediate_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT)
    A, B, BIAS = tensor_of(g, a, "A"), tensor_of(g, bm, "B"), tensor_of(g, bias, "bias")
    ALPHA = g.tensor(name="alpha", dim=[1, 1, 1], stride=[1, 1, 1],
                     data_type=cudnn.data_type.FLOAT, is_pass_by_value=True)
    acc = g.matmul(A=A, B=B, compute_data_type=cudnn.data_type.FLOAT)
    act = g.gelu(input=g.bias(input=g.mul(a=acc, b=ALPHA), bias=BIAS))
    act.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    AMAX = g.reduction(input=act, mode=cudnn.reduction_mode.AMAX,
                       compute_data_type=cudnn.data_type.FLOAT)
    AMAX.set_output(True).set_data_type(cudnn.data_type.FLOAT).set_dim([1, 1, 1]).set_stride(
        [1, 1, 1])
    build(g)
    g.execute({A: a, B: bm, BIAS: bias, ALPHA: alpha, act: out, AMAX: amax}, workspace_for(g))

    ref = gelu(np.matmul(a.astype(np.float64), bm) * 0.125 + bias)
    assert_close(out, ref, rtol=1e-5)
    assert_close(amax, np.abs(ref).max().reshape(1, 1, 1), rtol=1e-5)

    # The same graph with alpha given as a Python float: a different value, a different result.
    out2 = poisoned((bsz, m, nd))
    g.execute({A: a, B: bm, BIAS: bias, ALPHA: 0.5, act: out2, AMAX: amax}, workspace_for(g))
    assert_close(out2, gelu(np.matmul(a.astype(np.float64), bm) * 0.5 + bias), rtol=1e-5)


def _attention(q, k, v, scale, causal):
    q, k, v = (np.asarray(t, dtype=np.float64) for t in (q, k, v))
    s = np.einsum("bhqd,bhkd->bhqk", q, k) * scale
    if causal:
        sq, sk = s.shape[-2:]
        s = np.where(np.arange(sk)[None, :] > np.arange(sq)[:, None], -np.inf, s)
    m = s.max(-1, keepdims=True)
    p = np.exp(s - m)
    lse = m + np.log(p.sum(-1, keepdims=True))
    return np.einsum("bhqk,bhkd->bhqd", p / p.sum(-1, keepdims=True), v), lse


def test_causal_sdpa(handle, rng):
    b, h, s, d = 2, 3, 7, 8
    scale = 1.0 / math.sqrt(d)
    q, k, v = (rng.standard_normal((b, h, s, d)).astype(np.float32) for _ in range(3))
    o = poisoned((b, h, s, d))
    g = cudnn.pygraph(handle=handle, name="sdpa", io_data_type=cudnn.data_type.FLOAT,
                      intermediate_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT)
    Q, K, V = tensor_of(g, q, "Q"), tensor_of(g, k, "K"), tensor_of(g, v, "V")
    O, stats = g.sdpa(name="sdpa", q=Q, k=K, v=V, is_inference=True, attn_scale=scale,
                      use_causal_mask=True)
    assert stats is None
    O.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    O.set_dim(list(o.shape)).set_stride(elem_strides(o))
    build(g)
    g.execute({Q: q, K: k, V: v, O: o}, workspace_for(g))
    assert_close(o, _attention(q, k, v, scale, True)[0], rtol=1e-5)


def test_sdpa_alignment_bounds_stats_and_scale_tensor(handle, rng):
    # Causal through diagonal_alignment + right_bound, a pass-by-value scale, training stats.
    b, h, s, d = 1, 2, 5, 4
    q, k, v = (rng.standard_normal((b, h, s, d)).astype(np.float32) for _ in range(3))
    o, lse = poisoned((b, h, s, d)), poisoned((b, h, s, 1))
    g = cudnn.pygraph(handle=handle, io_data_type=cudnn.data_type.FLOAT)
    Q, K, V = tensor_of(g, q, "Q"), tensor_of(g, k, "K"), tensor_of(g, v, "V")
    SCALE = g.tensor(name="scale", dim=[1, 1, 1, 1], data_type=cudnn.data_type.FLOAT,
                     is_pass_by_value=True)
    O, STATS = g.sdpa(q=Q, k=K, v=V, is_inference=False, attn_scale=SCALE,
                      diagonal_alignment=cudnn.diagonal_alignment.TOP_LEFT, right_bound=0)
    O.set_output(True)
    STATS.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    build(g)
    g.execute({Q: q, K: k, V: v, SCALE: 0.3, O: o, STATS: lse}, workspace_for(g))
    ref_o, ref_lse = _attention(q, k, v, 0.3, True)
    assert_close(o, ref_o, rtol=1e-5)
    assert_close(lse, ref_lse, rtol=1e-5)
