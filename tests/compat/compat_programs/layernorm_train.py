"""Layernorm training: half input, float scale/bias, epsilon as a host pass-by-value tensor."""

import numpy as np

from compat_harness import Result
from compat_programs import _norm


def run(h):
    n, c, hh, ww = 4, 32, 2, 2
    x = h.randn((n, c, hh, ww), "float16", channels_last=True)
    scale = h.randn((1, c, hh, ww), "float32", channels_last=True)
    bias = h.randn((1, c, hh, ww), "float32", channels_last=True)
    eps = h.host_scalar(1e-5)
    y = h.empty((n, c, hh, ww), "float16", stride=(c * hh * ww, 1, ww * c, c))
    m = h.empty((n, 1, 1, 1), "float32")
    iv = h.empty((n, 1, 1, 1), "float32")
    again = _norm.forward(h, "layernorm", "LN", (x, scale, bias, eps), (y, m, iv))
    xf = h.numpy(x)
    mu = xf.mean(axis=(1, 2, 3), keepdims=True)
    var = ((xf - mu) ** 2).mean(axis=(1, 2, 3), keepdims=True)
    ri = 1.0 / np.sqrt(var + 1e-5)
    ref = (xf - mu) * ri * h.numpy(scale) + h.numpy(bias)
    return Result({"Y": y, "mean": m, "inv_var": iv}, {"Y": ref, "mean": mu, "inv_var": ri},
                  1e-2, again)
