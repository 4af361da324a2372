"""Instance norm training forward and backward on NHWC half data (float scale, bias and
statistics [N,C,1,1]), epsilon as a host pass-by-value tensor."""

from compat_harness import Result
from compat_programs import _norm, _norm_ref


def run(h):
    n, c, hh, ww = 4, 32, 8, 8
    nhwc = (c * hh * ww, 1, ww * c, c)
    x = h.randn((n, c, hh, ww), "float16", channels_last=True)
    scale = h.randn((1, c, 1, 1), "float32")
    bias = h.randn((1, c, 1, 1), "float32")
    eps = h.host_scalar(1e-5)
    y = h.empty((n, c, hh, ww), "float16", stride=nhwc)
    m = h.empty((n, c, 1, 1), "float32", stride=(c, 1, c, c))
    iv = h.empty((n, c, 1, 1), "float32", stride=(c, 1, c, c))
    again = _norm.forward(h, "instancenorm", "IN", (x, scale, bias, eps), (y, m, iv))

    # Backward from the forward's statistics.
    dy = h.randn((n, c, hh, ww), "float16", channels_last=True)
    dx = h.empty((n, c, hh, ww), "float16", stride=nhwc)
    ds, db = h.empty((1, c, 1, 1), "float32"), h.empty((1, c, 1, 1), "float32")
    _norm.backward(h, "instancenorm", "DIN", (dy, x, scale, m, iv), (dx, ds, db))

    xf, sf, bf = h.numpy(x), h.numpy(scale), h.numpy(bias)
    ref, mu, ri = _norm_ref.forward(xf, (2, 3), sf, bf, 1e-5)
    rdx, rds, rdb = _norm_ref.backward(h.numpy(dy), xf, (2, 3), sf, mu, ri)
    # dscale / dbias sum n*h*w = 256 half-precision products: relative to their size.
    return Result({"Y": y, "mean": m, "inv_var": iv, "DX": dx, "DScale": ds / 16, "DBias": db / 16},
                  {"Y": ref, "mean": mu, "inv_var": ri, "DX": rdx, "DScale": rds / 16,
                   "DBias": rdb / 16}, 1e-2, again)
