"""conv_dgrad, conv_wgrad and sdpa_backward against numpy references."""

import math

import numpy as np

import dnngraph as cudnn
from conftest import assert_close, build, poisoned, tensor_of, workspace_for

PAD, STRIDE, DIL = (1, 1), (2, 1), (1, 1)


def conv_grads_ref(x, w, dy):
    """dx and dw of y = conv(x, w) (cross-correlation, PAD/STRIDE/DIL), naive fp64 loops."""
    n, c, h, wd = x.shape
    k, _, r, s = w.shape
    _, _, p, q = dy.shape
    xp = np.zeros((n, c, h + 2 * PAD[0], wd + 2 * PAD[1]))
    xp[:, :, PAD[0]:PAD[0] + h, PAD[1]:PAD[1] + wd] = x
    dxp = np.zeros_like(xp)
    dw = np.zeros_like(w, dtype=np.float64)
    for i in range(r):
        for j in range(s):
            hs = slice(i * DIL[0], i * DIL[0] + STRIDE[0] * (p - 1) + 1, STRIDE[0])
            ws = slice(j * DIL[1], j * DIL[1] + STRIDE[1] * (q - 1) + 1, STRIDE[1])
            dxp[:, :, hs, ws] += np.einsum("nkpq,kc->ncpq", dy, w[:, :, i, j])
            dw[:, :, i, j] = np.einsum("nkpq,ncpq->kc", dy, xp[:, :, hs, ws])
    return dxp[:, :, PAD[0]:PAD[0] + h, PAD[1]:PAD[1] + wd], dw


def test_conv_dgrad_wgrad(handle, rng):
    n, c, h, wd, k, r, s = 2, 3, 6, 5, 4, 3, 3
    p = (h + 2 * PAD[0] - DIL[0] * (r - 1) - 1) // STRIDE[0] + 1
    q = (wd + 2 * PAD[1] - DIL[1] * (s - 1) - 1) // STRIDE[1] + 1
    x = rng.standard_normal((n, c, h, wd)).astype(np.float32)
    w = rng.standard_normal((k, c, r, s)).astype(np.float32)
    dy = rng.standard_normal((n, k, p, q)).astype(np.float32)
    ref_dx, ref_dw = conv_grads_ref(x.astype(np.float64), w.astype(np.float64), dy.astype(np.float64))

    g = cudnn.pygraph(handle=handle, io_data_type=cudnn.data_type.FLOAT)
    DY, W = tensor_of(g, dy, "dy"), tensor_of(g, w, "w")
    DX = g.conv_dgrad(loss=DY, filter=W, padding=list(PAD), stride=list(STRIDE),
                      dilation=list(DIL), name="dgrad")
    DX.set_output(True).set_dim([n, c, h, wd]).set_stride([c * h * wd, h * wd, wd, 1])
    build(g)
    dx = poisoned((n, c, h, wd))
    g.execute({DY: dy, W: w, DX: dx}, workspace_for(g))
    assert_close(dx, ref_dx, rtol=1e-5)

    g = cudnn.pygraph(handle=handle, io_data_type=cudnn.data_type.FLOAT)
    X, DY = tensor_of(g, x, "x"), tensor_of(g, dy, "dy")
    DW = g.conv_wgrad(image=X, loss=DY, pre_padding=list(PAD), post_padding=list(PAD),
                      stride=list(STRIDE), dilation=list(DIL), name="wgrad")
    DW.set_output(True).set_dim([k, c, r, s]).set_stride([c * r * s, r * s, s, 1])
    build(g)
    dw = poisoned((k, c, r, s))
    g.execute({X: x, DY: dy, DW: dw}, workspace_for(g))
    assert_close(dw, ref_dw, rtol=1e-5)


def attention_grads_ref(q, k, v, do, scale):
    """O, LSE and dQ, dK, dV of causal attention, in fp64."""
    s = np.einsum("bhqd,bhkd->bhqk", q, k) * scale
    sq, sk = s.shape[-2:]
    mask = np.arange(sk)[None, :] > np.arange(sq)[:, None]
    s = np.where(mask, -np.inf, s)
    m = s.max(-1, keepdims=True)
    e = np.exp(s - m)
    p = e / e.sum(-1, keepdims=True)
    o = np.einsum("bhqk,bhkd->bhqd", p, v)
    lse = m + np.log(e.sum(-1, keepdims=True))
    dv = np.einsum("bhqk,bhqd->bhkd", p, do)
    dp = np.einsum("bhqd,bhkd->bhqk", do, v)
    ds = p * (dp - (do * o).sum(-1, keepdims=True))
    dq = np.einsum("bhqk,bhkd->bhqd", ds, k) * scale
    dk = np.einsum("bhqk,bhqd->bhkd", ds, q) * scale
    return o, lse, dq, dk, dv


def test_sdpa_backward(handle, rng):
    b, h, s, d = 1, 2, 5, 4
    scale = 1.0 / math.sqrt(d)
    q, k, v, do = (rng.standard_normal((b, h, s, d)) for _ in range(4))
    o, lse, rdq, rdk, rdv = attention_grads_ref(q, k, v, do, scale)
    arrays = [a.astype(np.float32) for a in (q, k, v, o, do, lse)]

    g = cudnn.pygraph(handle=handle, io_data_type=cudnn.data_type.FLOAT,
                      intermediate_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT)
    Q, K, V, O, DO, STATS = (tensor_of(g, a, n) for a, n in zip(arrays, "Q K V O dO stats".split()))
    grads = g.sdpa_backward(q=Q, k=K, v=V, o=O, dO=DO, stats=STATS, attn_scale=scale,
                            use_causal_mask=True)
    assert len(grads) == 3
    outs = []
    pack = dict(zip((Q, K, V, O, DO, STATS), arrays))
    for t in grads:
        t.set_output(True).set_dim([b, h, s, d]).set_stride([h * s * d, s * d, d, 1])
        pack[t] = poisoned((b, h, s, d))
        outs.append(pack[t])
    build(g)
    g.execute(pack, workspace_for(g))
    for got, ref in zip(outs, (rdq, rdk, rdv)):
        assert_close(got, ref, rtol=1e-4)
