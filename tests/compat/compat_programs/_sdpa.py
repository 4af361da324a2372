"""What the SDPA programs share: the forward and backward they build on fp16 [b, h, s, d] tensors
(graphs from _graph), their inputs, and the float64 gradients of softmax attention they are
checked against."""

import numpy as np

from compat_programs._graph import finish, graph


def packed(shape):
    """The strides of a packed [b, h, s, d] tensor."""
    _, nh, s, d = shape
    return [nh * s * d, s * d, d, 1]


def like(**arrays):
    """An `extra` for forward/backward: each array as a tensor_like tensor under its keyword."""
    def extra(g):
        tensors = {key: g.tensor_like(a) for key, a in arrays.items()}
        return tensors, {tensors[key]: a for key, a in arrays.items()}

    return extra


def halves(h, shape, q_scale=1.0):
    """Random q, k, v, dO of shape as fp16 arrays, and their float64 values as rounded to fp16
    (q's drawn values scaled by q_scale first)."""
    qf, kf, vf, dof = (h.rng.standard_normal(shape) for _ in range(4))
    arrays = [h.array(t, "float16") for t in (qf * q_scale, kf, vf, dof)]
    return arrays, [h.numpy(t) for t in arrays]


def saved(h, o_ref, lse):
    """The reference O (fp16) and stats (fp32) as the backward's inputs, so that its check is
    independent of the forward's; with O's float64 values as rounded."""
    o = h.array(o_ref, "float16")
    return o, h.numpy(o), h.array(lse, "float32")


def forward(h, q, k, v, scale, extra=None, o_stride=None, **kw):
    """SDPA forward with generate_stats=True on fp16 q, k, v [b, h, s, d]: O (packed unless
    o_stride says otherwise) and Stats [b, h, s, 1] fp32. extra(g) gives the keywords and pack
    entries of inputs beyond Q, K and V. Returns o, stats and a function that executes again."""
    g = graph(h)
    Q, K, V = g.tensor_like(q), g.tensor_like(k), g.tensor_like(v)
    more, pack = extra(g) if extra else ({}, {})
    O, Stats = g.sdpa(name="sdpa", q=Q, k=K, v=V, generate_stats=True, attn_scale=scale, **more,
                      **kw)
    shape = list(q.shape)
    O.set_output(True).set_dim(shape).set_stride(list(o_stride or packed(shape)))
    Stats.set_output(True).set_data_type(h.cudnn.data_type.FLOAT)
    o = h.empty(shape, "float16", stride=o_stride)
    st = h.empty(shape[:3] + [1], "float32")
    pack.update({Q: q, K: k, V: v, O: o, Stats: st})
    return o, st, finish(h, g, pack)


def backward(h, ins, scale, extra=None, **kw):
    """SDPA backward on ins = (q, k, v, o, dO: fp16 [b, h, s, d]; stats: fp32 [b, h, s, 1]):
    dQ, dK and dV packed fp16. extra(g) gives the keywords and pack entries of the tensors beyond
    those (inputs, and outputs it marks as such). Returns [dq, dk, dv] and a function that
    executes again."""
    g = graph(h)
    Q, K, V, O, dO, ST = (g.tensor_like(t) for t in ins)
    more, pack = extra(g) if extra else ({}, {})
    dQ, dK, dV = g.sdpa_backward(name="sdpa_bwd", q=Q, k=K, v=V, o=O, dO=dO, stats=ST,
                                 attn_scale=scale, **more, **kw)
    shape = list(ins[0].shape)
    for t in (dQ, dK, dV):
        t.set_output(True).set_dim(shape).set_stride(packed(shape))
    grads = [h.empty(shape, "float16") for _ in range(3)]
    pack.update(zip((Q, K, V, O, dO, ST, dQ, dK, dV), list(ins) + grads))
    return grads, finish(h, g, pack)


def gradients(p, q, k, v, o, do, scale):
    """Float64 dQ, dK, dV and dS (the gradient of the scaled scores) of O = P V, P the softmax of
    scale * Q K^T (+ any bias), from P, the inputs, the O the backward reads and dO."""
    dv = np.einsum("bhqk,bhqd->bhkd", p, do)
    dp = np.einsum("bhqd,bhkd->bhqk", do, v)
    ds = p * (dp - (do * o).sum(-1, keepdims=True))
    return (scale * np.einsum("bhqk,bhkd->bhqd", ds, k),
            scale * np.einsum("bhqk,bhqd->bhkd", ds, q), dv, ds)
