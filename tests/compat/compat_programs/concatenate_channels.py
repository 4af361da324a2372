"""concatenate(inputs=..., axis, name) of three packed tensors along the channel dim, into a
non-virtual output whose dims and strides are set, as the frontend needs (dnngraph would infer
them and checks the ones set)."""

import numpy as np

from compat_harness import Result


def run(h):
    cudnn = h.cudnn
    xs = [h.randn((2, c, 4, 8), "float32") for c in (4, 8, 4)]
    g = cudnn.pygraph(handle=h.handle, io_data_type=cudnn.data_type.FLOAT,
                      intermediate_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT)
    X = [g.tensor_like(x) for x in xs]
    Y = g.concatenate(inputs=X, axis=1, name="cat")  # the frontend takes inputs by keyword
    Y.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    Y.set_dim([2, 16, 4, 8]).set_stride([16 * 4 * 8, 4 * 8, 8, 1])
    g.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    y = h.empty((2, 16, 4, 8), "float32")
    ws = h.workspace(g)
    pack = {**dict(zip(X, xs)), Y: y}
    g.execute(pack, ws)
    ref = np.concatenate([h.numpy(x) for x in xs], axis=1)
    return Result({"Y": y}, {"Y": ref}, 1e-6, lambda: g.execute(pack, ws))
