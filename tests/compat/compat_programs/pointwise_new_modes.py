"""The pointwise modes added last: add_square(a, b) = a + b*b, mod(input0, input1) (fmod: the
sign of the dividend) and tan(input), three outputs of one graph."""

import numpy as np

from compat_harness import Result


def run(h):
    cudnn = h.cudnn
    shape = (2, 8, 16)
    a, b = h.randn(shape, "float32"), h.randn(shape, "float32")
    c = h.array(np.abs(h.rng.standard_normal(shape)) + 0.75, "float32")
    t = h.randn(shape, "float32", scale=0.3)
    g = cudnn.pygraph(handle=h.handle, io_data_type=cudnn.data_type.FLOAT,
                      intermediate_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT)
    A, B, C, T = g.tensor_like(a), g.tensor_like(b), g.tensor_like(c), g.tensor_like(t)
    Y1 = g.add_square(a=A, b=B)
    Y2 = g.mod(input0=A, input1=C)
    Y3 = g.tan(input=T)
    for y in (Y1, Y2, Y3):
        y.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    g.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    y1, y2, y3 = h.empty(shape, "float32"), h.empty(shape, "float32"), h.empty(shape, "float32")
    ws = h.workspace(g)
    pack = {A: a, B: b, C: c, T: t, Y1: y1, Y2: y2, Y3: y3}
    g.execute(pack, ws)
    af, bf, cf, tf = h.numpy(a), h.numpy(b), h.numpy(c), h.numpy(t)
    return Result({"Y1": y1, "Y2": y2, "Y3": y3},
                  {"Y1": af + bf * bf, "Y2": np.fmod(af, cf), "Y3": np.tan(tf)}, 1e-5,
                  lambda: g.execute(pack, ws))
