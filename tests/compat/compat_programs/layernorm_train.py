"""Layernorm training: half input, float scale/bias, epsilon as a host pass-by-value tensor."""

import numpy as np

from compat_harness import Result


def run(h):
    cudnn = h.cudnn
    n, c, hh, ww = 4, 32, 2, 2
    x = h.randn((n, c, hh, ww), "float16", channels_last=True)
    scale = h.randn((1, c, hh, ww), "float32", channels_last=True)
    bias = h.randn((1, c, hh, ww), "float32", channels_last=True)
    eps = h.host_scalar(1e-5)
    g = cudnn.pygraph(handle=h.handle, io_data_type=cudnn.data_type.HALF,
                      intermediate_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT)
    X, S, B, E = g.tensor_like(x), g.tensor_like(scale), g.tensor_like(bias), g.tensor_like(eps)
    Y, mean, inv_var = g.layernorm(name="LN", norm_forward_phase=cudnn.norm_forward_phase.TRAINING,
                                   input=X, scale=S, bias=B, epsilon=E)
    Y.set_output(True).set_data_type(cudnn.data_type.HALF)
    mean.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    inv_var.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    g.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    y = h.empty((n, c, hh, ww), "float16", stride=(c * hh * ww, 1, ww * c, c))
    m = h.empty((n, 1, 1, 1), "float32")
    iv = h.empty((n, 1, 1, 1), "float32")
    ws = h.workspace(g)
    pack = {X: x, S: scale, B: bias, E: eps, Y: y, mean: m, inv_var: iv}
    g.execute(pack, ws)
    xf = h.numpy(x)
    mu = xf.mean(axis=(1, 2, 3), keepdims=True)
    var = ((xf - mu) ** 2).mean(axis=(1, 2, 3), keepdims=True)
    ri = 1.0 / np.sqrt(var + 1e-5)
    ref = (xf - mu) * ri * h.numpy(scale) + h.numpy(bias)
    return Result({"Y": y, "mean": m, "inv_var": iv}, {"Y": ref, "mean": mu, "inv_var": ri},
                  1e-2, lambda: g.execute(pack, ws))
