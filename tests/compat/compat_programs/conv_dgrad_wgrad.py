"""conv_dgrad and conv_wgrad (output dims given with set_dim) in two graphs."""

from compat_harness import Result
from compat_programs import _ref


def run(h):
    cudnn = h.cudnn
    n, c, hh, k, r = 2, 8, 10, 16, 3
    dy = h.randn((n, k, hh, hh), "float16", channels_last=True)
    w = h.randn((k, c, r, r), "float16", channels_last=True, scale=0.25)
    x = h.randn((n, c, hh, hh), "float16", channels_last=True)
    kw = dict(padding=[1, 1], stride=[1, 1], dilation=[1, 1])

    gd = cudnn.pygraph(handle=h.handle, io_data_type=cudnn.data_type.HALF,
                       compute_data_type=cudnn.data_type.FLOAT)
    DY, W = gd.tensor_like(dy), gd.tensor_like(w)
    DX = gd.conv_dgrad(loss=DY, filter=W, **kw)
    DX.set_output(True).set_dim([n, c, hh, hh]).set_stride([c * hh * hh, 1, hh * c, c])
    gd.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    dx = h.empty((n, c, hh, hh), "float16", stride=(c * hh * hh, 1, hh * c, c))
    gd.execute({DY: dy, W: w, DX: dx}, h.workspace(gd))

    gw = cudnn.pygraph(handle=h.handle, io_data_type=cudnn.data_type.HALF,
                       compute_data_type=cudnn.data_type.FLOAT)
    X, DY2 = gw.tensor_like(x), gw.tensor_like(dy)
    DW = gw.conv_wgrad(image=X, loss=DY2, **kw)
    DW.set_output(True).set_dim([k, c, r, r]).set_stride([c * r * r, 1, r * c, c])
    gw.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    dw = h.empty((k, c, r, r), "float16", stride=(c * r * r, 1, r * c, c))
    gw.execute({X: x, DY2: dy, DW: dw}, h.workspace(gw))

    ref_dx = _ref.conv2d_dgrad(h.numpy(dy), h.numpy(w), (n, c, hh, hh), (1, 1), (1, 1), (1, 1))
    ref_dw = _ref.conv2d_wgrad(h.numpy(x), h.numpy(dy), (k, c, r, r), (1, 1), (1, 1), (1, 1))
    # wgrad sums n*h*w = 200 products per element; the tolerance is relative to |DW| > 1.
    return Result({"DX": dx, "DW": dw}, {"DX": ref_dx, "DW": ref_dw}, 2e-2)
