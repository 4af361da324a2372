"""block_scale_quantize(input, block_size=16) to NVFP4 as a frontend user writes it: Y in
FP4_E2M1 received in a uint8 array with the row length halved (two FP4 values per byte, the
even element in the low nibble), and one FP8_E4M3 scale per 16 elements of a row (the scale is
amax / 6 rounded up to an E4M3 value, as cuDNN's block-scaling docs write it; Y = X / scale
rounded to nearest even). cuDNN runs FP4 only on GPUs with FP4 tensor cores: on others both
libraries refuse it (cudnnGraphNotSupportedError); the CPU reference engine runs it."""

import numpy as np

from compat_harness import Result
from compat_programs.block_scale_quantize_mx import quantize

# E2M1 values of the codes 0-15.
_FP4 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6])
_MAGS = _FP4[:8]


def _decode(packed):
    b = packed.astype(np.uint8)
    out = np.empty(b.shape[:-1] + (b.shape[-1] * 2,))
    out[..., 0::2], out[..., 1::2] = _FP4[b & 0xF], _FP4[b >> 4]
    return out


def _round_fp4(q):
    """Nearest E2M1 value (ties to the even code), saturated at 6."""
    a = np.minimum(np.abs(q), 6.0)[..., None]
    d = np.abs(a - _MAGS)
    best = np.argmin(d + (np.arange(8) % 2) * 1e-12, axis=-1)  # ties: the even code wins
    return np.copysign(_MAGS[best], q)


def _e4m3_values():
    """The positive finite E4M3 values, ascending (bias 7, subnormals below 2^-6)."""
    vals = [m / 8 * 2.0 ** -6 for m in range(1, 8)]
    vals += [(1 + m / 8) * 2.0 ** (e - 7) for e in range(1, 16) for m in range(8)
             if not (e == 15 and m == 7)]
    return np.array(vals)


def run(h):
    m, k, block = 64, 128, 16
    y = h.empty((m, k // 2), "uint8")  # the packed bytes: two FP4 values each
    (y.fill_ if hasattr(y, "fill_") else y.fill)(0xEE)  # poison: -4 in both nibbles
    s = h.empty((m, k // block), "float8_e4m3fn")
    x, again = quantize(h, m, k, block, "nvfp4", ("FP4_E2M1", "FP8_E4M3"), y, s)
    xf = h.numpy(x).reshape(m, k // block, block)
    amax = np.abs(xf).max(axis=-1, keepdims=True) / 6
    e4m3 = _e4m3_values()
    scale = e4m3[np.searchsorted(e4m3, np.minimum(amax, 448.0), side="left")]
    want_y = _round_fp4(xf / scale).reshape(m, k)
    got_y = _decode(h.numpy(y))
    # Y decoded from its nibbles and the scales are compared exactly (tolerance 0).
    return Result({"Y": got_y, "S": s}, {"Y": want_y, "S": scale[..., 0]}, 0.0, again)
