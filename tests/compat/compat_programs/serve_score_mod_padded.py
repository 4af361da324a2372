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
    # q scaled: scores well past the cap.
    qkv, table, pt, (qf, kcf, vcf) = _serve.pages(h, b, hq, hk, 1, d, page, num_pages, per_seq,
                                                  "float16", q_scale=4.0)
    seq_q, seq_kv = _serve.lengths(h, [1] * b), _serve.lengths(h, lens_kv)
    cap_value = h.host_scalar(cap)

    def extra(g):
        CAP = g.tensor(name="softcap", dim=[1, 1, 1, 1], stride=[1, 1, 1, 1],
                       is_pass_by_value=True, data_type=cudnn.data_type.FLOAT)
        return {"score_mod": partial(softcap, cap=CAP)}, {CAP: cap_value}

    o, again = _serve.paged(h, qkv, pt, seq_q, seq_kv, per_seq * page, io="HALF", extra=extra)

    ref = np.zeros((b, hq, 1, d))
    for i, n in enumerate(lens_kv):
        ki, vi = _serve.paged_kv(table, page, kcf, vcf, i, n)
        s = scale * np.einsum("hid,hjd->hij", qf[i], ki)
        t = cap * np.tanh(s / cap)
        p = np.exp(t - t.max(-1, keepdims=True))
        ref[i] = np.einsum("hij,hjd->hid", p / p.sum(-1, keepdims=True), vi)
    return Result({"O": h.numpy(o)}, {"O": ref}, 2e-2, again)
