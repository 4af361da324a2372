"""block_scale_quantize(input, block_size=32) to MXFP8: Y in FP8_E4M3 and one FP8_E8M0 scale
per 32 elements of a row (the OCP MX rule: 2^(floor(log2(amax)) - 8), Y = X / scale saturated
at 448). cuDNN runs block scaling on GPUs with block-scaled tensor cores: on others both
libraries refuse it (cudnnGraphNotSupportedError); the CPU reference engine runs it."""

import numpy as np

from compat_harness import Result
from compat_programs import _graph


def quantize(h, m, k, block, name, types, y, s):
    """block_scale_quantize of a random fp32 x [m, k] into y and its scales s (data types
    types). Returns x and a function that executes again."""
    x = h.randn((m, k), "float32")
    g = _graph.graph(h, "FLOAT")
    X = g.tensor_like(x)
    Y, S = g.block_scale_quantize(input=X, block_size=block, name=name)
    Y.set_output(True).set_data_type(getattr(h.cudnn.data_type, types[0]))
    S.set_output(True).set_data_type(getattr(h.cudnn.data_type, types[1]))
    return x, _graph.finish(h, g, {X: x, Y: y, S: s})


def run(h):
    m, k, block = 64, 128, 32
    y = h.empty((m, k), "float8_e4m3fn")
    s = h.empty((m, k // block), "float8_e8m0fnu")
    x, again = quantize(h, m, k, block, "mx", ("FP8_E4M3", "FP8_E8M0"), y, s)
    xf = h.numpy(x).reshape(m, k // block, block)
    amax = np.abs(xf).max(axis=-1, keepdims=True)
    _, e = np.frexp(np.where(amax > 0, amax, 1.0))
    scale = np.exp2(np.where(amax > 0, e - 1 - 8, -127).clip(-127, 127).astype(np.float64))
    want_y = np.clip(xf / scale, -448.0, 448.0).reshape(m, k)
    # Y is compared within FP8_E4M3's rounding (3 mantissa bits), the scales exactly.
    return Result({"Y": y, "S": s}, {"Y": want_y, "S": scale[..., 0]}, 0.07, again)
