"""The tutorial's matmul -> bias -> relu in half precision, with the five pipeline steps."""

from compat_harness import Result


def run(h):
    cudnn = h.cudnn
    a = h.randn((4, 32, 64), "float16", scale=0.5)
    b = h.randn((4, 64, 16), "float16", scale=0.5)
    bias = h.randn((1, 1, 16), "float16")
    g = cudnn.pygraph(handle=h.handle, name="mm_bias_relu", io_data_type=cudnn.data_type.HALF,
                      intermediate_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT)
    A, B, BIAS = g.tensor_like(a), g.tensor_like(b), g.tensor_like(bias)
    C = g.matmul(name="mm", A=A, B=B)
    Y = g.relu(name="relu", input=g.bias(name="bias", input=C, bias=BIAS))
    Y.set_output(True).set_data_type(cudnn.data_type.HALF)
    g.validate()
    g.build_operation_graph()
    g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    g.check_support()
    g.build_plans()
    y = h.empty((4, 32, 16), "float16")
    ws = h.workspace(g)
    pack = {A: a, B: b, BIAS: bias, Y: y}
    g.execute(pack, ws, handle=h.handle)
    ref = (h.numpy(a) @ h.numpy(b) + h.numpy(bias)).clip(min=0)
    return Result({"Y": y}, {"Y": ref}, 1e-2, lambda: g.execute(pack, ws, handle=h.handle))
