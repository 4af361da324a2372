"""conv_fprop on channels-last half tensors with padding, stride and dilation, then ReLU."""

from compat_harness import Result
from compat_programs import _ref


def run(h):
    cudnn = h.cudnn
    x = h.randn((2, 16, 12, 12), "float16", channels_last=True)
    w = h.randn((32, 16, 3, 3), "float16", channels_last=True, scale=0.25)
    g = cudnn.pygraph(handle=h.handle, io_data_type=cudnn.data_type.HALF,
                      intermediate_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT)
    X, W = g.tensor_like(x), g.tensor_like(w)
    conv = g.conv_fprop(image=X, weight=W, padding=[1, 1], stride=[2, 2], dilation=[1, 1],
                        compute_data_type=cudnn.data_type.FLOAT, name="conv")
    Y = g.relu(input=conv)
    Y.set_output(True)
    g.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    dims = Y.get_dim()
    y = h.empty(dims, "float16", stride=Y.get_stride())
    ws = h.workspace(g)
    pack = {X: x, W: w, Y: y}
    g.execute(pack, ws)
    ref = _ref.conv2d(h.numpy(x), h.numpy(w), (1, 1), (2, 2), (1, 1)).clip(min=0)
    return Result({"Y": y}, {"Y": ref}, 1e-2, lambda: g.execute(pack, ws))
