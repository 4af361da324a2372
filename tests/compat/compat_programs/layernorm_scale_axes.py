"""Layernorm over the last dim of X [B, S, E] with SCALE / BIAS [1, 1, E]: the dims where SCALE
is not 1 are normalized (MEAN / INV_VARIANCE [B, S, 1]), as the frontend's own layernorm tests
use it."""

import numpy as np

from compat_harness import Result
from compat_programs import _norm


def run(h):
    b, s, e = 4, 8, 64
    x = h.randn((b, s, e), "float16", scale=3.0)
    scale = h.randn((1, 1, e), "float16")
    bias = h.randn((1, 1, e), "float16")
    eps = h.host_scalar(1e-3)
    y = h.empty((b, s, e), "float16")
    m = h.empty((b, s, 1), "float32")
    iv = h.empty((b, s, 1), "float32")
    # No I/O data type on the graph: each tensor's own.
    again = _norm.forward(h, "layernorm", "LN", (x, scale, bias, eps), (y, m, iv), io=None,
                          y_type="HALF")
    xf = h.numpy(x)
    mu = xf.mean(axis=-1, keepdims=True)
    ri = 1.0 / np.sqrt(((xf - mu) ** 2).mean(axis=-1, keepdims=True) + 1e-3)
    ref = (xf - mu) * ri * h.numpy(scale) + h.numpy(bias)
    return Result({"Y": y, "mean": m, "inv_var": iv}, {"Y": ref, "mean": mu, "inv_var": ri},
                  1e-2, again)
