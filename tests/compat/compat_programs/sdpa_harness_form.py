"""SDPA forward and backward in the call form of the frontend's own attention test harness:
int uids, BSHD strides, every keyword spelled out (unset ones None/False), implementation=,
unfuse_fma=, stats_use_log2=, 1-D per-batch sequence lengths, outputs re-dimensioned with
set_dim/set_stride, selected_engine read after build_plans, execute(pack, workspace, handle)
with int keys. The mask: causal with a left window on the bottom-right diagonal, shifted per
batch by the sequence lengths (seq_len_kv < s_kv), GQA."""

import numpy as np

from compat_harness import Result

B, HQ, HK, SQ, SKV, D, LEFT, SCALE = 2, 4, 2, 48, 80, 64, 16, 0.125
LEN_Q, LEN_KV = [SQ, SQ], [SKV, 61]


def bshd(shape):
    b, h, s, d = shape
    return [s * h * d, d, h * d, 1]


def keep_mask():
    """[b, 1, s_q, s_kv]: key j attended by query i of batch n when j < len_kv[n] and
    diag - LEFT < j <= diag with diag = i + len_kv[n] - len_q[n]."""
    row, col = np.arange(SQ)[:, None], np.arange(SKV)[None, :]
    out = np.zeros((B, 1, SQ, SKV), dtype=bool)
    for n in range(B):
        diag = row + LEN_KV[n] - LEN_Q[n]
        out[n, 0] = (col < LEN_KV[n]) & (col <= diag) & (col > diag - LEFT)
    return out


