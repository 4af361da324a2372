"""Adaptive layer norm (per-sample scale and bias [B,1,D], statistics [B,S,1]) training forward
and backward, bfloat16 data, float scale and bias."""

from compat_harness import Result
from compat_programs import _norm_ref


def run(h):
    cudnn = h.cudnn
    b, s, d = 2, 16, 64
    x = h.randn((b, s, d), "bfloat16")
    scale = h.randn((b, 1, d), "float32")
    bias = h.randn((b, 1, d), "float32")
    eps = h.host_scalar(1e-5)
    g = cudnn.pygraph(handle=h.handle, io_data_type=cudnn.data_type.BFLOAT16,
                      intermediate_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT)
    eps = eps.reshape(1, 1, 1)
    X, S, B, E = g.tensor_like(x), g.tensor_like(scale), g.tensor_like(bias), g.tensor_like(eps)
    Y, mean, inv_var = g.adalayernorm(name="AdaLN",
                                      norm_forward_phase=cudnn.norm_forward_phase.TRAINING,
                                      input=X, scale=S, bias=B, epsilon=E)
    Y.set_output(True).set_data_type(cudnn.data_type.BFLOAT16)
    mean.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    inv_var.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    g.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    y = h.empty((b, s, d), "bfloat16")
    m = h.empty((b, s, 1), "float32")
    iv = h.empty((b, s, 1), "float32")
    ws = h.workspace(g)
    pack = {X: x, S: scale, B: bias, E: eps, Y: y, mean: m, inv_var: iv}
    g.execute(pack, ws)

    dy = h.randn((b, s, d), "bfloat16")
    gb = cudnn.pygraph(handle=h.handle, io_data_type=cudnn.data_type.BFLOAT16,
                       intermediate_data_type=cudnn.data_type.FLOAT,
                       compute_data_type=cudnn.data_type.FLOAT)
    DY, X2, S2 = gb.tensor_like(dy), gb.tensor_like(x), gb.tensor_like(scale)
    M2, IV2 = gb.tensor_like(m), gb.tensor_like(iv)
    DX, DS, DB = gb.adalayernorm_backward(name="DAdaLN", grad=DY, input=X2, scale=S2, mean=M2,
                                          inv_variance=IV2)
    DX.set_output(True).set_data_type(cudnn.data_type.BFLOAT16)
    DS.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    DB.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    gb.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    dx = h.empty((b, s, d), "bfloat16")
    ds = h.empty((b, 1, d), "float32")
    db = h.empty((b, 1, d), "float32")
    wsb = h.workspace(gb)
    gb.execute({DY: dy, X2: x, S2: scale, M2: m, IV2: iv, DX: dx, DS: ds, DB: db}, wsb)

    xf, sf, bf = h.numpy(x), h.numpy(scale), h.numpy(bias)
    ref, mu, ri = _norm_ref.forward(xf, (2,), sf, bf, 1e-5)
    rdx, rds, rdb = _norm_ref.backward(h.numpy(dy), xf, (2,), sf, mu, ri)
    return Result({"Y": y, "mean": m, "inv_var": iv, "DX": dx, "DScale": ds / 4, "DBias": db / 4},
                  {"Y": ref, "mean": mu, "inv_var": ri, "DX": rdx, "DScale": rds / 4,
                   "DBias": rdb / 4}, 2e-2, lambda: g.execute(pack, ws))
