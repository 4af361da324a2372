"""Pointwise ops in the frontend's keyword forms: cmp_gt(input, comparison), max(input0, input1),
binary_select, leaky_relu; execute with uid keys and a None entry."""

import numpy as np

from compat_harness import Result


def run(h):
    cudnn = h.cudnn
    shape = (2, 8, 16)
    a, b = h.randn(shape, "float32"), h.randn(shape, "float32")
    g = cudnn.pygraph(handle=h.handle, io_data_type=cudnn.data_type.FLOAT,
                      intermediate_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT)
    A, B = g.tensor_like(a), g.tensor_like(b)
    mask = g.cmp_gt(input=A, comparison=B, compute_data_type=cudnn.data_type.FLOAT)
    mask.set_data_type(cudnn.data_type.BOOLEAN)
    big = g.max(input0=A, input1=B)
    leaky = g.leaky_relu(input=A, negative_slope=0.2)
    sel = g.binary_select(input0=big, input1=leaky, mask=mask)
    Y = g.mul(a=sel, b=B)
    Y.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    g.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    y = h.empty(shape, "float32")
    ws = h.workspace(g)
    pack = {A.get_uid(): a, B.get_uid(): b, Y.get_uid(): y}
    g.execute({**pack, mask.get_uid(): None}, ws)  # None entries are ignored
    af, bf = h.numpy(a), h.numpy(b)
    ref = np.where(af > bf, np.maximum(af, bf), np.where(af > 0, af, 0.2 * af)) * bf
    return Result({"Y": y}, {"Y": ref}, 1e-5, lambda: g.execute(pack, ws))
