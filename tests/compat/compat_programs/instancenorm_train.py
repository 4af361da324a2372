"""Instance norm training forward and backward on NHWC half data (float scale, bias and
statistics [N,C,1,1]), epsilon as a host pass-by-value tensor."""

from compat_harness import Result
from compat_programs import _norm_ref


def run(h):
    cudnn = h.cudnn
    n, c, hh, ww = 4, 32, 8, 8
    x = h.randn((n, c, hh, ww), "float16", channels_last=True)
    scale = h.randn((1, c, 1, 1), "float32")
    bias = h.randn((1, c, 1, 1), "float32")
    eps = h.host_scalar(1e-5)
    g = cudnn.pygraph(handle=h.handle, io_data_type=cudnn.data_type.HALF,
                      intermediate_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT)
    X, S, B, E = g.tensor_like(x), g.tensor_like(scale), g.tensor_like(bias), g.tensor_like(eps)
    Y, mean, inv_var = g.instancenorm(name="IN",
                                      norm_forward_phase=cudnn.norm_forward_phase.TRAINING,
                                      input=X, scale=S, bias=B, epsilon=E)
    Y.set_output(True).set_data_type(cudnn.data_type.HALF)
    mean.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    inv_var.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    g.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    y = h.empty((n, c, hh, ww), "float16", stride=(c * hh * ww, 1, ww * c, c))
    m = h.empty((n, c, 1, 1), "float32", stride=(c, 1, c, c))
    iv = h.empty((n, c, 1, 1), "float32", stride=(c, 1, c, c))
    ws = h.workspace(g)
    pack = {X: x, S: scale, B: bias, E: eps, Y: y, mean: m, inv_var: iv}
    g.execute(pack, ws)

    # Backward from the forward's statistics.
    dy = h.randn((n, c, hh, ww), "float16", channels_last=True)
    gb = cudnn.pygraph(handle=h.handle, io_data_type=cudnn.data_type.HALF,
                       intermediate_data_type=cudnn.data_type.FLOAT,
                       compute_data_type=cudnn.data_type.FLOAT)
    DY, X2, S2 = gb.tensor_like(dy), gb.tensor_like(x), gb.tensor_like(scale)
    M2, IV2 = gb.tensor_like(m), gb.tensor_like(iv)
    DX, DS, DB = gb.instancenorm_backward(name="DIN", grad=DY, input=X2, scale=S2, mean=M2,
                                          inv_variance=IV2)
    DX.set_output(True).set_data_type(cudnn.data_type.HALF)
    DS.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    DB.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    gb.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    dx = h.empty((n, c, hh, ww), "float16", stride=(c * hh * ww, 1, ww * c, c))
    ds = h.empty((1, c, 1, 1), "float32")
    db = h.empty((1, c, 1, 1), "float32")
    wsb = h.workspace(gb)
    gb.execute({DY: dy, X2: x, S2: scale, M2: m, IV2: iv, DX: dx, DS: ds, DB: db}, wsb)

    xf, sf, bf = h.numpy(x), h.numpy(scale), h.numpy(bias)
    ref, mu, ri = _norm_ref.forward(xf, (2, 3), sf, bf, 1e-5)
    rdx, rds, rdb = _norm_ref.backward(h.numpy(dy), xf, (2, 3), sf, mu, ri)
    # dscale / dbias sum n*h*w = 256 half-precision products: relative to their size.
    return Result({"Y": y, "mean": m, "inv_var": iv, "DX": dx, "DScale": ds / 16, "DBias": db / 16},
                  {"Y": ref, "mean": mu, "inv_var": ri, "DX": rdx, "DScale": rds / 16,
                   "DBias": rdb / 16}, 1e-2, lambda: g.execute(pack, ws))
