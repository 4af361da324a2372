"""sdpa_fp8 / sdpa_fp8_backward through the frontend's call forms (`import dnngraph as cudnn`)
on the CPU reference engine, against numpy with the same FP8 rounding (ml_dtypes) of the
probabilities and of dS; refusals (bias, dropout, non-FP8 inputs, sdpa_mxfp8)."""

import math

import numpy as np
import pytest

import dnngraph as cudnn
from conftest import assert_close, build, workspace_for

ml_dtypes = pytest.importorskip("ml_dtypes")
E4M3 = ml_dtypes.float8_e4m3fn
E5M2 = ml_dtypes.float8_e5m2


def fp8(x, dtype=E4M3):
    return np.asarray(x, dtype=np.float64).astype(dtype).astype(np.float64)


def factor(v):
    return np.full((1, 1, 1, 1), v, dtype=np.float32)


def new_graph(handle):
    return cudnn.pygraph(handle=handle, io_data_type=cudnn.data_type.FP8_E4M3,
                         intermediate_data_type=cudnn.data_type.FLOAT,
                         compute_data_type=cudnn.data_type.FLOAT)


FWD = dict(descale_q=0.5, descale_k=1.5, descale_v=0.75, descale_s=1 / 64, scale_s=64.0,
           scale_o=2.0)
BWD = dict(descale_q=0.5, descale_k=1.5, descale_v=0.75, descale_o=0.5, descale_dO=0.25,
           descale_s=1 / 64, descale_dP=1 / 32, scale_s=64.0, scale_dQ=4.0, scale_dK=0.5,
           scale_dV=3.0, scale_dP=32.0)


def reference(q, k, v, scale, causal, f=FWD, do=None, o=None, stats=None, bf=BWD):
    """fp64 FP8 attention: S, softmax, P8 = fp8(exp(S - max) * scale_s), O = P8 V / rowsum
    before its output rounding;
    with do (E5M2): the gradients from the forward's O and stats (as stored), before their
    scales."""
    s = scale * f["descale_q"] * f["descale_k"] * (q @ k.transpose(0, 1, 3, 2))
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, -np.inf)
    m = s.max(-1, keepdims=True)
    lse = m + np.log(np.exp(s - m).sum(-1, keepdims=True)) if stats is None else stats
    p = np.exp(s - lse)
    # Flash order, as cuDNN on an H200: round exp(S - max) * scale_s, divide by the row sum after.
    e = np.exp(s - m)
    x = fp8(e * f["scale_s"]) @ v / e.sum(-1, keepdims=True) * f["descale_s"] * f["descale_v"]
    if do is None:
        return x * f["scale_o"], lse, p.max(), np.abs(x).max()
    d = (do * o).sum(-1, keepdims=True) * bf["descale_dO"] * bf["descale_o"]
    p8 = fp8(p * bf["scale_s"])
    dv = p8.transpose(0, 1, 3, 2) @ do * bf["descale_s"] * bf["descale_dO"]
    dp = do @ v.transpose(0, 1, 3, 2) * bf["descale_dO"] * bf["descale_v"]
    ds = (dp - d) * p * scale
    ds8 = fp8(ds * bf["scale_dP"], E5M2)  # in dO's type
    dq = ds8 @ k * bf["descale_dP"] * bf["descale_k"]
    dk = ds8.transpose(0, 1, 3, 2) @ q * bf["descale_dP"] * bf["descale_q"]
    return dq, dk, dv, np.abs(ds).max()


@pytest.fixture
def qkv(rng):
    b, h, s, d = 1, 2, 8, 16
    return tuple(rng.uniform(-2, 2, (b, h, s, d)).astype(E4M3) for _ in range(3))


def run_forward(handle, q, k, v, scale, causal=True, o_type=cudnn.data_type.FLOAT):
    g = new_graph(handle)
    Q, K, V = g.tensor_like(q), g.tensor_like(k), g.tensor_like(v)
    fac = {n: g.tensor_like(factor(x)) for n, x in FWD.items()}
    O, Stats, Amax_S, Amax_O = g.sdpa_fp8(Q, K, V, fac["descale_q"], fac["descale_k"],
                                          fac["descale_v"], fac["descale_s"], fac["scale_s"],
                                          fac["scale_o"], generate_stats=True, attn_scale=scale,
                                          use_causal_mask=causal, name="fp8_attn")
    shape = q.shape
    O.set_output(True).set_data_type(o_type).set_dim(list(shape)).set_stride(
        [shape[1] * shape[2] * shape[3], shape[2] * shape[3], shape[3], 1])
    for t in (Stats, Amax_S, Amax_O):
        t.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    build(g)
    np_o = np.float32 if o_type == cudnn.data_type.FLOAT else E4M3
    o = np.full(shape, np.nan, dtype=np_o)
    st = np.full(shape[:3] + (1,), np.nan, np.float32)
    amax_s, amax_o = np.full((1, 1, 1, 1), np.nan, np.float32), np.full((1, 1, 1, 1), np.nan,
                                                                        np.float32)
    pack = {Q: q, K: k, V: v, O: o, Stats: st, Amax_S: amax_s, Amax_O: amax_o}
    pack.update({fac[n]: factor(x) for n, x in FWD.items()})
    g.execute(pack, workspace_for(g))
    return o, st, amax_s, amax_o


