"""sdpa use_alibi_mask: the ALiBi bias slope[h] * (col - row) against numpy (forward and
backward, fp32 1e-5), the frontend's slopes hand-worked, and the frontend's rules (causal,
top-left) as clear NotSupported errors."""

import math

import numpy as np
import pytest

import dnngraph as cudnn
from conftest import assert_close, build, tensor_of, workspace_for
from sdpa_ref import attention, fp32_graph as new_graph, qkv_do, set_outputs as outputs


def slopes_by_hand(heads):
    """The frontend's slopes, written out: n = largest power of two <= heads."""
    table = {
        1: [2.0 ** -8],
        2: [2.0 ** -4, 2.0 ** -8],
        3: [2.0 ** -4, 2.0 ** -8, 2.0 ** -2],
        4: [2.0 ** -2, 2.0 ** -4, 2.0 ** -6, 2.0 ** -8],
        5: [2.0 ** -2, 2.0 ** -4, 2.0 ** -6, 2.0 ** -8, 2.0 ** -1],
        6: [2.0 ** -2, 2.0 ** -4, 2.0 ** -6, 2.0 ** -8, 2.0 ** -1, 2.0 ** -3],
        8: [2.0 ** -(i + 1) for i in range(8)],
    }
    return np.array(table[heads])


def reference(q, k, v, scale, bias=None, left=None, do=None):
    """fp64 causal attention with ALiBi (and an optional bias / window), GQA by repeat."""
    return attention(q, k, v, scale, causal=True, left=left, bias=bias,
                     alibi=slopes_by_hand(q.shape[1]), do=do)


def forward(handle, q, k, v, scale, bias=None, **kw):
    g = new_graph(handle)
    Q, K, V = tensor_of(g, q, "Q"), tensor_of(g, k, "K"), tensor_of(g, v, "V")
    pack = {Q: q, K: k, V: v}
    B = None
    if bias is not None:
        B = tensor_of(g, bias, "bias")
        pack[B] = bias
    O, ST = g.sdpa(q=Q, k=K, v=V, generate_stats=True, attn_scale=scale, bias=B,
                   use_causal_mask=True, use_alibi_mask=True, **kw)
    b, hq, sq, _ = q.shape
    o, lse = outputs(pack, (O, ST), ((b, hq, sq, v.shape[3]), (b, hq, sq, 1)))
    build(g)
    g.execute(pack, workspace_for(g))
    return o, lse


def test_slopes_hand_worked(handle, rng):
    # K = 0 leaves only the ALiBi term in the scores: row 1 sees keys 0 and 1 with scores
    # -slope and 0, so its log-sum-exp is log(1 + exp(-slope)).
    for heads in (1, 2, 3, 6, 8):
        q = rng.standard_normal((1, heads, 2, 4)).astype(np.float32)
        k = np.zeros((1, heads, 2, 4), np.float32)
        v = rng.standard_normal((1, heads, 2, 4)).astype(np.float32)
        _, lse = forward(handle, q, k, v, 0.5)
        slope = -np.log(np.expm1(lse[0, :, 1, 0].astype(np.float64)))
        assert_close(slope, slopes_by_hand(heads), rtol=1e-5)
        assert_close(lse[0, :, 0, 0], np.zeros(heads), atol=1e-6)  # row 0: key 0 only


@pytest.mark.parametrize("hq,hk,sq,skv", [(4, 4, 7, 7), (6, 2, 5, 9), (5, 1, 8, 6)])
def test_forward_backward_against_numpy(handle, rng, hq, hk, sq, skv):
    b, d = 2, 8
    scale = 1.0 / math.sqrt(d)
    q, k, v, do = qkv_do(rng, b, hq, hk, sq, skv, d)
    ref_o, ref_lse, rdq, rdk, rdv = reference(q, k, v, scale, do=do)
    o, lse = forward(handle, q, k, v, scale)
    assert_close(o, ref_o, rtol=1e-5)
    assert_close(lse, ref_lse, rtol=1e-5)

    g = new_graph(handle)
    arrays = (q, k, v, o, do, lse)
    Q, K, V, O, DO, ST = (tensor_of(g, a, n) for a, n in zip(arrays, "Q K V O dO st".split()))
    pack = dict(zip((Q, K, V, O, DO, ST), arrays))
    grads = g.sdpa_backward(q=Q, k=K, v=V, o=O, dO=DO, stats=ST, attn_scale=scale,
                            use_causal_mask=True, use_alibi_mask=True)
    got = outputs(pack, grads, (q.shape, k.shape, v.shape))
    build(g)
    g.execute(pack, workspace_for(g))
    for a, r in zip(got, (rdq, rdk, rdv)):
        assert_close(a, r, rtol=1e-5)


def test_with_bias_and_window(handle, rng):
    b, h, s, d = 1, 3, 9, 4
    q, k, v = (rng.standard_normal((b, h, s, d)).astype(np.float32) for _ in range(3))
    bias = rng.standard_normal((1, h, s, s)).astype(np.float32)
    ref_o, ref_lse = reference(q, k, v, 0.4, bias=bias, left=3)
    o, lse = forward(handle, q, k, v, 0.4, bias=bias, diagonal_band_left_bound=3)
    assert_close(o, ref_o, rtol=1e-5)
    assert_close(lse, ref_lse, rtol=1e-5)


def test_needs_causal_top_left(handle, rng):
    q = rng.standard_normal((1, 2, 4, 4)).astype(np.float32)
    for kw, words in (({}, "needs causal masking"),
                      ({"diagonal_band_right_bound": 1}, "right_bound is 1"),
                      ({"use_causal_mask_bottom_right": True}, "top-left diagonal")):
        g = new_graph(handle)
        Q, K, V = (tensor_of(g, q, n) for n in "QKV")
        O, _ = g.sdpa(q=Q, k=K, v=V, use_alibi_mask=True, **kw)
        O.set_output(True)
        # the frontend raises cudnnGraphNotSupportedError for these at validate
        with pytest.raises(cudnn.cudnnGraphNotSupportedError, match=words):
            g.validate()
    # diagonal_band_right_bound=0 is the frontend's other spelling of causal: accepted
    g = new_graph(handle)
    Q, K, V = (tensor_of(g, q, n) for n in "QKV")
    O, _ = g.sdpa(q=Q, k=K, v=V, use_alibi_mask=True, diagonal_band_right_bound=0)
    O.set_output(True)
    g.validate()
