"""matmul followed by a sum reduction over the last axis (output dims set by the user)."""

from compat_harness import Result
from compat_programs import _graph


def run(h):
    cudnn = h.cudnn
    a, b = h.randn((2, 16, 32), "float16"), h.randn((2, 32, 24), "float16")
    g = _graph.graph(h)
    A, B = g.tensor_like(a), g.tensor_like(b)
    C = g.matmul(A=A, B=B)
    Y = g.reduction(input=C, mode=cudnn.reduction_mode.ADD,
                    compute_data_type=cudnn.data_type.FLOAT)
    Y.set_output(True).set_dim([2, 16, 1]).set_stride([16, 1, 1])
    Y.set_data_type(cudnn.data_type.FLOAT)
    y = h.empty((2, 16, 1), "float32")
    again = _graph.finish(h, g, {A: a, B: b, Y: y})
    ref = (h.numpy(a) @ h.numpy(b)).sum(axis=-1, keepdims=True)
    return Result({"Y": y}, {"Y": ref}, 1e-2, again)
