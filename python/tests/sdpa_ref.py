"""What the SDPA tests share: the fp64 numpy attention every test_sdpa_*.py checks against
(masks, bias, ALiBi, sinks, padding, a dropout factor; forward and backward), the fp32 graph
they build, and their poisoned outputs."""

import numpy as np

import dnngraph as cudnn
from conftest import poisoned

F32 = cudnn.data_type.FLOAT


def fp32_graph(handle, io=F32):
    """A pygraph with FLOAT intermediate and compute types (and `io` tensors)."""
    return cudnn.pygraph(handle=handle, io_data_type=io, intermediate_data_type=F32,
                         compute_data_type=F32)


def qkv_do(rng, b, hq, hk, sq, skv, d):
    """Seeded fp32 Q [b,hq,sq,d], K and V [b,hk,skv,d], and an upstream gradient dO like Q."""
    f32 = [rng.standard_normal(shape).astype(np.float32)
           for shape in ((b, hq, sq, d), (b, hk, skv, d), (b, hk, skv, d), (b, hq, sq, d))]
    return tuple(f32)


def set_outputs(pack, tensors, shapes):
    """Makes each tensor an output with a fresh poisoned fp32 array of its shape (packed
    strides) in `pack`; returns the arrays."""
    arrays = []
    for t, shape in zip(tensors, shapes):
        a = poisoned(shape)
        t.set_output(True).set_dim(list(shape)).set_stride([s // 4 for s in a.strides])
        pack[t] = a
        arrays.append(a)
    return arrays


def attention(q, k, v, scale, *, causal=False, left=None, bias=None, alibi=None, sink=None,
              seq_q=None, seq_kv=None, z=None, do=None):
    """fp64 attention of q [b, hq, sq, d], k [b, hk, skv, d], v [b, hk, skv, dv], GQA by
    repeat. Scores scale * Q K^T, plus alibi[h] * (col - row) (slopes per query head) and bias;
    causal keeps col <= row (top-left), left keeps col > row - left; with seq_q / seq_kv keys
    past seq_kv[i] are masked and query rows past seq_q[i] are zero in O and the gradients. A sink
    (one logit per query head, [1, hq, 1, 1]) joins every row's softmax with no value row. z
    multiplies P (dropout: a mask times its scale, broadcast to [b, hq, sq, skv]).

    Returns o, lse and, given do, dq, dk, dv (and dsink when a sink is given):
    O = (P*Z) V; dV = (P*Z)^T dO; dP = (dO V^T) * Z; dS = P * (dP - rowsum(dO*O))."""
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    sq, skv = q.shape[2], k.shape[2]
    g = q.shape[1] // k.shape[1]
    kr, vr = np.repeat(k, g, axis=1), np.repeat(v, g, axis=1)
    s = scale * q @ kr.transpose(0, 1, 3, 2)
    rel = np.arange(skv)[None, :] - np.arange(sq)[:, None]
    if alibi is not None:
        s = s + np.asarray(alibi, dtype=np.float64)[None, :, None, None] * rel
    if bias is not None:
        s = s + bias
    keep = np.ones(rel.shape, dtype=bool)
    if causal:
        keep &= rel <= 0
    if left is not None:
        keep &= rel > -left
    s = np.where(keep, s, -np.inf)
    rows = np.ones((q.shape[0], 1, sq, 1), dtype=bool)
    if seq_q is not None:
        for i in range(q.shape[0]):
            s[i, :, :, seq_kv[i]:] = -np.inf
            rows[i, :, seq_q[i]:] = False
    m = s.max(-1, keepdims=True)
    total = 0.0
    if sink is not None:
        sk = np.asarray(sink, dtype=np.float64).reshape(1, -1, 1, 1)
        m = np.maximum(m, sk)
        total = np.exp(sk - m)
    lse = m + np.log(np.exp(s - m).sum(-1, keepdims=True) + total)
    p = np.exp(s - lse)
    zb = 1.0 if z is None else np.broadcast_to(np.asarray(z, dtype=np.float64), p.shape)
    o = ((p * zb) @ vr) * rows
    if do is None:
        return o, lse
    do = np.asarray(do, dtype=np.float64) * rows
    d_row = (do * o).sum(-1, keepdims=True)
    ds = p * ((do @ vr.transpose(0, 1, 3, 2)) * zb - d_row)
    fold = lambda t: t.reshape(t.shape[0], -1, g, *t.shape[2:]).sum(2)  # noqa: E731
    grads = (scale * ds @ kr, fold(scale * ds.transpose(0, 1, 3, 2) @ q),
             fold((p * zb).transpose(0, 1, 3, 2) @ do))
    if sink is None:
        return (o, lse, *grads)
    return (o, lse, *grads, -(np.exp(sk - lse) * d_row).sum(axis=(0, 2), keepdims=True))
