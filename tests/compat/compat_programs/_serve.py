"""What the serving programs (serve_*.py) share: sequences packed token after token in buffers
of exactly the token total (what serving engines allocate), declared as the frontend's THD
tensors (dims [b, h, s_max, d], strides [h*d, d, h*d, 1], ragged offsets in elements), and the
float64 attention of one sequence they are checked against."""

import numpy as np


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
    cudnn = h.cudnn
    return cudnn.pygraph(handle=h.handle, io_data_type=getattr(cudnn.data_type, io),
                         intermediate_data_type=cudnn.data_type.FLOAT,
                         compute_data_type=cudnn.data_type.FLOAT, **kw)


def ragged_tensor(g, h, name, p, ragged_offset, io="BFLOAT16"):
    return g.tensor(name=name, dim=p.dims(), stride=p.strides(),
                    data_type=getattr(h.cudnn.data_type, io), ragged_offset=ragged_offset)
