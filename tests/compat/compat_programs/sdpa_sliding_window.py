"""SDPA forward with a causal sliding window (diagonal_band_left_bound = W: each query sees the
W keys ending on its diagonal), as the frontend's sliding-window tests build it."""

import math

import numpy as np

from compat_harness import Result
from compat_programs import _sdpa


def run(h):
    cudnn = h.cudnn
    b, nh, s, d, window = 2, 2, 64, 64, 9
    q, k, v = (h.randn((b, nh, s, d), "float16") for _ in range(3))
    scale = 1.0 / math.sqrt(d)
    o, st, again = _sdpa.forward(h, q, k, v, scale,
                                 diagonal_alignment=cudnn.diagonal_alignment.TOP_LEFT,
                                 diagonal_band_left_bound=window, diagonal_band_right_bound=0)

    qn, kn, vn = h.numpy(q), h.numpy(k), h.numpy(v)
    sc = np.einsum("bhqd,bhkd->bhqk", qn, kn) * scale
    row, col = np.arange(s)[:, None], np.arange(s)[None, :]
    keep = (col <= row) & (col > row - window)  # W keys ending on the diagonal
    sc = np.where(keep, sc, -np.inf)
    m = sc.max(-1, keepdims=True)
    lse = m + np.log(np.exp(sc - m).sum(-1, keepdims=True))
    ref_o = np.einsum("bhqk,bhkd->bhqd", np.exp(sc - lse), vn)
    return Result({"O": o, "Stats": st}, {"O": ref_o, "Stats": lse}, 1e-2, again)
