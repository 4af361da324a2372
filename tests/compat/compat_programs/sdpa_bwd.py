"""SDPA backward (causal) from O and Stats computed by the reference."""

import math

import numpy as np

from compat_harness import Result
from compat_programs import _ref


def run(h):
    cudnn = h.cudnn
    b, nh, s, d = 1, 2, 64, 64
    qf, kf, vf, dof = (h.rng.standard_normal((b, nh, s, d)) for _ in range(4))
    q, k, v, do = (h.array(t, "float16") for t in (qf, kf, vf, dof))
    qf, kf, vf, dof = (h.numpy(t) for t in (q, k, v, do))  # the half-rounded values
    scale = 1.0 / math.sqrt(d)
    of, lse, p = _ref.attention(qf, kf, vf, scale, True)
    o = h.array(of, "float16")
    of = h.numpy(o)
    stats = h.array(lse, "float32")
    g = cudnn.pygraph(handle=h.handle, io_data_type=cudnn.data_type.HALF,
                      intermediate_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT)
    Q, K, V, O, dO, ST = (g.tensor_like(t) for t in (q, k, v, o, do, stats))
    dQ, dK, dV = g.sdpa_backward(name="sdpa_bwd", q=Q, k=K, v=V, o=O, dO=dO, stats=ST,
                                 attn_scale=scale, use_causal_mask=True)
    for t in (dQ, dK, dV):
        t.set_output(True).set_dim([b, nh, s, d]).set_stride([nh * s * d, s * d, d, 1])
    g.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    dq, dk, dv = (h.empty((b, nh, s, d), "float16") for _ in range(3))
    ws = h.workspace(g)
    pack = {Q: q, K: k, V: v, O: o, dO: do, ST: stats, dQ: dq, dK: dk, dV: dv}
    g.execute(pack, ws)
    dv_ref = np.einsum("bhqk,bhqd->bhkd", p, dof)
    dp = np.einsum("bhqd,bhkd->bhqk", dof, vf)
    ds = p * (dp - (dof * of).sum(-1, keepdims=True))
    dq_ref = scale * np.einsum("bhqk,bhkd->bhqd", ds, kf)
    dk_ref = scale * np.einsum("bhqk,bhqd->bhkd", ds, qf)
    return Result({"dQ": dq, "dK": dk, "dV": dv}, {"dQ": dq_ref, "dK": dk_ref, "dV": dv_ref},
                  2e-2, lambda: g.execute(pack, ws))
