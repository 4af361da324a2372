"""torch dtypes wherever a data type is taken (pygraph, tensor, set_data_type, compute type)."""

from compat_harness import Result, torch


def run(h):
    if torch is None:
        return None  # needs torch
    cudnn = h.cudnn
    a, b = h.randn((2, 8, 32), "bfloat16"), h.randn((2, 32, 8), "bfloat16")
    g = cudnn.pygraph(handle=h.handle, io_data_type=torch.bfloat16,
                      intermediate_data_type=torch.float32, compute_data_type=torch.float32)
    A = g.tensor(name="A", dim=list(a.shape), stride=list(a.stride()), data_type=torch.bfloat16)
    B = g.tensor_like(b)
    C = g.matmul(A=A, B=B, compute_data_type=torch.float32)
    Y = g.relu(input=C)
    Y.set_output(True).set_data_type(torch.bfloat16)
    g.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    y = h.empty((2, 8, 8), "bfloat16")
    ws = h.workspace(g)
    g.execute({A: a, B: b, Y: y}, ws)
    ref = (h.numpy(a) @ h.numpy(b)).clip(min=0)
    return Result({"Y": y}, {"Y": ref}, 2e-2, lambda: g.execute({A: a, B: b, Y: y}, ws))
