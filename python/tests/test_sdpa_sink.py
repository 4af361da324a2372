"""sdpa sink_token (attention sinks) and sdpa_backward dSink_token against numpy on the CPU
reference engine (fp32, 1e-5): the sink is one more logit per query head in every row's
softmax, with no value row. dSink is also checked by finite differences of the numpy forward,
which fixes its sign and scale. Bad sinks are clear errors."""

import math

import numpy as np
import pytest

import dnngraph as cudnn
from conftest import assert_close, build, poisoned, tensor_of, workspace_for
from sdpa_ref import attention, fp32_graph as new_graph, qkv_do, set_outputs as outputs


def reference(q, k, v, sink, scale, causal=False, do=None):
    """fp64 attention with a sink logit per head: O, lse and (with do) dQ, dK, dV, dSink."""
    return attention(q, k, v, scale, causal=causal, sink=sink, do=do)


def forward(handle, q, k, v, sink, scale, **kw):
    g = new_graph(handle)
    Q, K, V, S = (tensor_of(g, a, n) for a, n in zip((q, k, v, sink), ("Q", "K", "V", "sink")))
    pack = {Q: q, K: k, V: v, S: sink}
    O, ST = g.sdpa(q=Q, k=K, v=V, generate_stats=True, attn_scale=scale, sink_token=S, **kw)
    b, hq, sq, _ = q.shape
    o, lse = outputs(pack, (O, ST), ((b, hq, sq, v.shape[3]), (b, hq, sq, 1)))
    build(g)
    g.execute(pack, workspace_for(g))
    return o, lse


def backward(handle, q, k, v, o, do, lse, sink, scale, **kw):
    g = new_graph(handle)
    arrays = (q, k, v, o, do, lse, sink)
    names = "Q K V O dO st sink".split()
    Q, K, V, O, DO, ST, S = (tensor_of(g, a, n) for a, n in zip(arrays, names))
    pack = dict(zip((Q, K, V, O, DO, ST, S), arrays))
    DS = g.tensor(name="dsink", dim=list(sink.shape), stride=[sink.shape[1], 1, 1, 1],
                  data_type=cudnn.data_type.FLOAT)
    grads = g.sdpa_backward(q=Q, k=K, v=V, o=O, dO=DO, stats=ST, attn_scale=scale,
                            sink_token=S, dSink_token=DS, **kw)
    assert len(grads) == 3
    got = outputs(pack, (*grads, DS), (q.shape, k.shape, v.shape, sink.shape))
    build(g)
    g.execute(pack, workspace_for(g))
    return got


@pytest.mark.parametrize("hq,hk,sq,skv,causal", [(4, 4, 7, 7, False), (6, 2, 5, 9, True),
                                                 (3, 1, 1, 6, False)])
def test_forward_backward_against_numpy(handle, rng, hq, hk, sq, skv, causal):
    b, d = 2, 8
    scale = 1.0 / math.sqrt(d)
    q, k, v, do = qkv_do(rng, b, hq, hk, sq, skv, d)
    # Sinks around the scores' size, one large enough to dominate its rows.
    sink = (rng.standard_normal((1, hq, 1, 1)) * 1.5).astype(np.float32)
    sink[0, 0, 0, 0] = 4.0
    ref = reference(q, k, v, sink, scale, causal, do=do)
    o, lse = forward(handle, q, k, v, sink, scale, use_causal_mask=causal)
    assert_close(o, ref[0], rtol=1e-5)
    assert_close(lse, ref[1], rtol=1e-5)
    # The sink takes weight: O differs from attention without it.
    assert not np.allclose(o, reference(q, k, v, np.full_like(sink, -np.inf), scale, causal)[0],
                           rtol=1e-3)
    got = backward(handle, q, k, v, o, do, lse, sink, scale, use_causal_mask=causal)
    for a, r in zip(got, ref[2:]):
        assert_close(a, r, rtol=1e-5)


def test_dsink_matches_finite_differences(handle, rng):
    b, hq, sq, skv, d = 2, 3, 4, 5, 4
    scale = 0.5
    q, k, v = (rng.standard_normal((b, hq, n, d)) for n in (sq, skv, skv))
    do = rng.standard_normal((b, hq, sq, d))
    sink = rng.standard_normal((1, hq, 1, 1))
    loss = lambda s: (reference(q, k, v, s, scale)[0] * do).sum()  # noqa: E731
    eps = 1e-6
    fd = np.zeros_like(sink)
    for h in range(hq):
        e = np.zeros_like(sink)
        e[0, h, 0, 0] = eps
        fd[0, h, 0, 0] = (loss(sink + e) - loss(sink - e)) / (2 * eps)
    assert_close(reference(q, k, v, sink, scale, do=do)[5], fd, rtol=1e-6)
    # And the engine's dSink, from fp32 inputs, matches it.
    f32 = [a.astype(np.float32) for a in (q, k, v, do, sink)]
    o, lse = forward(handle, f32[0], f32[1], f32[2], f32[4], scale)
    dsink = backward(handle, f32[0], f32[1], f32[2], o, f32[3], lse, f32[4], scale)[3]
    assert_close(dsink, fd, rtol=1e-4)


