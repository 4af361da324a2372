"""SDPA forward and backward with attention score modifiers in the frontend's form: softcapping
(cap * tanh(score / cap)) through score_mod, its bprop through score_mod_bprop (TANH_BWD on the
tensor the forward callback saved, as the frontend's Softcap helper does), and a causal mask
built in the callback (gen_index, cmp_ge, binary_select), with a pass-by-value cap and -inf
substitute."""

import math

import numpy as np

from compat_harness import Result
from compat_programs import _graph, _sdpa


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


def scalars(g, cudnn):
    """The pass-by-value cap and -inf substitute."""
    return [g.tensor(name=n, dim=[1, 1, 1, 1], stride=[1, 1, 1, 1], is_pass_by_value=True,
                     data_type=cudnn.data_type.FLOAT) for n in ("cap", "neg_inf")]


def run(h):
    cudnn = h.cudnn
    b, nh, s, d, cap = 2, 4, 128, 64, 2.0
    # q scaled: scores well past the cap.
    (q, k, v, do), (qf, kf, vf, dof) = _sdpa.halves(h, (b, nh, s, d), q_scale=4.0)
    scale = 1.0 / math.sqrt(d)
    o_ref, lse, dq_ref, dk_ref, dv_ref = reference(qf, kf, vf, dof, scale, cap)
    cap_value, neg_inf_value = h.host_scalar(cap), h.host_scalar(-1e9)

    def fwd_extra(g):
        CAP, NEG = scalars(g, cudnn)
        return ({"score_mod": causal_softcap(cudnn, Softcap(CAP), NEG)},
                {CAP: cap_value, NEG: neg_inf_value})

    def bwd_extra(g):
        CAP, NEG = scalars(g, cudnn)
        softcap = Softcap(CAP)
        return ({"score_mod": causal_softcap(cudnn, softcap, NEG),
                 "score_mod_bprop": softcap.backward}, {CAP: cap_value, NEG: neg_inf_value})

    o, st, fwd = _sdpa.forward(h, q, k, v, scale, fwd_extra)
    o_in, _, stats = _sdpa.saved(h, o_ref, lse)
    (dq, dk, dv), bwd = _sdpa.backward(h, (q, k, v, o_in, do, stats), scale, bwd_extra)
    return Result({"O": o, "Stats": st, "dQ": dq, "dK": dk, "dV": dv},
                  {"O": o_ref, "Stats": lse, "dQ": dq_ref, "dK": dk_ref, "dV": dv_ref},
                  2e-2, _graph.chain(fwd, bwd))
