"""conv_fprop then genstats of its output (the ConvBN statistics pattern): Y in half,
per-channel SUM and SQ_SUM [1,K,1,1] in float."""

from compat_harness import Result
from compat_programs import _ref


def run(h):
    cudnn = h.cudnn
    x = h.randn((4, 32, 8, 8), "float16", channels_last=True)
    w = h.randn((64, 32, 3, 3), "float16", channels_last=True, scale=0.25)
    g = cudnn.pygraph(handle=h.handle, io_data_type=cudnn.data_type.HALF,
                      intermediate_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT)
    X, W = g.tensor_like(x), g.tensor_like(w)
    Y = g.conv_fprop(image=X, weight=W, padding=[1, 1], stride=[1, 1], dilation=[1, 1],
                     compute_data_type=cudnn.data_type.FLOAT, name="conv")
    Y.set_output(True)
    SUM, SQ_SUM = g.genstats(input=Y, name="genstats")
    SUM.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    SQ_SUM.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    g.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    y = h.empty(Y.get_dim(), "float16", stride=Y.get_stride())
    s = h.empty((1, 64, 1, 1), "float32")
    sq = h.empty((1, 64, 1, 1), "float32")
    ws = h.workspace(g)
    pack = {X: x, W: w, Y: y, SUM: s, SQ_SUM: sq}
    g.execute(pack, ws)
    ref = _ref.conv2d(h.numpy(x), h.numpy(w), (1, 1), (1, 1), (1, 1))
    # The statistics of the stored (half) Y; sums of 256 values, compared relative to their size.
    yf = h.numpy(y)
    n = 256.0
    return Result({"Y": y, "SUM_per_n": s / n, "SQ_SUM_per_n": sq / n},
                  {"Y": ref, "SUM_per_n": yf.sum(axis=(0, 2, 3), keepdims=True) / n,
                   "SQ_SUM_per_n": (yf * yf).sum(axis=(0, 2, 3), keepdims=True) / n},
                  1e-2, lambda: g.execute(pack, ws))
