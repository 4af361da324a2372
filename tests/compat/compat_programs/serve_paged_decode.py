"""Serving: paged decode. One new query token per sequence (s_q = 1) against K/V caches held in
pages (paged_attention_k_table / _v_table, paged_attention_max_seq_len_kv) of five sequences of
different lengths (one of a single token, one filling its last page), grouped-query (8 query
heads over 2 K/V heads), bf16, as a serving engine's decode step calls the frontend's sdpa."""

import math

import numpy as np

from compat_harness import Result
from compat_programs import _serve


def run(h):
    lens_kv = [1, 17, 64, 100, 33]
    b, hq, hk, d, page = len(lens_kv), 8, 2, 128, 16
    per_seq = -(-max(lens_kv) // page)
    num_pages = b * per_seq + 3
    scale = 1.0 / math.sqrt(d)
    q = h.randn((b, hq, 1, d), "bfloat16")
    kc = h.randn((num_pages, hk, page, d), "bfloat16")
    vc = h.randn((num_pages, hk, page, d), "bfloat16")
    table = h.rng.permutation(num_pages)[:b * per_seq].reshape(b, 1, per_seq, 1)
    qf, kcf, vcf = h.numpy(q), h.numpy(kc), h.numpy(vc)
    pt = h.array(table.astype(np.float64), "int32")
    seq_q, seq_kv = _serve.lengths(h, [1] * b), _serve.lengths(h, lens_kv)

    g = _serve.graph(h)
    Q, K, V = g.tensor_like(q), g.tensor_like(kc), g.tensor_like(vc)
    PT_K, PT_V = g.tensor_like(pt), g.tensor_like(pt)
    SQ, SKV = g.tensor_like(seq_q), g.tensor_like(seq_kv)
    O, _ = g.sdpa(name="decode", q=Q, k=K, v=V, generate_stats=False, attn_scale=scale,
                  use_padding_mask=True, seq_len_q=SQ, seq_len_kv=SKV,
                  paged_attention_k_table=PT_K, paged_attention_v_table=PT_V,
                  paged_attention_max_seq_len_kv=per_seq * page)
    O.set_output(True).set_dim([b, hq, 1, d]).set_stride([hq * d, d, d, 1])
    O.set_data_type(h.cudnn.data_type.BFLOAT16)
    g.build([h.cudnn.heur_mode.A, h.cudnn.heur_mode.FALLBACK])
    o = h.empty((b, hq, 1, d), "bfloat16")
    pack = {Q: q, K: kc, V: vc, PT_K: pt, PT_V: pt, SQ: seq_q, SKV: seq_kv, O: o}
    ws = h.workspace(g)
    g.execute(pack, ws)
    h.sync()

    ref = np.zeros((b, hq, 1, d))
    for i, n in enumerate(lens_kv):
        rows = [(table[i, 0, j // page, 0], j % page) for j in range(n)]
        ki = np.stack([kcf[p, :, r] for p, r in rows], axis=1)
        vi = np.stack([vcf[p, :, r] for p, r in rows], axis=1)
        ref[i] = _serve.attend(qf[i], ki, vi, scale)
    return Result({"O": h.numpy(o)}, {"O": ref}, 2e-2, lambda: g.execute(pack, ws))
