"""SDPA forward with paged K/V caches (paged_attention_k_table / _v_table, the padding mask and
paged_attention_max_seq_len_kv), as the frontend's paged-attention tests build it: K and V are
page pools [num_pages, h, page_size, d]; each sequence's page table row lists its pages."""

import math

import numpy as np

from compat_harness import Result
from compat_programs import _ref


def run(h):
    cudnn = h.cudnn
    b, nh, sq, d, page, per_seq = 2, 2, 32, 64, 32, 4
    num_pages = b * per_seq + 3
    max_kv = page * per_seq - 10
    lens_q, lens_kv = [32, 20], [max_kv, 70]
    scale = 1.0 / math.sqrt(d)
    q = h.randn((b, nh, sq, d), "float16")
    kc = h.randn((num_pages, nh, page, d), "float16")
    vc = h.randn((num_pages, nh, page, d), "float16")
    table = h.rng.permutation(num_pages)[:b * per_seq].reshape(b, 1, per_seq, 1)
    qf, kcf, vcf = h.numpy(q), h.numpy(kc), h.numpy(vc)

    ref = np.zeros((b, nh, sq, d))
    for i in range(b):
        rows = [(table[i, 0, j // page, 0], j % page) for j in range(lens_kv[i])]
        ki = np.stack([kcf[p, :, r] for p, r in rows], axis=1)
        vi = np.stack([vcf[p, :, r] for p, r in rows], axis=1)
        o, _, _ = _ref.attention(qf[i:i + 1, :, :lens_q[i]], ki[None], vi[None], scale, False)
        ref[i, :, :lens_q[i]] = o[0]

    pt = h.array(table.astype(np.float64), "int32")
    seq_q = h.array(np.array(lens_q, np.float64).reshape(-1, 1, 1, 1), "int32")
    seq_kv = h.array(np.array(lens_kv, np.float64).reshape(-1, 1, 1, 1), "int32")
    g = cudnn.pygraph(handle=h.handle, io_data_type=cudnn.data_type.HALF,
                      intermediate_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT)
    Q, K, V = g.tensor_like(q), g.tensor_like(kc), g.tensor_like(vc)
    PT_K, PT_V = g.tensor_like(pt), g.tensor_like(pt)
    SQ, SKV = g.tensor_like(seq_q), g.tensor_like(seq_kv)
    O, _ = g.sdpa(name="sdpa", q=Q, k=K, v=V, generate_stats=False, attn_scale=scale,
                  use_padding_mask=True, seq_len_q=SQ, seq_len_kv=SKV,
                  paged_attention_k_table=PT_K, paged_attention_v_table=PT_V,
                  paged_attention_max_seq_len_kv=max_kv)
    O.set_output(True).set_dim([b, nh, sq, d]).set_stride([nh * sq * d, sq * d, d, 1])
    g.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    o = h.empty((b, nh, sq, d), "float16")
    pack = {Q: q, K: kc, V: vc, PT_K: pt, PT_V: pt, SQ: seq_q, SKV: seq_kv, O: o}
    ws = h.workspace(g)
    g.execute(pack, ws)
    h.sync()
    got = h.numpy(o)
    # Padded query rows are not compared (the frontend does not define them).
    valid = lambda a: np.concatenate([a[i, :, :lens_q[i]].reshape(-1) for i in range(b)])  # noqa

    return Result({"O": valid(got)}, {"O": valid(ref)}, 2e-2, lambda: g.execute(pack, ws))
