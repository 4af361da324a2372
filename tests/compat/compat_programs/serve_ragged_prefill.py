"""Serving: ragged prefill. Four prompts of different lengths packed token after token (THD)
in Q, K, V and O buffers of exactly the token total, causal, grouped-query (8 query heads over
2 K/V heads), bf16, as a serving engine calls the frontend's sdpa with ragged offsets and
sequence lengths."""

from compat_harness import Result
from compat_programs import _serve


def run(h):
    lens = [37, 128, 5, 90]
    hq, hk, d = 8, 2, 64
    q, k, v, o = _serve.qkvo(h, lens, lens, hq, hk, d)
    seq = _serve.lengths(h, lens)
    again = _serve.prefill(h, "prefill", q, k, v, o, seq, seq, use_causal_mask=True)
    ref = _serve.prefill_reference(q, k, v, "top_left")
    return Result({"O": h.numpy(o.array).reshape(-1)}, {"O": ref}, 2e-2, again)
