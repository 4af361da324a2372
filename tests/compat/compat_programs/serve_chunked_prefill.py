"""Serving: chunked prefill. Each of three sequences adds a chunk of new query tokens after the
tokens already in its K/V (one with none, so its chunk is its whole prompt): ragged Q and O of
the chunk tokens, ragged K and V of every token so far, all in buffers of exactly their token
totals, causal on the bottom-right diagonal (each new token sees every cached token and the new
ones up to itself), grouped-query, bf16."""

import math

from compat_harness import Result
from compat_programs import _serve


def run(h):
    cached, chunk = [48, 0, 100], [16, 37, 28]
    lens_kv = [c + n for c, n in zip(cached, chunk)]
    hq, hk, d = 8, 2, 64
    scale = 1.0 / math.sqrt(d)
    q = _serve.Packed(h, chunk, hq, d, "bfloat16", s_max=40)
    k = _serve.Packed(h, lens_kv, hk, d, "bfloat16", s_max=128)
    v = _serve.Packed(h, lens_kv, hk, d, "bfloat16", s_max=128)
    o = _serve.Packed(h, chunk, hq, d, "bfloat16", s_max=40, values=False)
    seq_q, seq_kv = _serve.lengths(h, chunk), _serve.lengths(h, lens_kv)

    g = _serve.graph(h)
    RQ, RKV = g.tensor_like(q.offsets), g.tensor_like(k.offsets)
    SQ, SKV = g.tensor_like(seq_q), g.tensor_like(seq_kv)
    Q = _serve.ragged_tensor(g, h, "Q", q, RQ)
    K = _serve.ragged_tensor(g, h, "K", k, RKV)
    V = _serve.ragged_tensor(g, h, "V", v, RKV)
    O, _ = g.sdpa(name="chunk", q=Q, k=K, v=V, generate_stats=False, attn_scale=scale,
                  use_causal_mask_bottom_right=True, use_padding_mask=True, seq_len_q=SQ,
                  seq_len_kv=SKV)
    O.set_output(True).set_dim(o.dims()).set_stride(o.strides()).set_ragged_offset(RQ)
    O.set_data_type(h.cudnn.data_type.BFLOAT16)
    g.build([h.cudnn.heur_mode.A, h.cudnn.heur_mode.FALLBACK])
    pack = {Q: q.array, K: k.array, V: v.array, O: o.array, RQ: q.offsets, RKV: k.offsets,
            SQ: seq_q, SKV: seq_kv}
    ws = h.workspace(g)
    g.execute(pack, ws)
    h.sync()

    ref = [_serve.attend(q.seq(i), k.seq(i), v.seq(i), scale, "bottom_right")
           for i in range(len(chunk))]
    return Result({"O": h.numpy(o.array).reshape(-1)}, {"O": _serve.tokens(ref)}, 2e-2,
                  lambda: g.execute(pack, ws))
