"""SDPA backward with an additive bias [1, h, s, s] and its gradient through dBias= (a tensor the
program makes, as the frontend's tests do); the call returns (dQ, dK, dV)."""

import math

import numpy as np

from compat_harness import Result
from compat_programs import _sdpa


def run(h):
    b, nh, s, d = 2, 2, 64, 64
    q, k, v, do = (h.randn((b, nh, s, d), "float16") for _ in range(4))
    bias = h.randn((1, nh, s, s), "float16")
    qf, kf, vf, dof, bf = (h.numpy(t) for t in (q, k, v, do, bias))
    scale = 1.0 / math.sqrt(d)
    sc = np.einsum("bhqd,bhkd->bhqk", qf, kf) * scale + bf
    m = sc.max(-1, keepdims=True)
    lse = m + np.log(np.exp(sc - m).sum(-1, keepdims=True))
    p = np.exp(sc - lse)
    o, of, stats = _sdpa.saved(h, np.einsum("bhqk,bhkd->bhqd", p, vf), lse)
    dbias = h.empty((1, nh, s, s), "float16")

    def extra(g):
        B, dB = g.tensor_like(bias), g.tensor_like(dbias)
        dB.set_output(True)
        return {"bias": B, "dBias": dB}, {B: bias, dB: dbias}

    (dq, dk, dv), again = _sdpa.backward(h, (q, k, v, o, do, stats), scale, extra)
    dq_ref, dk_ref, dv_ref, ds = _sdpa.gradients(p, qf, kf, vf, of, dof, scale)
    db_ref = ds.sum(0, keepdims=True)
    return Result({"dQ": dq, "dK": dk, "dV": dv, "dBias": dbias},
                  {"dQ": dq_ref, "dK": dk_ref, "dV": dv_ref, "dBias": db_ref}, 2e-2, again)
