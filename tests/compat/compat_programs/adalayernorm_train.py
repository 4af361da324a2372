"""Adaptive layer norm (per-sample scale and bias [B,1,D], statistics [B,S,1]) training forward
and backward, bfloat16 data, float scale and bias."""

from compat_harness import Result
from compat_programs import _norm, _norm_ref


def run(h):
    b, s, d = 2, 16, 64
    x = h.randn((b, s, d), "bfloat16")
    scale = h.randn((b, 1, d), "float32")
    bias = h.randn((b, 1, d), "float32")
    eps = h.host_scalar(1e-5).reshape(1, 1, 1)
    y = h.empty((b, s, d), "bfloat16")
    m = h.empty((b, s, 1), "float32")
    iv = h.empty((b, s, 1), "float32")
    again = _norm.forward(h, "adalayernorm", "AdaLN", (x, scale, bias, eps), (y, m, iv),
                          io="BFLOAT16")

    dy = h.randn((b, s, d), "bfloat16")
    dx = h.empty((b, s, d), "bfloat16")
    ds, db = h.empty((b, 1, d), "float32"), h.empty((b, 1, d), "float32")
    _norm.backward(h, "adalayernorm", "DAdaLN", (dy, x, scale, m, iv), (dx, ds, db),
                   io="BFLOAT16")

    xf, sf, bf = h.numpy(x), h.numpy(scale), h.numpy(bias)
    ref, mu, ri = _norm_ref.forward(xf, (2,), sf, bf, 1e-5)
    rdx, rds, rdb = _norm_ref.backward(h.numpy(dy), xf, (2,), sf, mu, ri)
    return Result({"Y": y, "mean": m, "inv_var": iv, "DX": dx, "DScale": ds / 4, "DBias": db / 4},
                  {"Y": ref, "mean": mu, "inv_var": ri, "DX": rdx, "DScale": rds / 4,
                   "DBias": rdb / 4}, 2e-2, again)