def test_forward_matches_numpy(handle, qkv):
    q, k, v = qkv
    scale = 1 / math.sqrt(q.shape[-1])
    o, st, amax_s, amax_o = run_forward(handle, q, k, v, scale)
    want_o, lse, want_s, want_o_amax = reference(*(a.astype(np.float64) for a in qkv), scale, True)
    assert_close(o, want_o, 1e-5)
    assert_close(st, lse, 1e-5)
    assert_close(amax_s, [[[[want_s]]]], 1e-5)
    assert_close(amax_o, [[[[want_o_amax]]]], 1e-5)


def test_forward_fp8_output(handle, qkv):
    q, k, v = qkv
    o, *_ = run_forward(handle, q, k, v, 0.3, causal=False, o_type=cudnn.data_type.FP8_E4M3)
    want, *_ = reference(*(a.astype(np.float64) for a in qkv), 0.3, False)
    np.testing.assert_array_equal(o.astype(np.float64), fp8(want))


def test_backward_matches_numpy(handle, qkv, rng):
    q, k, v = qkv
    scale = 0.25
    o, st, _, _ = run_forward(handle, q, k, v, scale, o_type=cudnn.data_type.FP8_E4M3)
    do = rng.uniform(-2, 2, q.shape).astype(E5M2)
    g = new_graph(handle)
    Q, K, V, O, dO = (g.tensor_like(a) for a in (q, k, v, o, do))
    ST = g.tensor_like(st)
    fac = {n: g.tensor_like(factor(x)) for n, x in BWD.items()}
    order = ("descale_q", "descale_k", "descale_v", "descale_o", "descale_dO", "descale_s",
             "descale_dP", "scale_s", "scale_dQ", "scale_dK", "scale_dV", "scale_dP")
    out = g.sdpa_fp8_backward(Q, K, V, O, dO, ST, *(fac[n] for n in order), attn_scale=scale,
                              use_causal_mask=True)
    assert len(out) == 7
    dQ, dK, dV, *amax = out
    for t in (dQ, dK, dV):
        t.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    for t in amax:
        t.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    build(g)
    got = [np.full(q.shape, np.nan, np.float32) for _ in range(3)]
    got_amax = [np.full((1, 1, 1, 1), np.nan, np.float32) for _ in range(4)]
    pack = {Q: q, K: k, V: v, O: o, dO: do, ST: st}
    pack.update({fac[n]: factor(x) for n, x in BWD.items()})
    pack.update(dict(zip((dQ, dK, dV), got)))
    pack.update(dict(zip(amax, got_amax)))
    g.execute(pack, workspace_for(g))
    f64 = lambda a: a.astype(np.float64)  # noqa: E731
    dq, dk, dv, amax_dp = reference(f64(q), f64(k), f64(v), scale, True, do=f64(do), o=f64(o),
                                     stats=f64(st))
    for got_t, want, s in zip(got, (dq, dk, dv), ("scale_dQ", "scale_dK", "scale_dV")):
        assert_close(got_t, want * BWD[s], 1e-5)
    for got_a, want in zip(got_amax, (dq, dk, dv)):
        assert_close(got_a, [[[[np.abs(want).max()]]]], 1e-5)
    assert_close(got_amax[3], [[[[amax_dp]]]], 1e-5)


def test_refusals(handle, qkv):
    q, k, v = qkv
    g = new_graph(handle)
    Q, K, V = g.tensor_like(q), g.tensor_like(k), g.tensor_like(v)
    f = [g.tensor_like(factor(1.0)) for _ in range(6)]
    B = g.tensor(dim=[1, 2, 8, 8], stride=[128, 64, 8, 1], data_type=cudnn.data_type.FLOAT)
    # Refused where the frontend refuses: at validate() (the node is built first).
    O, *_ = g.sdpa_fp8(Q, K, V, *f, bias=B)
    O.set_output(True)
    with pytest.raises(cudnn.cudnnGraphNotSupportedError, match="sdpa_fp8\\(bias"):
        g.validate()
    g = new_graph(handle)
    Q, K, V = g.tensor_like(q), g.tensor_like(k), g.tensor_like(v)
    ST = g.tensor(dim=[1, 2, 8, 1], stride=[16, 8, 1, 1], data_type=cudnn.data_type.FLOAT)
    f = [g.tensor_like(factor(1.0)) for _ in range(12)]
    g.sdpa_fp8_backward(Q, K, V, Q, Q, ST, *f, dropout=(0.1, 1, 2))
    with pytest.raises(cudnn.cudnnGraphNotSupportedError, match="sdpa_fp8_backward\\(dropout"):
        g.validate()
    # The native class refuses at the call.
    with pytest.raises(cudnn.NotSupportedError, match="sdpa_fp8\\(bias"):
        cudnn.NativeGraph.sdpa_fp8(g, Q, K, V, *f[:6], is_inference=True, bias=B)
    with pytest.raises(cudnn.cudnnGraphNotSupportedError, match="Blackwell"):
        g.sdpa_mxfp8(Q, K, V, *f[:3])
    # Half inputs: a clear error at validation naming the tensor and the types it takes.
    g2 = cudnn.pygraph(handle=handle, io_data_type=cudnn.data_type.HALF)
    h = np.zeros((1, 2, 8, 16), np.float16) + 0.5
    Qh, Kh, Vh = g2.tensor_like(h), g2.tensor_like(h), g2.tensor_like(h)
    f2 = [g2.tensor_like(factor(1.0)) for _ in range(6)]
    O, *_ = g2.sdpa_fp8(Qh, Kh, Vh, *f2, generate_stats=False)
    O.set_output(True)
    with pytest.raises(ValueError, match="FP8_E4M3 or FP8_E5M2"):
        g2.validate()
