"""Serving: paged decode through a score modifier, as the frontend's flexible-graph program
builds it: score_mod applies a softcap (cap * tanh(score / cap)) with pass-by-value tensors,
and the sequence lengths (seq_len_q / seq_len_kv, no use_padding_mask) with page tables bound
the keys each sequence attends. Only the result rows are compared."""

import math
from functools import partial

import numpy as np

from compat_harness import Result
from compat_programs import _serve


def softcap(graph, score, cap):
    return graph.mul(a=graph.tanh(input=graph.div(a=score, b=cap)), b=cap)


def run(h):
    cudnn = h.cudnn
    lens_kv = [5, 40, 64, 23]
    b, hq, hk, d, page, cap = len(lens_kv), 8, 8, 128, 16, 0.8
    per_seq = -(-max(lens_kv) // page)
    num_pages = b * per_seq + 2
    scale = 1.0 / math.sqrt(d)
    q = h.randn((b, hq, 1, d), "float16", scale=4.0)  # scores well past the cap
    kc = h.randn((num_pages, hk, page, d), "float16")
    vc = h.randn((num_pages, hk, page, d), "float16")
    table = h.rng.permutation(num_pages)[:b * per_seq].reshape(b, 1, per_seq, 1)
    qf, kcf, vcf = h.numpy(q), h.numpy(kc), h.numpy(vc)
    pt = h.array(table.astype(np.float64), "int32")
    seq_q, seq_kv = _serve.lengths(h, [1] * b), _serve.lengths(h, lens_kv)
    cap_value = h.host_scalar(cap)

    g = _serve.graph(h, io="HALF")
    Q, K, V = g.tensor_like(q), g.tensor_like(kc), g.tensor_like(vc)
    PT_K, PT_V = g.tensor_like(pt), g.tensor_like(pt)
    SQ, SKV = g.tensor_like(seq_q), g.tensor_like(seq_kv)
    CAP = g.tensor(name="softcap", dim=[1, 1, 1, 1], stride=[1, 1, 1, 1], is_pass_by_value=True,
                   data_type=cudnn.data_type.FLOAT)
    O, _ = g.sdpa(name="decode", q=Q, k=K, v=V, seq_len_q=SQ, seq_len_kv=SKV,
                  generate_stats=False, attn_scale=scale, paged_attention_k_table=PT_K,
                  paged_attention_v_table=PT_V, paged_attention_max_seq_len_kv=per_seq * page,
                  score_mod=partial(softcap, cap=CAP))
    O.set_output(True).set_dim([b, hq, 1, d]).set_stride([hq * d, d, d, 1])
    O.set_data_type(cudnn.data_type.HALF)
    g.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    o = h.empty((b, hq, 1, d), "float16")
    pack = {Q: q, K: kc, V: vc, PT_K: pt, PT_V: pt, SQ: seq_q, SKV: seq_kv, O: o, CAP: cap_value}
    ws = h.workspace(g)
    g.execute(pack, ws)
    h.sync()

    ref = np.zeros((b, hq, 1, d))
    for i, n in enumerate(lens_kv):
        rows = [(table[i, 0, j // page, 0], j % page) for j in range(n)]
        ki = np.stack([kcf[p, :, r] for p, r in rows], axis=1)
        vi = np.stack([vcf[p, :, r] for p, r in rows], axis=1)
        s = scale * np.einsum("hid,hjd->hij", qf[i], ki)
        t = cap * np.tanh(s / cap)
        p = np.exp(t - t.max(-1, keepdims=True))
        ref[i] = np.einsum("hij,hjd->hid", p / p.sum(-1, keepdims=True), vi)
    return Result({"O": h.numpy(o)}, {"O": ref}, 2e-2, lambda: g.execute(pack, ws))
