"""SDPA forward with paged K/V caches (paged_attention_k_table / _v_table, the padding mask and
paged_attention_max_seq_len_kv), as the frontend's paged-attention tests build it: K and V are
page pools [num_pages, h, page_size, d]; each sequence's page table row lists its pages."""

import math

import numpy as np

from compat_harness import Result
from compat_programs import _ref, _serve


def run(h):
    b, nh, sq, d, page, per_seq = 2, 2, 32, 64, 32, 4
    num_pages = b * per_seq + 3
    max_kv = page * per_seq - 10
    lens_q, lens_kv = [32, 20], [max_kv, 70]
    scale = 1.0 / math.sqrt(d)
    qkv, table, pt, (qf, kcf, vcf) = _serve.pages(h, b, nh, nh, sq, d, page, num_pages, per_seq,
                                                  "float16")

    ref = np.zeros((b, nh, sq, d))
    for i in range(b):
        ki, vi = _serve.paged_kv(table, page, kcf, vcf, i, lens_kv[i])
        o, _, _ = _ref.attention(qf[i:i + 1, :, :lens_q[i]], ki[None], vi[None], scale, False)
        ref[i, :, :lens_q[i]] = o[0]

    seq_q, seq_kv = _serve.lengths(h, lens_q), _serve.lengths(h, lens_kv)
    o, again = _serve.paged(h, qkv, pt, seq_q, seq_kv, max_kv, io="HALF", set_type=False,
                            name="sdpa", use_padding_mask=True)
    got = h.numpy(o)
    # Padded query rows are not compared (the frontend does not define them).
    valid = lambda a: np.concatenate([a[i, :, :lens_q[i]].reshape(-1) for i in range(b)])  # noqa

    return Result({"O": valid(got)}, {"O": valid(ref)}, 2e-2, again)
