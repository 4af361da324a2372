"""Serving: ragged prefill. Four prompts of different lengths packed token after token (THD)
in Q, K, V and O buffers of exactly the token total, causal, grouped-query (8 query heads over
2 K/V heads), bf16, as a serving engine calls the frontend's sdpa with ragged offsets and
sequence lengths."""

import math

from compat_harness import Result
from compat_programs import _serve


def run(h):
    lens = [37, 128, 5, 90]
    hq, hk, d = 8, 2, 64
    scale = 1.0 / math.sqrt(d)
    q = _serve.Packed(h, lens, hq, d, "bfloat16")
    k = _serve.Packed(h, lens, hk, d, "bfloat16")
    v = _serve.Packed(h, lens, hk, d, "bfloat16")
    o = _serve.Packed(h, lens, hq, d, "bfloat16", values=False)
    seq = _serve.lengths(h, lens)

    g = _serve.graph(h)
    RQ, RKV = g.tensor_like(q.offsets), g.tensor_like(k.offsets)
    SQ, SKV = g.tensor_like(seq), g.tensor_like(seq)
    Q = _serve.ragged_tensor(g, h, "Q", q, RQ)
    K = _serve.ragged_tensor(g, h, "K", k, RKV)
    V = _serve.ragged_tensor(g, h, "V", v, RKV)
    O, _ = g.sdpa(name="prefill", q=Q, k=K, v=V, generate_stats=False, attn_scale=scale,
                  use_causal_mask=True, use_padding_mask=True, seq_len_q=SQ, seq_len_kv=SKV)
    O.set_output(True).set_dim(o.dims()).set_stride(o.strides()).set_ragged_offset(RQ)
    O.set_data_type(h.cudnn.data_type.BFLOAT16)
    g.build([h.cudnn.heur_mode.A, h.cudnn.heur_mode.FALLBACK])
    pack = {Q: q.array, K: k.array, V: v.array, O: o.array, RQ: q.offsets, RKV: k.offsets,
            SQ: seq, SKV: seq}
    ws = h.workspace(g)
    g.execute(pack, ws)
    h.sync()

    ref = [_serve.attend(q.seq(i), k.seq(i), v.seq(i), scale, "top_left")
           for i in range(len(lens))]
    return Result({"O": h.numpy(o.array).reshape(-1)}, {"O": _serve.tokens(ref)}, 2e-2,
                  lambda: g.execute(pack, ws))
