"""Serving: chunked prefill. Each of three sequences adds a chunk of new query tokens after the
tokens already in its K/V (one with none, so its chunk is its whole prompt): ragged Q and O of
the chunk tokens, ragged K and V of every token so far, all in buffers of exactly their token
totals, causal on the bottom-right diagonal (each new token sees every cached token and the new
ones up to itself), grouped-query, bf16."""

from compat_harness import Result
from compat_programs import _serve


def run(h):
    cached, chunk = [48, 0, 100], [16, 37, 28]
    lens_kv = [c + n for c, n in zip(cached, chunk)]
    hq, hk, d = 8, 2, 64
    q, k, v, o = _serve.qkvo(h, chunk, lens_kv, hq, hk, d, s_max_q=40, s_max_kv=128)
    seq_q, seq_kv = _serve.lengths(h, chunk), _serve.lengths(h, lens_kv)
    again = _serve.prefill(h, "chunk", q, k, v, o, seq_q, seq_kv,
                           use_causal_mask_bottom_right=True)
    ref = _serve.prefill_reference(q, k, v, "bottom_right")
    return Result({"O": h.numpy(o.array).reshape(-1)}, {"O": ref}, 2e-2, again)
