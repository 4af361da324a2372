"""transpose of a packed NCHW tensor to an NHWC-ordered view (permutation [0, 2, 3, 1]) and
back into a packed output. The frontend's transpose needs cuDNN 9.22: on an older cuDNN both
libraries refuse it (cudnnGraphNotSupportedError); the CPU reference engine runs it."""

import numpy as np

from compat_harness import Result


def run(h):
    cudnn = h.cudnn
    n, c, hh, ww = 2, 8, 4, 6
    x = h.randn((n, c, hh, ww), "float32")
    g = cudnn.pygraph(handle=h.handle, io_data_type=cudnn.data_type.FLOAT,
                      intermediate_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT)
    X = g.tensor_like(x)
    Y = g.transpose(input=X, permutation=[0, 2, 3, 1], name="to_nhwc")
    Y.set_output(True).set_dim([n, hh, ww, c]).set_stride([hh * ww * c, ww * c, c, 1])
    g.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    y = h.empty((n, hh, ww, c), "float32")
    ws = h.workspace(g)
    pack = {X: x, Y: y}
    g.execute(pack, ws)
    return Result({"Y": y}, {"Y": np.transpose(h.numpy(x), (0, 2, 3, 1))}, 1e-6,
                  lambda: g.execute(pack, ws))
