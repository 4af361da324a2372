"""cudnn.Graph: build on leaving the with-block, run positionally after set_io_tuples and with a
dict whose missing output is allocated."""

import numpy as np

from compat_harness import Result


def run(h):
    cudnn = h.cudnn
    x = h.randn((4, 32, 64), "float16", scale=0.5)
    w = h.randn((1, 64, 32), "float16", scale=0.5)
    with cudnn.Graph(handle=h.handle, io_data_type=cudnn.data_type.HALF,
                     intermediate_data_type=cudnn.data_type.FLOAT,
                     compute_data_type=cudnn.data_type.FLOAT) as graph:
        mm = graph.matmul(A=x, B=w, name="mm")
        y = graph.tanh(input=mm, name="act")
        y.set_output(True).set_data_type(cudnn.data_type.HALF)
    graph.set_io_tuples([x, w], [y])
    out = graph(x, w)
    ref = np.tanh(h.numpy(x) @ h.numpy(w))
    result = graph({"mm::A": x, "mm::B": w})
    out2 = result[y.get_name()] if y.get_name() in result else [
        v for k, v in result.items() if k not in ("mm::A", "mm::B")][0]
    return Result({"Y": out, "Y_dict": out2}, {"Y": ref, "Y_dict": ref}, 1e-2,
                  lambda: graph(x, w))
