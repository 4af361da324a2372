"""SDPA forward and backward with use_alibi_mask=True (causal, as the frontend requires)."""

import math

from compat_harness import Result
from compat_programs import _graph, _ref, _sdpa


def run(h):
    b, nh, s, d = 1, 6, 64, 64  # 6 heads: 4 power-of-two slopes and 2 interleaved ones
    (q, k, v, do), (qf, kf, vf, dof) = _sdpa.halves(h, (b, nh, s, d))
    scale = 1.0 / math.sqrt(d)
    alibi = _ref.alibi_bias(nh, s, s)
    of_ref, lse, p = _ref.attention(qf, kf, vf, scale, True, alibi)
    masks = {"use_causal_mask": True, "use_alibi_mask": True}
    o, st, fwd = _sdpa.forward(h, q, k, v, scale, **masks)

    o_in, of, stats = _sdpa.saved(h, of_ref, lse)
    (dq, dk, dv), bwd = _sdpa.backward(h, (q, k, v, o_in, do, stats), scale, **masks)
    dq_ref, dk_ref, dv_ref, _ = _sdpa.gradients(p, qf, kf, vf, of, dof, scale)
    return Result({"O": o, "Stats": st, "dQ": dq, "dK": dk, "dV": dv},
                  {"O": of_ref, "Stats": lse, "dQ": dq_ref, "dK": dk_ref, "dV": dv_ref},
                  2e-2, _graph.chain(fwd, bwd))
