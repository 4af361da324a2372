"""SDPA forward and backward with attention score modifiers in the frontend's form: softcapping
(cap * tanh(score / cap)) through score_mod, its bprop through score_mod_bprop (TANH_BWD on the
tensor the forward callback saved, as the frontend's Softcap helper does), and a causal mask
built in the callback (gen_index, cmp_ge, binary_select), with a pass-by-value cap and -inf
substitute."""

import math

import numpy as np

from compat_harness import Result


class Softcap:
    def __init__(self, cap):
        self.cap = cap
        self.before_tanh = None

    def forward(self, graph, score):
        self.before_tanh = graph.div(a=score, b=self.cap)
        return graph.mul(a=graph.tanh(input=self.before_tanh), b=self.cap)

    def backward(self, graph, ds):
        t = graph.tanh_backward(loss=graph.mul(a=ds, b=self.cap), input=self.before_tanh)
        return graph.div(a=t, b=self.cap)


def causal_softcap(cudnn, softcap, neg_inf):
    def fwd(graph, score):
        capped = softcap.forward(graph, score)
        row = graph.gen_index(input=score, axis=2)
        row.set_data_type(cudnn.data_type.INT32)
        col = graph.gen_index(input=score, axis=3)
        col.set_data_type(cudnn.data_type.INT32)
        keep = graph.cmp_ge(input=row, comparison=col, compute_data_type=cudnn.data_type.BOOLEAN)
        keep.set_data_type(cudnn.data_type.BOOLEAN)
        return graph.binary_select(input0=capped, input1=neg_inf, mask=keep)

    return fwd


def reference(qf, kf, vf, dof, scale, cap):
    s = np.einsum("bhqd,bhkd->bhqk", qf, kf) * scale
    n = s.shape[-1]
    keep = np.arange(n)[None, :] <= np.arange(s.shape[-2])[:, None]
    t = np.where(keep, cap * np.tanh(s / cap), -1e9)
    m = t.max(-1, keepdims=True)
    lse = m + np.log(np.exp(t - m).sum(-1, keepdims=True))
    p = np.exp(t - lse)
    o = np.einsum("bhqk,bhkd->bhqd", p, vf)
    dt = p * (np.einsum("bhqd,bhkd->bhqk", dof, vf) - (dof * o).sum(-1, keepdims=True))
    ds = dt * (1.0 - np.tanh(s / cap) ** 2)  # masked entries have p = 0, so dt = 0
    return (o, lse, scale * np.einsum("bhqk,bhkd->bhqd", ds, kf),
            scale * np.einsum("bhqk,bhqd->bhkd", ds, qf), np.einsum("bhqk,bhqd->bhkd", p, dof))


def run(h):
    cudnn = h.cudnn
    b, nh, s, d, cap = 2, 4, 128, 64, 2.0
    qf, kf, vf, dof = (h.rng.standard_normal((b, nh, s, d)) for _ in range(4))
    qf = qf * 4.0  # scores well past the cap
    q, k, v, do = (h.array(t, "float16") for t in (qf, kf, vf, dof))
    qf, kf, vf, dof = (h.numpy(t) for t in (q, k, v, do))  # the half-rounded values
    scale = 1.0 / math.sqrt(d)
    o_ref, lse, dq_ref, dk_ref, dv_ref = reference(qf, kf, vf, dof, scale, cap)
    cap_value, neg_inf_value = h.host_scalar(cap), h.host_scalar(-1e9)

    def graph():
        g = cudnn.pygraph(handle=h.handle, io_data_type=cudnn.data_type.HALF,
                          intermediate_data_type=cudnn.data_type.FLOAT,
                          compute_data_type=cudnn.data_type.FLOAT)
        scalars = [g.tensor(name=n, dim=[1, 1, 1, 1], stride=[1, 1, 1, 1], is_pass_by_value=True,
                            data_type=cudnn.data_type.FLOAT) for n in ("cap", "neg_inf")]
        return g, scalars

    fwd, (CAP, NEG) = graph()
    Q, K, V = fwd.tensor_like(q), fwd.tensor_like(k), fwd.tensor_like(v)
    O, Stats = fwd.sdpa(name="sdpa", q=Q, k=K, v=V, generate_stats=True, attn_scale=scale,
                        score_mod=causal_softcap(cudnn, Softcap(CAP), NEG))
    O.set_output(True).set_dim([b, nh, s, d]).set_stride([nh * s * d, s * d, d, 1])
    Stats.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    fwd.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    o = h.empty((b, nh, s, d), "float16")
    st = h.empty((b, nh, s, 1), "float32")
    fpack = {Q: q, K: k, V: v, O: o, Stats: st, CAP: cap_value, NEG: neg_inf_value}
    fws = h.workspace(fwd)
    fwd.execute(fpack, fws)

    # The backward from the reference O and stats, so that its check is independent.
    o_in = h.array(o_ref, "float16")
    stats = h.array(lse, "float32")
    bwd, (CAPb, NEGb) = graph()
    Qb, Kb, Vb, Ob, dOb, STb = (bwd.tensor_like(t) for t in (q, k, v, o_in, do, stats))
    softcap = Softcap(CAPb)
    dQ, dK, dV = bwd.sdpa_backward(name="sdpa_bwd", q=Qb, k=Kb, v=Vb, o=Ob, dO=dOb, stats=STb,
                                   attn_scale=scale,
                                   score_mod=causal_softcap(cudnn, softcap, NEGb),
                                   score_mod_bprop=softcap.backward)
    for t in (dQ, dK, dV):
        t.set_output(True).set_dim([b, nh, s, d]).set_stride([nh * s * d, s * d, d, 1])
    bwd.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    dq, dk, dv = (h.empty((b, nh, s, d), "float16") for _ in range(3))
    bpack = {Qb: q, Kb: k, Vb: v, Ob: o_in, dOb: do, STb: stats, dQ: dq, dK: dk, dV: dv,
             CAPb: cap_value, NEGb: neg_inf_value}
    bws = h.workspace(bwd)
    bwd.execute(bpack, bws)

    def both():
        fwd.execute(fpack, fws)
        bwd.execute(bpack, bws)

    return Result({"O": o, "Stats": st, "dQ": dq, "dK": dk, "dV": dv},
                  {"O": o_ref, "Stats": lse, "dQ": dq_ref, "dK": dk_ref, "dV": dv_ref},
                  2e-2, both)
