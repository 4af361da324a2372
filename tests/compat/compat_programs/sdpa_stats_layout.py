"""SDPA forward on Q/K/V/O stored [b, s, h, d] (a transposed view, as models hold them) with
generate_stats=True: Stats is given no dims, the frontend fills packed [b, h, s_q, 1], and the
program allocates exactly that."""

import math

from compat_harness import Result
from compat_programs import _ref, _sdpa


def run(h):
    b, nh, s, d = 2, 3, 64, 64
    # [b, s, h, d] in memory, seen as [b, h, s, d].
    q, k, v = (h.randn((b, s, nh, d), "float16").swapaxes(1, 2) for _ in range(3))
    scale = 1.0 / math.sqrt(d)
    # O in the same [b, s, h, d] layout; Stats packed, as frontend users allocate it.
    o, st, again = _sdpa.forward(h, q, k, v, scale, o_stride=(s * nh * d, d, nh * d, 1))
    ref_o, lse, _ = _ref.attention(h.numpy(q), h.numpy(k), h.numpy(v), scale, False)
    return Result({"O": o, "Stats": st}, {"O": ref_o, "Stats": lse}, 1e-2, again)
