"""conv_fprop on channels-last half tensors with padding, stride and dilation, then ReLU."""

from compat_harness import Result
from compat_programs import _graph, _ref


def conv(h, x_shape, w_shape, stride):
    """Random channels-last fp16 x and w (w scaled by 1/4), and a graph of their conv_fprop
    (padding 1, dilation 1). Returns x, w, the graph, X, W and the conv's output."""
    x = h.randn(x_shape, "float16", channels_last=True)
    w = h.randn(w_shape, "float16", channels_last=True, scale=0.25)
    g = _graph.graph(h)
    X, W = g.tensor_like(x), g.tensor_like(w)
    Y = g.conv_fprop(image=X, weight=W, padding=[1, 1], stride=stride, dilation=[1, 1],
                     compute_data_type=h.cudnn.data_type.FLOAT, name="conv")
    return x, w, g, X, W, Y


def run(h):
    x, w, g, X, W, conv_out = conv(h, (2, 16, 12, 12), (32, 16, 3, 3), [2, 2])
    Y = g.relu(input=conv_out)
    Y.set_output(True)
    _graph.build(h, g)
    y = h.empty(Y.get_dim(), "float16", stride=Y.get_stride())
    again = _graph.launch(h, g, {X: x, W: w, Y: y})
    ref = _ref.conv2d(h.numpy(x), h.numpy(w), (1, 1), (2, 2), (1, 1)).clip(min=0)
    return Result({"Y": y}, {"Y": ref}, 1e-2, again)
