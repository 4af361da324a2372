"""Dynamic-shape convolutions sharing a kernel cache (create_kernel_cache, pygraph(kernel_cache=,
is_dynamic_shape_enabled=True)); on a GPU the cache is serialized and deserialized in place into
a fresh cache, which a graph of another batch size then builds with. The CPU reference engine
compiles nothing, so there the second graph shares the first cache as it is."""

from compat_harness import Result
from compat_programs import _ref


def conv(h, cache, n):
    cudnn = h.cudnn
    x = h.randn((n, 16, 8, 8), "float16", channels_last=True)
    w = h.randn((32, 16, 3, 3), "float16", channels_last=True, scale=0.25)
    g = cudnn.pygraph(handle=h.handle, io_data_type=cudnn.data_type.HALF,
                      intermediate_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT, kernel_cache=cache,
                      is_dynamic_shape_enabled=True)
    X, W = g.tensor_like(x), g.tensor_like(w)
    Y = g.conv_fprop(image=X, weight=W, padding=[1, 1], stride=[1, 1], dilation=[1, 1],
                     compute_data_type=cudnn.data_type.FLOAT, name="conv")
    Y.set_output(True).set_data_type(cudnn.data_type.HALF)
    g.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    y = h.empty(Y.get_dim(), "float16", stride=Y.get_stride())
    ws = h.workspace(g)
    pack = {X: x, W: w, Y: y}
    g.execute(pack, ws)
    ref = _ref.conv2d(h.numpy(x), h.numpy(w), (1, 1), (1, 1), (1, 1))
    return y, ref, lambda: g.execute(pack, ws)


def run(h):
    cudnn = h.cudnn
    first = cudnn.create_kernel_cache()
    y2, ref2, _ = conv(h, first, 2)
    notes = {}
    if h.device == "cpu":
        carried = first
    else:
        data = first.serialize()  # bytes here, the frontend's str of cuDNN's JSON there
        carried = cudnn.create_kernel_cache()
        carried.deserialize(data)
        notes["serialized"] = f"{type(data).__name__} of {len(data)}"
    y5, ref5, again = conv(h, carried, 5)
    return Result({"Y2": y2, "Y5": y5}, {"Y2": ref2, "Y5": ref5}, 1e-2, again, notes=notes)
