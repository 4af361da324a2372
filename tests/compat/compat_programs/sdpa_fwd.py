"""SDPA forward, causal, with generate_stats=True (packed Stats [b,h,s_q,1])."""

import math

from compat_harness import Result
from compat_programs import _ref, _sdpa


def run(h):
    b, nh, s, d = 2, 2, 64, 64
    q, k, v = (h.randn((b, nh, s, d), "float16") for _ in range(3))
    scale = 1.0 / math.sqrt(d)
    o, st, again = _sdpa.forward(h, q, k, v, scale, use_causal_mask=True)
    ref_o, lse, _ = _ref.attention(h.numpy(q), h.numpy(k), h.numpy(v), scale, True)
    return Result({"O": o, "Stats": st}, {"O": ref_o, "Stats": lse}, 1e-2, again)
