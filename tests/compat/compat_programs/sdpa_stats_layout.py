"""SDPA forward on Q/K/V/O stored [b, s, h, d] (a transposed view, as models hold them) with
generate_stats=True: Stats is given no dims, the frontend fills packed [b, h, s_q, 1], and the
program allocates exactly that."""

import math

from compat_harness import Result
from compat_programs import _ref


def run(h):
    cudnn = h.cudnn
    b, nh, s, d = 2, 3, 64, 64
    # [b, s, h, d] in memory, seen as [b, h, s, d].
    q, k, v = (h.randn((b, s, nh, d), "float16").swapaxes(1, 2) for _ in range(3))
    scale = 1.0 / math.sqrt(d)
    g = cudnn.pygraph(handle=h.handle, io_data_type=cudnn.data_type.HALF,
                      intermediate_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT)
    Q, K, V = g.tensor_like(q), g.tensor_like(k), g.tensor_like(v)
    O, Stats = g.sdpa(name="sdpa", q=Q, k=K, v=V, generate_stats=True, attn_scale=scale)
    O.set_output(True).set_dim([b, nh, s, d]).set_stride([s * nh * d, d, nh * d, 1])
    Stats.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    g.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    o = h.empty((b, nh, s, d), "float16", stride=(s * nh * d, d, nh * d, 1))
    st = h.empty((b, nh, s, 1), "float32")  # packed, as frontend users allocate it
    ws = h.workspace(g)
    pack = {Q: q, K: k, V: v, O: o, Stats: st}
    g.execute(pack, ws)
    ref_o, lse, _ = _ref.attention(h.numpy(q), h.numpy(k), h.numpy(v), scale, False)
    return Result({"O": o, "Stats": st}, {"O": ref_o, "Stats": lse}, 1e-2,
                  lambda: g.execute(pack, ws))
