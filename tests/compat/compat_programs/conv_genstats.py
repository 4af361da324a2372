"""conv_fprop then genstats of its output (the ConvBN statistics pattern): Y in half,
per-channel SUM and SQ_SUM [1,K,1,1] in float."""

from compat_harness import Result
from compat_programs import _graph, _ref
from compat_programs.conv_fprop_nhwc import conv


def run(h):
    cudnn = h.cudnn
    x, w, g, X, W, Y = conv(h, (4, 32, 8, 8), (64, 32, 3, 3), [1, 1])
    Y.set_output(True)
    SUM, SQ_SUM = g.genstats(input=Y, name="genstats")
    SUM.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    SQ_SUM.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    _graph.build(h, g)
    y = h.empty(Y.get_dim(), "float16", stride=Y.get_stride())
    s = h.empty((1, 64, 1, 1), "float32")
    sq = h.empty((1, 64, 1, 1), "float32")
    again = _graph.launch(h, g, {X: x, W: w, Y: y, SUM: s, SQ_SUM: sq})
    ref = _ref.conv2d(h.numpy(x), h.numpy(w), (1, 1), (1, 1), (1, 1))
    # The statistics of the stored (half) Y; sums of 256 values, compared relative to their size.
    yf = h.numpy(y)
    n = 256.0
    return Result({"Y": y, "SUM_per_n": s / n, "SQ_SUM_per_n": sq / n},
                  {"Y": ref, "SUM_per_n": yf.sum(axis=(0, 2, 3), keepdims=True) / n,
                   "SQ_SUM_per_n": (yf * yf).sum(axis=(0, 2, 3), keepdims=True) / n},
                  1e-2, again)
