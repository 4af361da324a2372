"""execute with a tuple of buffers and tensor_uids, with tensor names as keys; key() as int."""

import numpy as np

from compat_harness import Result


def run(h):
    cudnn = h.cudnn
    a, b = h.randn((1, 8, 16), "float32"), h.randn((1, 8, 16), "float32")
    g = cudnn.pygraph(handle=h.handle, io_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT)
    A, B = g.tensor_like(a), g.tensor_like(b)
    Y = g.add(a=g.exp(input=A), b=B)
    Y.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    g.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    assert isinstance(g.key(), int)
    y1, y2 = h.empty((1, 8, 16), "float32"), h.empty((1, 8, 16), "float32")
    ws = h.workspace(g)
    g.execute((a, b, y1), ws, tensor_uids=(A.get_uid(), B.get_uid(), Y.get_uid()))
    g.execute({A.get_name(): a, B.get_name(): b, Y.get_name(): y2}, ws)
    h.sync()
    ref = np.exp(h.numpy(a)) + h.numpy(b)
    return Result({"Y_tuple": y1, "Y_names": y2}, {"Y_tuple": ref, "Y_names": ref}, 1e-5)
