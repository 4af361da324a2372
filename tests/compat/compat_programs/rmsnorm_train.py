"""RMSNorm training without bias; returns (Y, inv_var)."""

import numpy as np

from compat_harness import Result


def run(h):
    cudnn = h.cudnn
    n, c = 8, 64
    x = h.randn((n, c, 1, 1), "float16")
    scale = h.randn((1, c, 1, 1), "float32")
    eps = h.host_scalar(1e-5)
    g = cudnn.pygraph(handle=h.handle, io_data_type=cudnn.data_type.HALF,
                      intermediate_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT)
    X, S, E = g.tensor_like(x), g.tensor_like(scale), g.tensor_like(eps)
    Y, inv_var = g.rmsnorm(name="rms", norm_forward_phase=cudnn.norm_forward_phase.TRAINING,
                           input=X, scale=S, epsilon=E)
    Y.set_output(True).set_data_type(cudnn.data_type.HALF)
    inv_var.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    g.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    y = h.empty((n, c, 1, 1), "float16")
    iv = h.empty((n, 1, 1, 1), "float32")
    ws = h.workspace(g)
    pack = {X: x, S: scale, E: eps, Y: y, inv_var: iv}
    g.execute(pack, ws)
    xf = h.numpy(x)
    ri = 1.0 / np.sqrt((xf ** 2).mean(axis=(1, 2, 3), keepdims=True) + 1e-5)
    return Result({"Y": y, "inv_var": iv}, {"Y": xf * ri * h.numpy(scale), "inv_var": ri}, 1e-2,
                  lambda: g.execute(pack, ws))
