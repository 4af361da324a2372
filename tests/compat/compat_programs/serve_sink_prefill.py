"""Serving: attention sinks in a ragged prefill (models served with learned sink logits): three
prompts packed in Q, K, V and O buffers of exactly the token total, causal, grouped-query, and
sink_token [1, h_q, 1, 1] fp32, one extra logit per query head joining every row's softmax with
no value row, bf16."""

from compat_harness import Result
from compat_programs import _sdpa, _serve


def run(h):
    lens = [23, 64, 9]
    hq, hk, d = 8, 2, 64
    q, k, v, o = _serve.qkvo(h, lens, lens, hq, hk, d)
    seq = _serve.lengths(h, lens)
    sinkf = h.rng.standard_normal((1, hq, 1, 1)) + 1.5  # large enough to take real weight
    sink = h.array(sinkf, "float32")
    again = _serve.prefill(h, "sink_prefill", q, k, v, o, seq, seq, _sdpa.like(sink_token=sink),
                           use_causal_mask=True)
    ref = _serve.prefill_reference(q, k, v, "top_left", h.numpy(sink).reshape(-1))
    return Result({"O": h.numpy(o.array).reshape(-1)}, {"O": ref}, 2e-2, again)
