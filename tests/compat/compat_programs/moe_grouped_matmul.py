"""MoE grouped matmul in the frontend's call form (mode NONE, as its public tests write it):
token [1, S, K] row-major, weight [E, K, N] with each expert's [K, N] column-major (stride
[K*N, 1, K]), first_token_offset [E, 1, 1] INT32 (expert e owns rows offset[e] .. offset[e+1],
the last runs to S; here expert 2 has none), output [1, S, N] inferred."""

import numpy as np

from compat_harness import Result


def run(h):
    cudnn = h.cudnn
    E, S, K, N = 4, 96, 64, 32
    starts = np.array([0, 21, 50, 50], dtype=np.int64)
    token = h.randn((1, S, K), "bfloat16", scale=0.5)
    # weight [E, K, N] with strides [K*N, 1, K]: a transposed view of [E, N, K] memory.
    w = h.randn((E, N, K), "bfloat16", scale=0.5).swapaxes(1, 2)
    offsets = h.array(starts.reshape(E, 1, 1).astype(np.float64), "int32")
    g = cudnn.pygraph(handle=h.handle, intermediate_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT)
    T = g.tensor(name="token", dim=[1, S, K], stride=[S * K, K, 1],
                 data_type=cudnn.data_type.BFLOAT16)
    W = g.tensor(name="weight", dim=[E, K, N], stride=[K * N, 1, K],
                 data_type=cudnn.data_type.BFLOAT16)
    O = g.tensor(name="first_token_offset", dim=[E, 1, 1], stride=[1, 1, 1],
                 data_type=cudnn.data_type.INT32)
    Y = g.moe_grouped_matmul(T, W, O, mode=cudnn.moe_grouped_matmul_mode.NONE,
                             compute_data_type=cudnn.data_type.FLOAT, name="moe")
    Y.set_output(True).set_data_type(cudnn.data_type.BFLOAT16)
    g.validate()
    g.build_operation_graph()
    g.create_execution_plans([cudnn.heur_mode.A])
    g.check_support()
    g.build_plans()
    y = h.empty((1, S, N), "bfloat16")
    ws = h.workspace(g)
    pack = {T: token, W: w, O: offsets, Y: y}
    g.execute(pack, ws, handle=h.handle)
    h.sync()
    t, wn = h.numpy(token)[0], h.numpy(w)
    bounds = list(starts) + [S]
    ref = np.zeros((1, S, N))
    for e in range(E):
        ref[0, bounds[e]:bounds[e + 1]] = t[bounds[e]:bounds[e + 1]] @ wn[e]
    return Result({"Y": y}, {"Y": ref}, 2e-2, lambda: g.execute(pack, ws, handle=h.handle))
