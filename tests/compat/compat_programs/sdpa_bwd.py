"""SDPA backward (causal) from O and Stats computed by the reference."""

import math

from compat_harness import Result
from compat_programs import _ref, _sdpa


def run(h):
    b, nh, s, d = 1, 2, 64, 64
    (q, k, v, do), (qf, kf, vf, dof) = _sdpa.halves(h, (b, nh, s, d))
    scale = 1.0 / math.sqrt(d)
    of, lse, p = _ref.attention(qf, kf, vf, scale, True)
    o, of, stats = _sdpa.saved(h, of, lse)
    (dq, dk, dv), again = _sdpa.backward(h, (q, k, v, o, do, stats), scale,
                                         use_causal_mask=True)
    dq_ref, dk_ref, dv_ref, _ = _sdpa.gradients(p, qf, kf, vf, of, dof, scale)
    return Result({"dQ": dq, "dK": dk, "dV": dv}, {"dQ": dq_ref, "dK": dk_ref, "dV": dv_ref},
                  2e-2, again)
