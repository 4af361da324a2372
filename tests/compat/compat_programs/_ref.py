"""float64 numpy references shared by the programs."""

import numpy as np


def conv2d(x, w, pad, stride, dil):
    """Cross-correlation, NCHW x, KCRS w."""
    n, c, hh, ww = x.shape
    k, _, r, s = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    oh = (hh + 2 * pad[0] - (r - 1) * dil[0] - 1) // stride[0] + 1
    ow = (ww + 2 * pad[1] - (s - 1) * dil[1] - 1) // stride[1] + 1
    y = np.zeros((n, k, oh, ow))
    for i in range(r):
        for j in range(s):
            patch = xp[:, :, i * dil[0]:i * dil[0] + stride[0] * (oh - 1) + 1:stride[0],
                       j * dil[1]:j * dil[1] + stride[1] * (ow - 1) + 1:stride[1]]
            y += np.einsum("nchw,kc->nkhw", patch, w[:, :, i, j])
    return y


def conv2d_dgrad(dy, w, x_shape, pad, stride, dil):
    n, c, hh, ww = x_shape
    k, _, r, s = w.shape
    dxp = np.zeros((n, c, hh + 2 * pad[0], ww + 2 * pad[1]))
    oh, ow = dy.shape[2:]
    for i in range(r):
        for j in range(s):
            dxp[:, :, i * dil[0]:i * dil[0] + stride[0] * (oh - 1) + 1:stride[0],
                j * dil[1]:j * dil[1] + stride[1] * (ow - 1) + 1:stride[1]] += np.einsum(
                    "nkhw,kc->nchw", dy, w[:, :, i, j])
    return dxp[:, :, pad[0]:pad[0] + hh, pad[1]:pad[1] + ww]


def conv2d_wgrad(x, dy, w_shape, pad, stride, dil):
    k, c, r, s = w_shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    oh, ow = dy.shape[2:]
    dw = np.zeros(w_shape)
    for i in range(r):
        for j in range(s):
            patch = xp[:, :, i * dil[0]:i * dil[0] + stride[0] * (oh - 1) + 1:stride[0],
                       j * dil[1]:j * dil[1] + stride[1] * (ow - 1) + 1:stride[1]]
            dw[:, :, i, j] = np.einsum("nchw,nkhw->kc", patch, dy)
    return dw


def alibi_slopes(heads):
    """ALiBi slope per head: n = largest power of two <= heads; 2^(-8 i / n) for i = 1..n,
    then 2^(-8 (i - 1/2) / n) for the remaining heads, i = 1, 2, ... (float32 values)."""
    n = 1 << int(np.floor(np.log2(heads)))
    e = [i for i in range(1, n + 1)] + [i - 0.5 for i in range(1, heads - n + 1)]
    return np.array([2.0 ** (-8.0 * x / n) for x in e], dtype=np.float32).astype(np.float64)


def alibi_bias(heads, sq, skv):
    """[1, h, s_q, s_kv] bias slope[h] * (col - row)."""
    rel = np.arange(skv)[None, :] - np.arange(sq)[:, None]
    return alibi_slopes(heads)[None, :, None, None] * rel[None, None]


def attention(q, k, v, scale, causal, bias=None):
    """O, stats (natural-log sum-exp per row, [b,h,s_q,1]) and P of softmax(scale*QK^T+bias)V."""
    s = np.einsum("bhqd,bhkd->bhqk", q, k) * scale
    if bias is not None:
        s = s + bias
    if causal:
        sq, sk = s.shape[-2:]
        s = np.where(np.tril(np.ones((sq, sk), dtype=bool)), s, -np.inf)
    m = s.max(-1, keepdims=True)
    e = np.exp(s - m)
    lse = m + np.log(e.sum(-1, keepdims=True))
    p = np.exp(s - lse)
    return np.einsum("bhqk,bhkd->bhqd", p, v), lse, p
