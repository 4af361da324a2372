"""SDPA forward and backward with use_alibi_mask=True (causal, as the frontend requires)."""

import math

import numpy as np

from compat_harness import Result
from compat_programs import _ref


def run(h):
    cudnn = h.cudnn
    b, nh, s, d = 1, 6, 64, 64  # 6 heads: 4 power-of-two slopes and 2 interleaved ones
    qf, kf, vf, dof = (h.rng.standard_normal((b, nh, s, d)) for _ in range(4))
    q, k, v, do = (h.array(t, "float16") for t in (qf, kf, vf, dof))
    qf, kf, vf, dof = (h.numpy(t) for t in (q, k, v, do))  # the half-rounded values
    scale = 1.0 / math.sqrt(d)
    alibi = _ref.alibi_bias(nh, s, s)
    of_ref, lse, p = _ref.attention(qf, kf, vf, scale, True, alibi)

    def graph():
        return cudnn.pygraph(handle=h.handle, io_data_type=cudnn.data_type.HALF,
                             intermediate_data_type=cudnn.data_type.FLOAT,
                             compute_data_type=cudnn.data_type.FLOAT)

    fwd = graph()
    Q, K, V = fwd.tensor_like(q), fwd.tensor_like(k), fwd.tensor_like(v)
    O, Stats = fwd.sdpa(name="sdpa", q=Q, k=K, v=V, generate_stats=True, attn_scale=scale,
                        use_causal_mask=True, use_alibi_mask=True)
    O.set_output(True).set_dim([b, nh, s, d]).set_stride([nh * s * d, s * d, d, 1])
    Stats.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    fwd.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    o = h.empty((b, nh, s, d), "float16")
    st = h.empty((b, nh, s, 1), "float32")
    fpack = {Q: q, K: k, V: v, O: o, Stats: st}
    fws = h.workspace(fwd)
    fwd.execute(fpack, fws)

    # The backward from the reference O and stats, so that its check is independent.
    o_in = h.array(of_ref, "float16")
    of = h.numpy(o_in)
    stats = h.array(lse, "float32")
    bwd = graph()
    Qb, Kb, Vb, Ob, dOb, STb = (bwd.tensor_like(t) for t in (q, k, v, o_in, do, stats))
    dQ, dK, dV = bwd.sdpa_backward(name="sdpa_bwd", q=Qb, k=Kb, v=Vb, o=Ob, dO=dOb, stats=STb,
                                   attn_scale=scale, use_causal_mask=True, use_alibi_mask=True)
    for t in (dQ, dK, dV):
        t.set_output(True).set_dim([b, nh, s, d]).set_stride([nh * s * d, s * d, d, 1])
    bwd.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    dq, dk, dv = (h.empty((b, nh, s, d), "float16") for _ in range(3))
    bpack = {Qb: q, Kb: k, Vb: v, Ob: o_in, dOb: do, STb: stats, dQ: dq, dK: dk, dV: dv}
    bws = h.workspace(bwd)
    bwd.execute(bpack, bws)

    dv_ref = np.einsum("bhqk,bhqd->bhkd", p, dof)
    dp = np.einsum("bhqd,bhkd->bhqk", dof, vf)
    ds = p * (dp - (dof * of).sum(-1, keepdims=True))
    dq_ref = scale * np.einsum("bhqk,bhkd->bhqd", ds, kf)
    dk_ref = scale * np.einsum("bhqk,bhqd->bhkd", ds, qf)

    def both():
        fwd.execute(fpack, fws)
        bwd.execute(bpack, bws)

    return Result({"O": o, "Stats": st, "dQ": dq, "dK": dk, "dV": dv},
                  {"O": of_ref, "Stats": lse, "dQ": dq_ref, "dK": dk_ref, "dV": dv_ref},
                  2e-2, both)
