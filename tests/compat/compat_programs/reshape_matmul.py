"""reshape (VIEW_ONLY) of a matmul's output [b, m, n] to [b, m, h, n/h], the dims and strides
set on the tensor reshape returns, as the frontend's users split attention heads."""

import numpy as np

from compat_harness import Result


def run(h):
    cudnn = h.cudnn
    b, m, k, n, heads = 2, 16, 32, 64, 4
    a, w = h.randn((b, m, k), "float32", scale=0.2), h.randn((b, k, n), "float32", scale=0.2)
    g = cudnn.pygraph(handle=h.handle, io_data_type=cudnn.data_type.FLOAT,
                      intermediate_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT)
    A, W = g.tensor_like(a), g.tensor_like(w)
    C = g.matmul(A, W, name="mm")
    C.set_data_type(cudnn.data_type.FLOAT)
    Y = g.reshape(C, reshape_mode=cudnn.reshape_mode.VIEW_ONLY, name="split_heads")
    d = n // heads
    Y.set_output(True).set_dim([b, m, heads, d]).set_stride([m * n, n, d, 1])
    Y.set_data_type(cudnn.data_type.FLOAT)
    g.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    y = h.empty((b, m, heads, d), "float32")
    ws = h.workspace(g)
    pack = {A: a, W: w, Y: y}
    g.execute(pack, ws)
    ref = np.matmul(h.numpy(a), h.numpy(w)).reshape(b, m, heads, d)
    return Result({"Y": y}, {"Y": ref}, 1e-4, lambda: g.execute(pack, ws))
