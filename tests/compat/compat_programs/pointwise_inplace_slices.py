"""RoPE-style rotation written in place: the inputs are two strided slices of one array and the
outputs are bound to the same slices (the frontend's apply-rope test). The outputs take the
slices' strides, and every output element is computed from the inputs as they were."""

import numpy as np

from compat_harness import Result


def run(h):
    cudnn = h.cudnn
    rows, half = 64, 16
    x = h.randn((1, rows, 4 * half), "float32")
    c = h.randn((1, rows, half), "float32")
    s = h.randn((1, rows, half), "float32")
    before = h.numpy(x).copy()
    x1, x2 = x[..., :half], x[..., half:2 * half]
    g = cudnn.pygraph(handle=h.handle, intermediate_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT)
    X1, X2, C, S = g.tensor_like(x1), g.tensor_like(x2), g.tensor_like(c), g.tensor_like(s)
    Y1 = g.sub(a=g.mul(a=X1, b=C), b=g.mul(a=X2, b=S))
    Y2 = g.add(a=g.mul(a=X2, b=C), b=g.mul(a=X1, b=S))
    Y1.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    Y2.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    g.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    ws = h.workspace(g)
    g.execute({X1: x1, X2: x2, C: c, S: s, Y1: x1, Y2: x2}, ws)
    b1, b2 = before[..., :half], before[..., half:2 * half]
    cf, sf = h.numpy(c), h.numpy(s)
    ref = before.copy()
    ref[..., :half] = b1 * cf - b2 * sf
    ref[..., half:2 * half] = b2 * cf + b1 * sf
    # (one run only: a second execute would rotate again)
    return Result({"x": x}, {"x": ref}, 1e-5)
