"""SDPA forward with the frontend's side outputs score_max / score_sum_exp (the row max of the
masked scores and the row sum of exp(score - max)), in the form cuDNN's composite softmax takes
them: generate_stats=False, both tensors made by the caller ([b, h, s_q, 1] FLOAT) and passed
in. Causal, GQA, padded keys (every query keeps a key, so every row is finite)."""

import math

import numpy as np

from compat_harness import Result


def run(h):
    cudnn = h.cudnn
    b, hq, hk, s, d = 2, 4, 2, 64, 64
    q = h.randn((b, hq, s, d), "float16")
    k, v = (h.randn((b, hk, s, d), "float16") for _ in range(2))
    lens_kv = [64, 37]
    seq_q = h.array(np.full((b, 1, 1, 1), s, np.float64), "int32")
    seq_kv = h.array(np.array(lens_kv, np.float64).reshape(b, 1, 1, 1), "int32")
    scale = 1.0 / math.sqrt(d)

    g = cudnn.pygraph(handle=h.handle, io_data_type=cudnn.data_type.HALF,
                      intermediate_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT)
    Q, K, V = g.tensor_like(q), g.tensor_like(k), g.tensor_like(v)
    SQ, SKV = g.tensor_like(seq_q), g.tensor_like(seq_kv)
    MX = g.tensor(name="score_max", dim=[b, hq, s, 1], stride=[hq * s, s, 1, 1],
                  data_type=cudnn.data_type.FLOAT)
    SE = g.tensor(name="score_sum_exp", dim=[b, hq, s, 1], stride=[hq * s, s, 1, 1],
                  data_type=cudnn.data_type.FLOAT)
    O, _ = g.sdpa(name="sdpa", q=Q, k=K, v=V, generate_stats=False, attn_scale=scale,
                  use_causal_mask=True, use_padding_mask=True, seq_len_q=SQ, seq_len_kv=SKV,
                  score_max=MX, score_sum_exp=SE)
    O.set_output(True).set_dim([b, hq, s, d]).set_stride([hq * s * d, s * d, d, 1])
    MX.set_output(True)
    SE.set_output(True)
    g.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    o = h.empty((b, hq, s, d), "float16")
    mx, se = h.empty((b, hq, s, 1), "float32"), h.empty((b, hq, s, 1), "float32")
    pack = {Q: q, K: k, V: v, SQ: seq_q, SKV: seq_kv, O: o, MX: mx, SE: se}
    ws = h.workspace(g)
    g.execute(pack, ws)

    qf, kf, vf = (np.repeat(h.numpy(t), hq // t.shape[1], axis=1) for t in (q, k, v))
    sc = np.einsum("bhqd,bhkd->bhqk", qf, kf) * scale
    keep = np.tril(np.ones((s, s), bool))[None, None] & (
        np.arange(s)[None, None, None, :] < np.array(lens_kv).reshape(b, 1, 1, 1))
    sc = np.where(keep, sc, -np.inf)
    m = sc.max(-1, keepdims=True)
    e = np.exp(sc - m)
    total = e.sum(-1, keepdims=True)
    o_ref = np.einsum("bhqk,bhkd->bhqd", e / total, vf)
    # sum_exp runs up to s_kv: compared relative to its size like every output.
    return Result({"O": o, "score_max": mx, "score_sum_exp": se},
                  {"O": o_ref, "score_max": m, "score_sum_exp": total}, 1e-2,
                  lambda: g.execute(pack, ws))