def test_sink_with_padding_rows(handle, rng):
    # Padding queries attend nothing: O = 0 there, and they add nothing to dSink.
    b, h, s, d = 2, 2, 5, 4
    q, k, v = (rng.standard_normal((b, h, s, d)).astype(np.float32) for _ in range(3))
    sink = rng.standard_normal((1, h, 1, 1)).astype(np.float32)
    lens = np.array([3, 5], np.int32).reshape(b, 1, 1, 1)
    g = new_graph(handle)
    Q, K, V, S = (tensor_of(g, a, n) for a, n in zip((q, k, v, sink), "Q K V sink".split()))
    LQ, LK = tensor_of(g, lens, "lq"), tensor_of(g, lens.copy(), "lk")
    pack = {Q: q, K: k, V: v, S: sink, LQ: lens, LK: lens.copy()}
    O, ST = g.sdpa(q=Q, k=K, v=V, generate_stats=True, attn_scale=0.5, sink_token=S,
                   use_padding_mask=True, seq_len_q=LQ, seq_len_kv=LK)
    o, lse = outputs(pack, (O, ST), ((b, h, s, d), (b, h, s, 1)))
    build(g)
    g.execute(pack, workspace_for(g))
    for bi, n in enumerate((3, 5)):
        ref_o, ref_lse = reference(q[bi:bi + 1, :, :n], k[bi:bi + 1, :, :n], v[bi:bi + 1, :, :n],
                                   sink, 0.5)
        assert_close(o[bi:bi + 1, :, :n], ref_o, rtol=1e-5)
        assert_close(lse[bi:bi + 1, :, :n], ref_lse, rtol=1e-5)
    assert np.all(o[0, :, 3:] == 0)


def test_bad_sinks_are_clear_errors(handle, rng):
    q = rng.standard_normal((1, 2, 4, 8)).astype(np.float32)
    cases = [(np.zeros((1, 3, 1, 1), np.float32), ValueError, r"SINK_TOKEN.*\[1, h_q, 1, 1\]"),
             (np.zeros((2, 1, 1), np.float32), ValueError, r"SINK_TOKEN"),
             (np.zeros((1, 2, 1, 1), np.float16), ValueError, r"SINK_TOKEN.*must be FLOAT")]
    for sink, exc, words in cases:
        g = new_graph(handle)
        Q, K, V = (tensor_of(g, q, n) for n in "QKV")
        O, _ = g.sdpa(q=Q, k=K, v=V, sink_token=tensor_of(g, sink, "sink"))
        O.set_output(True)
        with pytest.raises(exc, match=words):
            g.validate()
    # dSink_token without sink_token: the gradient of nothing.
    g = new_graph(handle)
    Q, K, V, O, DO = (tensor_of(g, q, n) for n in ("Q", "K", "V", "O", "dO"))
    ST = tensor_of(g, q[..., :1], "st")
    DS = tensor_of(g, np.zeros((1, 2, 1, 1), np.float32), "ds")
    g.sdpa_backward(q=Q, k=K, v=V, o=O, dO=DO, stats=ST, dSink_token=DS)
    with pytest.raises(ValueError, match=r"DSINK_TOKEN.*needs input SINK_TOKEN"):
        g.validate()


def test_sink_ports_in_json_and_serialize_round_trip(handle, rng):
    b, h, s, d = 1, 2, 4, 8
    q, k, v, do = (rng.standard_normal((b, h, s, d)).astype(np.float32) for _ in range(4))
    sink = rng.standard_normal((1, h, 1, 1)).astype(np.float32)
    o, lse = forward(handle, q, k, v, sink, 0.3)
    g = new_graph(handle)
    arrays = (q, k, v, o, do, lse, sink)
    ts = [tensor_of(g, a, n) for a, n in zip(arrays, "Q K V O dO st sink".split())]
    DS = tensor_of(g, np.zeros_like(sink), "dsink")
    grads = g.sdpa_backward(q=ts[0], k=ts[1], v=ts[2], o=ts[3], dO=ts[4], stats=ts[5],
                            attn_scale=0.3, sink_token=ts[6], dSink_token=DS)
    for t in (*grads, DS):
        t.set_output(True)
    g.validate()
    desc = g.to_json()
    assert "SINK_TOKEN" in desc and "DSINK_TOKEN" in desc
    build(g)
    blob = g.serialize()
    g2 = cudnn.pygraph(handle=handle)
    g2.deserialize(handle, blob)
    assert g2.key() == g.key()
    # Keyed by uid: the round trip keeps the sink ports and their gradient.
    pack = {t.get_uid(): a for t, a in zip(ts, arrays)}
    got = poisoned(sink.shape)
    pack[DS.get_uid()] = got
    for t, a in zip(grads, (q, k, v)):
        pack[t.get_uid()] = poisoned(a.shape)
    g2.execute(pack, workspace_for(g2), handle=handle)
    ref = reference(q, k, v, sink, 0.3, do=do)[5]
    assert_close(got, ref, rtol=1e-5)
    # Without the sink, the key differs (the port is part of the graph's fingerprint).
    g3 = new_graph(handle)
    t3 = [tensor_of(g3, a, n) for a, n in zip(arrays[:6], "Q K V O dO st".split())]
    for t in g3.sdpa_backward(q=t3[0], k=t3[1], v=t3[2], o=t3[3], dO=t3[4], stats=t3[5],
                              attn_scale=0.3):
        t.set_output(True)
    g3.validate()
    assert g3.key() != g.key()
