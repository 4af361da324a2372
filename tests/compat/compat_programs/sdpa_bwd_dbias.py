"""SDPA backward with an additive bias [1, h, s, s] and its gradient through dBias= (a tensor the
program makes, as the frontend's tests do); the call returns (dQ, dK, dV)."""

import math

import numpy as np

from compat_harness import Result


def run(h):
    cudnn = h.cudnn
    b, nh, s, d = 2, 2, 64, 64
    q, k, v, do = (h.randn((b, nh, s, d), "float16") for _ in range(4))
    bias = h.randn((1, nh, s, s), "float16")
    qf, kf, vf, dof, bf = (h.numpy(t) for t in (q, k, v, do, bias))
    scale = 1.0 / math.sqrt(d)
    sc = np.einsum("bhqd,bhkd->bhqk", qf, kf) * scale + bf
    m = sc.max(-1, keepdims=True)
    lse = m + np.log(np.exp(sc - m).sum(-1, keepdims=True))
    p = np.exp(sc - lse)
    o = h.array(np.einsum("bhqk,bhkd->bhqd", p, vf), "float16")
    of = h.numpy(o)
    stats = h.array(lse, "float32")

    g = cudnn.pygraph(handle=h.handle, io_data_type=cudnn.data_type.HALF,
                      intermediate_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT)
    Q, K, V, O, dO, ST, B = (g.tensor_like(t) for t in (q, k, v, o, do, stats, bias))
    dbias = h.empty((1, nh, s, s), "float16")
    dB = g.tensor_like(dbias)
    dQ, dK, dV = g.sdpa_backward(name="sdpa_bwd", q=Q, k=K, v=V, o=O, dO=dO, stats=ST,
                                 attn_scale=scale, bias=B, dBias=dB)
    for t in (dQ, dK, dV):
        t.set_output(True).set_dim([b, nh, s, d]).set_stride([nh * s * d, s * d, d, 1])
    dB.set_output(True)
    g.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    dq, dk, dv = (h.empty((b, nh, s, d), "float16") for _ in range(3))
    ws = h.workspace(g)
    pack = {Q: q, K: k, V: v, O: o, dO: do, ST: stats, B: bias, dQ: dq, dK: dk, dV: dv,
            dB: dbias}
    g.execute(pack, ws)
    dv_ref = np.einsum("bhqk,bhqd->bhkd", p, dof)
    dp = np.einsum("bhqd,bhkd->bhqk", dof, vf)
    ds = p * (dp - (dof * of).sum(-1, keepdims=True))
    dq_ref = scale * np.einsum("bhqk,bhkd->bhqd", ds, kf)
    dk_ref = scale * np.einsum("bhqk,bhqd->bhkd", ds, qf)
    db_ref = ds.sum(0, keepdims=True)
    return Result({"dQ": dq, "dK": dk, "dV": dv, "dBias": dbias},
                  {"dQ": dq_ref, "dK": dk_ref, "dV": dv_ref, "dBias": db_ref},
                  2e-2, lambda: g.execute(pack, ws))
