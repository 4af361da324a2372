"""The variant-pack forms the frontend's own tests use: data_ptr() ints as buffers, an int
workspace, a None key (an optional tensor left out), and a tensor no op uses bound anyway."""

from compat_harness import Result


def _ptr(a):
    return a.data_ptr() if hasattr(a, "data_ptr") else a.ctypes.data


def run(h):
    cudnn = h.cudnn
    m, n, k = 16, 32, 24
    a = h.randn((1, m, k), "float32")
    b = h.randn((1, k, n), "float32")
    eps = h.host_scalar(1e-5)
    g = cudnn.pygraph(handle=h.handle, io_data_type=cudnn.data_type.FLOAT,
                      intermediate_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT)
    A, B = g.tensor_like(a), g.tensor_like(b)
    unused = g.tensor_like(eps)
    C = g.relu(input=g.matmul(A=A, B=B))
    C.set_output(True)
    bias = None
    g.validate()
    g.build_operation_graph()
    g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    g.build_plans()
    c = h.empty((1, m, n), "float32")
    ws = h.workspace(g)
    pack = {A: _ptr(a), B: b, C: _ptr(c), bias: None, unused: eps}
    g.execute(pack, _ptr(ws))
    h.sync()
    ref = h.numpy(a) @ h.numpy(b)
    ref[ref < 0] = 0
    # A float matmul runs on TF32 tensor cores on a GPU: 1e-2 of max(1, |ref|) (k = 24).
    return Result({"C": c}, {"C": ref}, 1e-2, lambda: g.execute(pack, _ptr(ws)))
