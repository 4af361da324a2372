"""Layernorm over the last dim of X [B, S, E] with SCALE / BIAS [1, 1, E]: the dims where SCALE
is not 1 are normalized (MEAN / INV_VARIANCE [B, S, 1]), as the frontend's own layernorm tests
use it."""

import numpy as np

from compat_harness import Result


def run(h):
    cudnn = h.cudnn
    b, s, e = 4, 8, 64
    x = h.randn((b, s, e), "float16", scale=3.0)
    scale = h.randn((1, 1, e), "float16")
    bias = h.randn((1, 1, e), "float16")
    eps = h.host_scalar(1e-3)
    g = cudnn.pygraph(handle=h.handle, intermediate_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT)
    X, S, B, E = g.tensor_like(x), g.tensor_like(scale), g.tensor_like(bias), g.tensor_like(eps)
    Y, mean, inv_var = g.layernorm(name="LN", norm_forward_phase=cudnn.norm_forward_phase.TRAINING,
                                   input=X, scale=S, bias=B, epsilon=E)
    Y.set_output(True).set_data_type(cudnn.data_type.HALF)
    mean.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    inv_var.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    g.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    y = h.empty((b, s, e), "float16")
    m = h.empty((b, s, 1), "float32")
    iv = h.empty((b, s, 1), "float32")
    ws = h.workspace(g)
    pack = {X: x, S: scale, B: bias, E: eps, Y: y, mean: m, inv_var: iv}
    g.execute(pack, ws)
    xf = h.numpy(x)
    mu = xf.mean(axis=-1, keepdims=True)
    ri = 1.0 / np.sqrt(((xf - mu) ** 2).mean(axis=-1, keepdims=True) + 1e-3)
    ref = (xf - mu) * ri * h.numpy(scale) + h.numpy(bias)
    return Result({"Y": y, "mean": m, "inv_var": iv}, {"Y": ref, "mean": mu, "inv_var": ri},
                  1e-2, lambda: g.execute(pack, ws))
