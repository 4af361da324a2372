"""SDPA forward and backward with attention sinks: sink_token [1, h, 1, 1] fp32 (one extra
softmax logit per head, no value row) and the backward's dSink_token."""

import math

import numpy as np

from compat_harness import Result
from compat_programs import _graph, _sdpa


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
    (q, k, v, do), (qf, kf, vf, dof) = _sdpa.halves(h, (b, nh, s, d))
    sinkf = h.rng.standard_normal((1, nh, 1, 1)) + 1.0  # large enough to take real weight
    sink = h.array(sinkf, "float32")
    scale = 1.0 / math.sqrt(d)
    of_ref, lse, p = attention_with_sink(qf, kf, vf, sinkf, scale)
    o, st, fwd = _sdpa.forward(h, q, k, v, scale, _sdpa.like(sink_token=sink))

    o_in, of, stats = _sdpa.saved(h, of_ref, lse)
    dsink = h.empty((1, nh, 1, 1), "float32")

    def extra(g):
        SINK = g.tensor_like(sink)
        dSINK = g.tensor(name="dsink", dim=[1, nh, 1, 1], stride=[nh, 1, 1, 1],
                         data_type=cudnn.data_type.FLOAT)
        dSINK.set_output(True)
        return {"sink_token": SINK, "dSink_token": dSINK}, {SINK: sink, dSINK: dsink}

    (dq, dk, dv), bwd = _sdpa.backward(h, (q, k, v, o_in, do, stats), scale, extra)
    dq_ref, dk_ref, dv_ref, _ = _sdpa.gradients(p, qf, kf, vf, of, dof, scale)
    # O = sum_j P_j V_j shrinks by the sink's probability exp(sink - lse) as the sink grows.
    d_row = (dof * of).sum(-1, keepdims=True)
    dsink_ref = -(np.exp(sinkf - lse) * d_row).sum(axis=(0, 2), keepdims=True)
    return Result({"O": o, "Stats": st, "dQ": dq, "dK": dk, "dV": dv, "dSink": dsink},
                  {"O": of_ref, "Stats": lse, "dQ": dq_ref, "dK": dk_ref, "dV": dv_ref,
                   "dSink": dsink_ref},
                  2e-2, _graph.chain(fwd, bwd))