def run(h):
    cudnn = h.cudnn
    dt = cudnn.data_type.HALF
    shapes = {0: (B, HQ, SQ, D), 1: (B, HK, SKV, D), 2: (B, HK, SKV, D), 3: (B, HQ, SQ, D)}

    def strided(values, uid):
        a = h.empty(shapes[uid], "float16", stride=bshd(shapes[uid]))
        a[...] = h.array(values, "float16")
        return a

    q, k, v = (strided(h.rng.standard_normal(shapes[u]), u) for u in (0, 1, 2))
    len_q, len_kv = h.array(np.array(LEN_Q), "int32"), h.array(np.array(LEN_KV), "int32")
    common = dict(attn_scale=SCALE, bias=None, use_alibi_mask=False, use_padding_mask=True,
                  diagonal_band_left_bound=LEFT, diagonal_band_right_bound=0,
                  diagonal_alignment=cudnn.diagonal_alignment.BOTTOM_RIGHT, dropout=None,
                  sink_token=None,
                  max_total_seq_len_q=None, max_total_seq_len_kv=None, cu_seq_len_q=None,
                  cu_seq_len_kv=None)

    def graph():
        return cudnn.pygraph(io_data_type=dt, intermediate_data_type=cudnn.data_type.FLOAT,
                             compute_data_type=cudnn.data_type.FLOAT, handle=h.handle)

    def tensors(g, extra):
        ts = {u: g.tensor(uid=u, dim=shapes[u], stride=bshd(shapes[u]), data_type=dt)
              for u in extra}
        ts[11] = g.tensor(uid=11, dim=(B,), stride=(1,), data_type=cudnn.data_type.INT32)
        ts[12] = g.tensor(uid=12, dim=(B,), stride=(1,), data_type=cudnn.data_type.INT32)
        return ts

    def build(g):
        g.validate()
        g.build_operation_graph()
        g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
        g.check_support()
        g.build_plans()
        engine = g.selected_engine  # None: cuDNN's backend serves it (the frontend's meaning)
        return "backend" if engine is None else engine.name

    g = graph()
    t = tensors(g, (0, 1, 2))
    o_t, st_t = g.sdpa(name="sdpa_forward", q=t[0], k=t[1], v=t[2], generate_stats=True,
                       block_mask=None, seq_len_q=t[11], seq_len_kv=t[12], rng_dump=None,
                       paged_attention_k_table=None, paged_attention_v_table=None,
                       paged_attention_max_seq_len_kv=None, score_max=None, score_sum_exp=None,
                       unfuse_fma=False, stats_use_log2=False,
                       implementation=cudnn.attention_implementation.AUTO, **common)
    o_t.set_uid(3).set_output(True).set_dim(shapes[3]).set_stride(bshd(shapes[3]))
    st_t.set_uid(4).set_output(True).set_data_type(cudnn.data_type.FLOAT).set_dim(
        (B, HQ, SQ, 1)).set_stride((HQ * SQ, SQ, 1, 1))
    fwd_engine = build(g)
    o = h.empty(shapes[3], "float16", stride=bshd(shapes[3]))
    stats = h.empty((B, HQ, SQ, 1), "float32")
    ws = h.workspace(g)
    g.execute({0: q, 1: k, 2: v, 3: o, 4: stats, 11: len_q, 12: len_kv}, ws, h.handle)
    h.sync()

    do = strided(h.rng.standard_normal(shapes[3]) * 0.5, 3)
    g2 = graph()
    t2 = tensors(g2, (0, 1, 2, 3))
    t2[9] = g2.tensor(uid=9, dim=shapes[3], stride=bshd(shapes[3]), data_type=dt)
    t2[4] = g2.tensor(uid=4, dim=(B, HQ, SQ, 1), stride=(HQ * SQ, SQ, 1, 1),
                      data_type=cudnn.data_type.FLOAT)
    # No implementation= here: the frontend's sdpa_backward does not take it.
    grads_t = g2.sdpa_backward(name="sdpa_backward", q=t2[0], k=t2[1], v=t2[2], o=t2[3],
                               dO=t2[9], stats=t2[4], dBias=None, seq_len_q=t2[11],
                               seq_len_kv=t2[12], use_deterministic_algorithm=True,
                               dSink_token=None, **common)
    for uid, gt in zip((5, 6, 7), grads_t):
        shape = shapes[uid - 5]
        gt.set_uid(uid).set_output(True).set_dim(shape).set_stride(bshd(shape))
    bwd_engine = build(g2)
    grads = [h.empty(shapes[u], "float16", stride=bshd(shapes[u])) for u in (0, 1, 2)]
    ws2 = h.workspace(g2)
    pack2 = {0: q, 1: k, 2: v, 3: o, 9: do, 4: stats, 5: grads[0], 6: grads[1], 7: grads[2],
             11: len_q, 12: len_kv}
    g2.execute(pack2, ws2, h.handle)
    h.sync()

    # float64 reference from the half-rounded inputs (the backward from the O it was given).
    qf, kf, vf, dof, of = (h.numpy(x) for x in (q, k, v, do, o))
    grp = HQ // HK
    kr, vr = np.repeat(kf, grp, axis=1), np.repeat(vf, grp, axis=1)
    keep = keep_mask()
    s = np.where(keep, SCALE * np.einsum("bhqd,bhkd->bhqk", qf, kr), -np.inf)
    m = s.max(-1, keepdims=True)
    lse = m + np.log(np.exp(s - m).sum(-1, keepdims=True))
    p = np.exp(s - lse)
    o_ref = np.einsum("bhqk,bhkd->bhqd", p, vr)
    dp = np.einsum("bhqd,bhkd->bhqk", dof, vr)
    ds = p * (dp - (dof * of).sum(-1, keepdims=True))
    dq_ref = SCALE * np.einsum("bhqk,bhkd->bhqd", ds, kr)
    dk_ref = (SCALE * np.einsum("bhqk,bhqd->bhkd", ds, qf)).reshape(B, HK, grp, SKV, D).sum(2)
    dv_ref = np.einsum("bhqk,bhqd->bhkd", p, dof).reshape(B, HK, grp, SKV, D).sum(2)
    # Keys past len_kv get no gradient (the reference's p is 0 there).
    return Result({"O": o, "Stats": stats, "dQ": grads[0], "dK": grads[1], "dV": grads[2]},
                  {"O": o_ref, "Stats": lse, "dQ": dq_ref, "dK": dk_ref, "dV": dv_ref}, 2e-2,
                  lambda: g2.execute(pack2, ws2, h.handle),
                  notes={"engines": f"fwd {fwd_engine}, bwd {bwd_engine}"})
