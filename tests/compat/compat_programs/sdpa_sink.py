"""SDPA forward and backward with attention sinks: sink_token [1, h, 1, 1] fp32 (one extra
softmax logit per head, no value row) and the backward's dSink_token."""

import math

import numpy as np

from compat_harness import Result


def attention_with_sink(q, k, v, sink, scale):
    """O, stats and P of softmax over [scale*QK^T, sink[h]] (the sink column dropped)."""
    s = np.einsum("bhqd,bhkd->bhqk", q, k) * scale
    m = np.maximum(s.max(-1, keepdims=True), sink)
    lse = m + np.log(np.exp(s - m).sum(-1, keepdims=True) + np.exp(sink - m))
    p = np.exp(s - lse)
    return np.einsum("bhqk,bhkd->bhqd", p, v), lse, p


def run(h):
    cudnn = h.cudnn
    b, nh, s, d = 2, 4, 64, 64
    qf, kf, vf, dof = (h.rng.standard_normal((b, nh, s, d)) for _ in range(4))
    q, k, v, do = (h.array(t, "float16") for t in (qf, kf, vf, dof))
    qf, kf, vf, dof = (h.numpy(t) for t in (q, k, v, do))  # the half-rounded values
    sinkf = h.rng.standard_normal((1, nh, 1, 1)) + 1.0  # large enough to take real weight
    sink = h.array(sinkf, "float32")
    scale = 1.0 / math.sqrt(d)
    of_ref, lse, p = attention_with_sink(qf, kf, vf, sinkf, scale)

    def graph():
        return cudnn.pygraph(handle=h.handle, io_data_type=cudnn.data_type.HALF,
                             intermediate_data_type=cudnn.data_type.FLOAT,
                             compute_data_type=cudnn.data_type.FLOAT)

    fwd = graph()
    Q, K, V = fwd.tensor_like(q), fwd.tensor_like(k), fwd.tensor_like(v)
    SINK = fwd.tensor_like(sink)
    O, Stats = fwd.sdpa(name="sdpa", q=Q, k=K, v=V, generate_stats=True, attn_scale=scale,
                        sink_token=SINK)
    O.set_output(True).set_dim([b, nh, s, d]).set_stride([nh * s * d, s * d, d, 1])
    Stats.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    fwd.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    o = h.empty((b, nh, s, d), "float16")
    st = h.empty((b, nh, s, 1), "float32")
    fpack = {Q: q, K: k, V: v, SINK: sink, O: o, Stats: st}
    fws = h.workspace(fwd)
    fwd.execute(fpack, fws)

    # The backward from the reference O and stats, so that its check is independent.
    o_in = h.array(of_ref, "float16")
    of = h.numpy(o_in)
    stats = h.array(lse, "float32")
    bwd = graph()
    Qb, Kb, Vb, Ob, dOb, STb, SINKb = (bwd.tensor_like(t)
                                       for t in (q, k, v, o_in, do, stats, sink))
    dSINK = bwd.tensor(name="dsink", dim=[1, nh, 1, 1], stride=[nh, 1, 1, 1],
                       data_type=cudnn.data_type.FLOAT)
    dQ, dK, dV = bwd.sdpa_backward(name="sdpa_bwd", q=Qb, k=Kb, v=Vb, o=Ob, dO=dOb, stats=STb,
                                   attn_scale=scale, sink_token=SINKb, dSink_token=dSINK)
    for t in (dQ, dK, dV):
        t.set_output(True).set_dim([b, nh, s, d]).set_stride([nh * s * d, s * d, d, 1])
    dSINK.set_output(True)
    bwd.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    dq, dk, dv = (h.empty((b, nh, s, d), "float16") for _ in range(3))
    dsink = h.empty((1, nh, 1, 1), "float32")
    bpack = {Qb: q, Kb: k, Vb: v, Ob: o_in, dOb: do, STb: stats, SINKb: sink, dQ: dq, dK: dk,
             dV: dv, dSINK: dsink}
    bws = h.workspace(bwd)
    bwd.execute(bpack, bws)

    d_row = (dof * of).sum(-1, keepdims=True)
    dv_ref = np.einsum("bhqk,bhqd->bhkd", p, dof)
    dp = np.einsum("bhqd,bhkd->bhqk", dof, vf)
    ds = p * (dp - d_row)
    dq_ref = scale * np.einsum("bhqk,bhkd->bhqd", ds, kf)
    dk_ref = scale * np.einsum("bhqk,bhqd->bhkd", ds, qf)
    # O = sum_j P_j V_j shrinks by the sink's probability exp(sink - lse) as the sink grows.
    dsink_ref = -(np.exp(sinkf - lse) * d_row).sum(axis=(0, 2), keepdims=True)

    def both():
        fwd.execute(fpack, fws)
        bwd.execute(bpack, bws)

    return Result({"O": o, "Stats": st, "dQ": dq, "dK": dk, "dV": dv, "dSink": dsink},
                  {"O": of_ref, "Stats": lse, "dQ": dq_ref, "dK": dk_ref, "dV": dv_ref,
                   "dSink": dsink_ref},
                  2e-2, both)
