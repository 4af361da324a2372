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
    qkv, table, pt, (qf, kcf, vcf) = _serve.pages(h, b, hq, hk, 1, d, page, num_pages, per_seq,
                                                  "bfloat16")
    seq_q, seq_kv = _serve.lengths(h, [1] * b), _serve.lengths(h, lens_kv)
    o, again = _serve.paged(h, qkv, pt, seq_q, seq_kv, per_seq * page, use_padding_mask=True)

    ref = np.zeros((b, hq, 1, d))
    for i, n in enumerate(lens_kv):
        ki, vi = _serve.paged_kv(table, page, kcf, vcf, i, n)
        ref[i] = _serve.attend(qf[i], ki, vi, scale)
    return Result({"O": h.numpy(o)}, {"O": ref}, 2e-2, again)
