"""conv_dgrad and conv_wgrad (output dims given with set_dim) in two graphs."""

from compat_harness import Result
from compat_programs import _ref


def grad(h, op, ins, shape, **kw):
    """g.<op> (dgrad or wgrad) on ins {keyword: fp16 array} into a channels-last fp16 output of
    shape given with set_dim / set_stride, in a graph with no intermediate data type."""
    cudnn = h.cudnn
    g = cudnn.pygraph(handle=h.handle, io_data_type=cudnn.data_type.HALF,
                      compute_data_type=cudnn.data_type.FLOAT)
    tensors = {key: g.tensor_like(a) for key, a in ins.items()}
    OUT = getattr(g, op)(**tensors, **kw)
    n, c, hh, ww = shape
    stride = [c * hh * ww, 1, ww * c, c]
    OUT.set_output(True).set_dim(list(shape)).set_stride(stride)
    g.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    out = h.empty(shape, "float16", stride=tuple(stride))
    pack = {tensors[key]: a for key, a in ins.items()}
    pack[OUT] = out
    g.execute(pack, h.workspace(g))
    return out


def run(h):
    n, c, hh, k, r = 2, 8, 10, 16, 3
    dy = h.randn((n, k, hh, hh), "float16", channels_last=True)
    w = h.randn((k, c, r, r), "float16", channels_last=True, scale=0.25)
    x = h.randn((n, c, hh, hh), "float16", channels_last=True)
    kw = dict(padding=[1, 1], stride=[1, 1], dilation=[1, 1])
    dx = grad(h, "conv_dgrad", {"loss": dy, "filter": w}, (n, c, hh, hh), **kw)
    dw = grad(h, "conv_wgrad", {"image": x, "loss": dy}, (k, c, r, r), **kw)

    ref_dx = _ref.conv2d_dgrad(h.numpy(dy), h.numpy(w), (n, c, hh, hh), (1, 1), (1, 1), (1, 1))
    ref_dw = _ref.conv2d_wgrad(h.numpy(x), h.numpy(dy), (k, c, r, r), (1, 1), (1, 1), (1, 1))
    # wgrad sums n*h*w = 200 products per element; the tolerance is relative to |DW| > 1.
    return Result({"DX": dx, "DW": dw}, {"DX": ref_dx, "DW": ref_dw}, 2e-2)
