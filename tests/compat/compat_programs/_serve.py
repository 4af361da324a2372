"""What the serving programs (serve_*.py) share: sequences packed token after token in buffers
of exactly the token total (what serving engines allocate), declared as the frontend's THD
tensors (dims [b, h, s_max, d], strides [h*d, d, h*d, 1], ragged offsets in elements), the
ragged-prefill and paged-attention graphs they build (attention scale 1/sqrt(d)), and the float64
attention of one sequence they are checked against."""

import math

import numpy as np

from compat_programs import _graph, _sdpa


class Packed:
    """Sequences of `lens` tokens with h heads of width d, one after another in a buffer of
    sum(lens) tokens ([tokens, h, d] on the harness's device, in `dtype`)."""

    def __init__(self, h, lens, heads, d, dtype, s_max=None, values=True):
        self.lens, self.h, self.d = [int(n) for n in lens], heads, d
        self.s_max = s_max or max(self.lens)
        self.cum = np.concatenate([[0], np.cumsum(self.lens)]).astype(np.int64)
        tokens = int(self.cum[-1])
        if values:
            self.array = h.array(h.rng.standard_normal((tokens, heads, d)), dtype)
            self.values = h.numpy(self.array)  # the values as rounded to dtype
        else:
            self.array = h.empty((tokens, heads, d), dtype)
            self.values = None
        # Offsets in elements, [b+1, 1, 1, 1] int32 on the device.
        self.offsets = h.array((self.cum * heads * d).astype(np.float64).reshape(-1, 1, 1, 1),
                               "int32")

    def dims(self):
        return [len(self.lens), self.h, self.s_max, self.d]

    def strides(self):
        return [self.h * self.d, self.d, self.h * self.d, 1]

    def seq(self, i):
        """Sequence i as [h, len, d] float64."""
        return self.values[self.cum[i]:self.cum[i + 1]].transpose(1, 0, 2)


def qkvo(h, lens_q, lens_kv, hq, hk, d, s_max_q=None, s_max_kv=None):
    """Random bf16 Packed q (hq heads of lens_q tokens), k and v (hk heads of lens_kv tokens),
    and an unwritten Packed o shaped as q."""
    q = Packed(h, lens_q, hq, d, "bfloat16", s_max=s_max_q)
    k = Packed(h, lens_kv, hk, d, "bfloat16", s_max=s_max_kv)
    v = Packed(h, lens_kv, hk, d, "bfloat16", s_max=s_max_kv)
    return q, k, v, Packed(h, lens_q, hq, d, "bfloat16", s_max=s_max_q, values=False)


def lengths(h, lens):
    """[b, 1, 1, 1] int32 sequence lengths on the device."""
    return h.array(np.array(lens, np.float64).reshape(-1, 1, 1, 1), "int32")


def attend(q, k, v, scale, causal=None, sink=None):
    """fp64 attention of one sequence: q [hq, lq, d], k / v [hk, lkv, d] (query head i reads
    key head i // (hq // hk)). causal: None, "top_left" (key j <= query i) or "bottom_right"
    (j <= i + lkv - lq). sink: [hq] logits joining each row's softmax with no value row.
    Returns O [hq, lq, dv]."""
    group = q.shape[0] // k.shape[0]
    k, v = np.repeat(k, group, axis=0), np.repeat(v, group, axis=0)
    s = scale * np.einsum("hid,hjd->hij", q, k)
    lq, lkv = q.shape[1], k.shape[1]
    if causal:
        shift = lkv - lq if causal == "bottom_right" else 0
        keep = np.arange(lkv)[None, :] <= np.arange(lq)[:, None] + shift
        s = np.where(keep[None], s, -np.inf)
    m = s.max(-1, keepdims=True)
    if sink is not None:
        m = np.maximum(m, np.asarray(sink).reshape(-1, 1, 1))
    e = np.exp(s - m)
    z = e.sum(-1, keepdims=True)
    if sink is not None:
        z = z + np.exp(np.asarray(sink).reshape(-1, 1, 1) - m)
    return np.einsum("hij,hjd->hid", e / z, v)


def tokens(parts):
    """Per-sequence [h, len, d] arrays as the flat token order of a packed buffer."""
    return np.concatenate([p.transpose(1, 0, 2).reshape(-1) for p in parts])


def graph(h, io="BFLOAT16", **kw):
    return _graph.graph(h, io, **kw)


def ragged_tensor(g, h, name, p, ragged_offset, io="BFLOAT16"):
    return g.tensor(name=name, dim=p.dims(), stride=p.strides(),
                    data_type=getattr(h.cudnn.data_type, io), ragged_offset=ragged_offset)


