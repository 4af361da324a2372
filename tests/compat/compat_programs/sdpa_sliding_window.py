"""SDPA forward with a causal sliding window (diagonal_band_left_bound = W: each query sees the
W keys ending on its diagonal), as the frontend's sliding-window tests build it."""

import math

import numpy as np

from compat_harness import Result


def run(h):
    cudnn = h.cudnn
    b, nh, s, d, window = 2, 2, 64, 64, 9
    q, k, v = (h.randn((b, nh, s, d), "float16") for _ in range(3))
    scale = 1.0 / math.sqrt(d)
    g = cudnn.pygraph(handle=h.handle, io_data_type=cudnn.data_type.HALF,
                      intermediate_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT)
    Q, K, V = g.tensor_like(q), g.tensor_like(k), g.tensor_like(v)
    O, Stats = g.sdpa(name="sdpa", q=Q, k=K, v=V, generate_stats=True, attn_scale=scale,
                      diagonal_alignment=cudnn.diagonal_alignment.TOP_LEFT,
                      diagonal_band_left_bound=window, diagonal_band_right_bound=0)
    O.set_output(True).set_dim([b, nh, s, d]).set_stride([nh * s * d, s * d, d, 1])
    Stats.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    g.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    o = h.empty((b, nh, s, d), "float16")
    st = h.empty((b, nh, s, 1), "float32")
    ws = h.workspace(g)
    pack = {Q: q, K: k, V: v, O: o, Stats: st}
    g.execute(pack, ws)

    qn, kn, vn = h.numpy(q), h.numpy(k), h.numpy(v)
    sc = np.einsum("bhqd,bhkd->bhqk", qn, kn) * scale
    row, col = np.arange(s)[:, None], np.arange(s)[None, :]
    keep = (col <= row) & (col > row - window)  # W keys ending on the diagonal
    sc = np.where(keep, sc, -np.inf)
    m = sc.max(-1, keepdims=True)
    lse = m + np.log(np.exp(sc - m).sum(-1, keepdims=True))
    ref_o = np.einsum("bhqk,bhkd->bhqd", np.exp(sc - lse), vn)
    return Result({"O": o, "Stats": st}, {"O": ref_o, "Stats": lse}, 1e-2,
                  lambda: g.execute(pack, ws))
