"""matmul followed by a sum reduction over the last axis (output dims set by the user)."""

from compat_harness import Result


def run(h):
    cudnn = h.cudnn
    a, b = h.randn((2, 16, 32), "float16"), h.randn((2, 32, 24), "float16")
    g = cudnn.pygraph(handle=h.handle, io_data_type=cudnn.data_type.HALF,
                      intermediate_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT)
    A, B = g.tensor_like(a), g.tensor_like(b)
    C = g.matmul(A=A, B=B)
    Y = g.reduction(input=C, mode=cudnn.reduction_mode.ADD,
                    compute_data_type=cudnn.data_type.FLOAT)
    Y.set_output(True).set_dim([2, 16, 1]).set_stride([16, 1, 1])
    Y.set_data_type(cudnn.data_type.FLOAT)
    g.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    y = h.empty((2, 16, 1), "float32")
    ws = h.workspace(g)
    pack = {A: a, B: b, Y: y}
    g.execute(pack, ws)
    ref = (h.numpy(a) @ h.numpy(b)).sum(axis=-1, keepdims=True)
    return Result({"Y": y}, {"Y": ref}, 1e-2, lambda: g.execute(pack, ws))