def prefill(h, name, q, k, v, o, seq_q, seq_kv, extra=None, **kw):
    """A bf16 ragged prefill: Packed q, k, v into Packed o through sdpa with the padding mask and
    [b, 1, 1, 1] sequence lengths seq_q / seq_kv (plus the keywords and pack entries extra(g)
    gives, and kw). Executes once; returns a function that executes again."""
    g = graph(h)
    RQ, RKV = g.tensor_like(q.offsets), g.tensor_like(k.offsets)
    SQ, SKV = g.tensor_like(seq_q), g.tensor_like(seq_kv)
    more, pack = extra(g) if extra else ({}, {})
    Q = ragged_tensor(g, h, "Q", q, RQ)
    K = ragged_tensor(g, h, "K", k, RKV)
    V = ragged_tensor(g, h, "V", v, RKV)
    O, _ = g.sdpa(name=name, q=Q, k=K, v=V, generate_stats=False, attn_scale=1.0 / math.sqrt(q.d),
                  use_padding_mask=True, seq_len_q=SQ, seq_len_kv=SKV, **more, **kw)
    O.set_output(True).set_dim(o.dims()).set_stride(o.strides()).set_ragged_offset(RQ)
    O.set_data_type(h.cudnn.data_type.BFLOAT16)
    pack.update({Q: q.array, K: k.array, V: v.array, O: o.array, RQ: q.offsets, RKV: k.offsets,
                 SQ: seq_q, SKV: seq_kv})
    return _graph.finish(h, g, pack)


def prefill_reference(q, k, v, causal, sink=None):
    """The float64 O of every packed sequence, in token order."""
    scale = 1.0 / math.sqrt(q.d)
    return tokens([attend(q.seq(i), k.seq(i), v.seq(i), scale, causal, sink)
                   for i in range(len(q.lens))])


def pages(h, b, hq, hk, sq, d, page, num_pages, per_seq, dtype, q_scale=1.0):
    """Random q [b, hq, sq, d] and K/V page pools [num_pages, hk, page, d] in dtype, a page table
    [b, 1, per_seq, 1] of distinct random pages (numpy, and as an int32 array), and the float64
    values of q, k and v as rounded."""
    q = h.randn((b, hq, sq, d), dtype, scale=q_scale)
    kc = h.randn((num_pages, hk, page, d), dtype)
    vc = h.randn((num_pages, hk, page, d), dtype)
    table = h.rng.permutation(num_pages)[:b * per_seq].reshape(b, 1, per_seq, 1)
    pt = h.array(table.astype(np.float64), "int32")
    return (q, kc, vc), table, pt, [h.numpy(t) for t in (q, kc, vc)]


def paged_kv(table, page, kc, vc, i, n):
    """Sequence i's first n keys and values gathered from its pages: [h, n, d] each."""
    rows = [(table[i, 0, j // page, 0], j % page) for j in range(n)]
    return (np.stack([kc[p, :, r] for p, r in rows], axis=1),
            np.stack([vc[p, :, r] for p, r in rows], axis=1))


def paged(h, qkv, pt, seq_q, seq_kv, max_kv, io="BFLOAT16", set_type=True, extra=None, **kw):
    """sdpa on q [b, h, s_q, d] and paged K/V pools (one page table pt for both), bounded by the
    [b, 1, 1, 1] sequence lengths seq_q / seq_kv, into a packed O in io (given that data type
    when set_type), plus the keywords and pack entries extra(g) gives, and kw. Executes once;
    returns o and a function that executes again."""
    q, kc, vc = qkv
    g = graph(h, io=io)
    Q, K, V = g.tensor_like(q), g.tensor_like(kc), g.tensor_like(vc)
    PT_K, PT_V = g.tensor_like(pt), g.tensor_like(pt)
    SQ, SKV = g.tensor_like(seq_q), g.tensor_like(seq_kv)
    more, pack = extra(g) if extra else ({}, {})
    O, _ = g.sdpa(name=kw.pop("name", "decode"), q=Q, k=K, v=V, generate_stats=False,
                  attn_scale=1.0 / math.sqrt(q.shape[3]), seq_len_q=SQ, seq_len_kv=SKV,
                  paged_attention_k_table=PT_K, paged_attention_v_table=PT_V,
                  paged_attention_max_seq_len_kv=max_kv, **more, **kw)
    shape = list(q.shape)
    O.set_output(True).set_dim(shape).set_stride(_sdpa.packed(shape))
    if set_type:
        O.set_data_type(getattr(h.cudnn.data_type, io))
    o = h.empty(shape, {"HALF": "float16", "BFLOAT16": "bfloat16"}[io])
    pack.update({Q: q, K: kc, V: vc, PT_K: pt, PT_V: pt, SQ: seq_q, SKV: seq_kv, O: o})
    return o, _graph.finish(h, g, pack)
