"""SDPA forward and backward on ragged (THD) Q, K, V, O, dO, dQ, dK, dV: tensor(ragged_offset=)
and set_ragged_offset with the padding mask, as the frontend's variable-length tests build it.
The sequences are packed token after token in [b, s_max, h, d] buffers (strides of BSHD); the
offsets count elements."""

import math

import numpy as np

from compat_harness import Result
from compat_programs import _ref


def run(h):
    cudnn = h.cudnn
    b, nh, s, d = 3, 2, 64, 64
    lens_q, lens_kv = [40, 64, 17], [64, 23, 50]
    scale = 1.0 / math.sqrt(d)
    dims, strides = [b, nh, s, d], [s * nh * d, d, nh * d, 1]

    def packed(lens):
        """A [b*s*h*d] buffer holding the tokens of each sequence one after another (the rest
        is zero), the float64 values as read back, and the element offsets [b+1,1,1,1]."""
        tokens = int(sum(lens))
        vals = np.zeros(b * s * nh * d)
        vals[:tokens * nh * d] = h.rng.standard_normal(tokens * nh * d)
        arr = h.array(vals.reshape(b, s, nh, d), "float16")
        cum = np.concatenate([[0], np.cumsum(lens)]) * nh * d
        return arr, h.numpy(arr).reshape(-1), cum

    def seqs(flat, cum, lens):
        """[h, len, d] float64 per sequence."""
        return [flat[cum[i]:cum[i] + lens[i] * nh * d].reshape(lens[i], nh, d).transpose(1, 0, 2)
                for i in range(b)]

    def tokens_of(buf, cum):
        return h.numpy(buf).reshape(-1)[:cum[-1]]

    q, qf, cq = packed(lens_q)
    k, kf, ck = packed(lens_kv)
    v, vf, _ = packed(lens_kv)
    do, dof, _ = packed(lens_q)
    ref_o, ref_lse, ref_dq, ref_dk, ref_dv = [], [], [], [], []
    for qi, ki, vi, doi in zip(seqs(qf, cq, lens_q), seqs(kf, ck, lens_kv), seqs(vf, ck, lens_kv),
                               seqs(dof, cq, lens_q)):
        o, lse, p = _ref.attention(qi[None], ki[None], vi[None], scale, False)
        dv = np.einsum("bhqk,bhqd->bhkd", p, doi[None])
        dp = np.einsum("bhqd,bhkd->bhqk", doi[None], vi[None])
        ds = p * (dp - (doi[None] * o).sum(-1, keepdims=True))
        ref_o.append(o[0])
        ref_lse.append(lse[0])
        ref_dq.append(scale * np.einsum("bhqk,bhkd->bhqd", ds, ki[None])[0])
        ref_dk.append(scale * np.einsum("bhqk,bhqd->bhkd", ds, qi[None])[0])
        ref_dv.append(dv[0])
    flat = lambda parts: np.concatenate([x.transpose(1, 0, 2).reshape(-1) for x in parts])  # noqa

    off_q = h.array(cq.reshape(-1, 1, 1, 1), "int32")
    off_kv = h.array(ck.reshape(-1, 1, 1, 1), "int32")
    seq_q = h.array(np.array(lens_q, np.float64).reshape(-1, 1, 1, 1), "int32")
    seq_kv = h.array(np.array(lens_kv, np.float64).reshape(-1, 1, 1, 1), "int32")

    def graph():
        return cudnn.pygraph(handle=h.handle, io_data_type=cudnn.data_type.HALF,
                             intermediate_data_type=cudnn.data_type.FLOAT,
                             compute_data_type=cudnn.data_type.FLOAT)

    def ragged(g, name, ro):
        return g.tensor(name=name, dim=dims, stride=strides, data_type=cudnn.data_type.HALF,
                        ragged_offset=ro)

    fwd = graph()
    RQ, RKV = fwd.tensor_like(off_q), fwd.tensor_like(off_kv)
    SQ, SKV = fwd.tensor_like(seq_q), fwd.tensor_like(seq_kv)
    Q, K, V = ragged(fwd, "Q", RQ), ragged(fwd, "K", RKV), ragged(fwd, "V", RKV)
    O, Stats = fwd.sdpa(name="sdpa", q=Q, k=K, v=V, generate_stats=True, attn_scale=scale,
                        use_padding_mask=True, seq_len_q=SQ, seq_len_kv=SKV)
    O.set_output(True).set_dim(dims).set_stride(strides).set_ragged_offset(RQ)
    Stats.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    fwd.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    o = h.empty((b, s, nh, d), "float16")
    st = h.empty((b, nh, s, 1), "float32")
    fpack = {Q: q, K: k, V: v, O: o, Stats: st, RQ: off_q, RKV: off_kv, SQ: seq_q, SKV: seq_kv}
    fws = h.workspace(fwd)
    fwd.execute(fpack, fws)

    # The backward from the reference O and stats, so that its check is independent.
    o_ref = np.zeros(b * s * nh * d)
    o_ref[:cq[-1]] = flat(ref_o)
    o_in = h.array(o_ref.reshape(b, s, nh, d), "float16")
    lse_full = np.zeros((b, nh, s, 1))
    for i in range(b):
        lse_full[i, :, :lens_q[i]] = ref_lse[i]
    stats = h.array(lse_full, "float32")
    bwd = graph()
    RQb, RKVb = bwd.tensor_like(off_q), bwd.tensor_like(off_kv)
    SQb, SKVb = bwd.tensor_like(seq_q), bwd.tensor_like(seq_kv)
    Qb, Kb, Vb = ragged(bwd, "Q", RQb), ragged(bwd, "K", RKVb), ragged(bwd, "V", RKVb)
    Ob, dOb = ragged(bwd, "O", RQb), ragged(bwd, "dO", RQb)
    STb = bwd.tensor_like(stats)
    dQ, dK, dV = bwd.sdpa_backward(name="sdpa_bwd", q=Qb, k=Kb, v=Vb, o=Ob, dO=dOb, stats=STb,
                                   attn_scale=scale, use_padding_mask=True, seq_len_q=SQb,
                                   seq_len_kv=SKVb, max_total_seq_len_q=int(sum(lens_q)),
                                   max_total_seq_len_kv=int(sum(lens_kv)))
    for t, ro in ((dQ, RQb), (dK, RKVb), (dV, RKVb)):
        t.set_output(True).set_dim(dims).set_stride(strides).set_ragged_offset(ro)
    bwd.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    dq, dk, dv = (h.empty((b, s, nh, d), "float16") for _ in range(3))
    bpack = {Qb: q, Kb: k, Vb: v, Ob: o_in, dOb: do, STb: stats, dQ: dq, dK: dk, dV: dv,
             RQb: off_q, RKVb: off_kv, SQb: seq_q, SKVb: seq_kv}
    bws = h.workspace(bwd)
    bwd.execute(bpack, bws)
    h.sync()

    st_np = h.numpy(st)
    got_lse = np.concatenate([st_np[i, :, :lens_q[i]].reshape(-1) for i in range(b)])
    ref_lse_flat = np.concatenate([x.reshape(-1) for x in ref_lse])

    def both():
        fwd.execute(fpack, fws)
        bwd.execute(bpack, bws)

    return Result({"O": tokens_of(o, cq), "Stats": got_lse, "dQ": tokens_of(dq, cq),
                   "dK": tokens_of(dk, ck), "dV": tokens_of(dv, ck)},
                  {"O": flat(ref_o), "Stats": ref_lse_flat, "dQ": flat(ref_dq),
                   "dK": flat(ref_dk), "dV": flat(ref_dv)},
                  2e-2, both)
