"""sdpa dropout: the (mask, scale) form against numpy, and rng_dump replayed through it."""

import math

import numpy as np
import pytest

import dnngraph as cudnn
from conftest import assert_close, build, poisoned, tensor_of, workspace_for
from sdpa_ref import attention, fp32_graph as new_graph, set_outputs

B, HQ, HK, SQ, SKV, D = 2, 4, 2, 5, 6, 4
SCALE = 1.0 / math.sqrt(D)


def attention_ref(q, k, v, z, do=None):
    """fp64 attention with dropout factor z (broadcast to [b, hq, sq, skv]) and GQA: o, lse and,
    given do, dq, dk, dv."""
    return attention(q, k, v, SCALE, z=z, do=do)


def inputs(rng):
    q = rng.standard_normal((B, HQ, SQ, D)).astype(np.float32)
    k = rng.standard_normal((B, HK, SKV, D)).astype(np.float32)
    v = rng.standard_normal((B, HK, SKV, D)).astype(np.float32)
    do = rng.standard_normal((B, HQ, SQ, D)).astype(np.float32)
    return q, k, v, do


def run_forward(handle, q, k, v, dropout_of, rng_dump_shape=None):
    """Forward in training mode; dropout_of(graph, pack) gives the dropout= argument."""
    g = new_graph(handle)
    Q, K, V = tensor_of(g, q, "Q"), tensor_of(g, k, "K"), tensor_of(g, v, "V")
    pack = {Q: q, K: k, V: v}
    dump, DUMP = None, None
    if rng_dump_shape is not None:
        dump = poisoned(rng_dump_shape)
        DUMP = tensor_of(g, dump, "dump")
        DUMP.set_output(True)
        pack[DUMP] = dump
    O, STATS = g.sdpa(q=Q, k=K, v=V, is_inference=False, attn_scale=SCALE,
                      dropout=dropout_of(g, pack), rng_dump=DUMP)
    o, lse = set_outputs(pack, (O, STATS), ((B, HQ, SQ, D), (B, HQ, SQ, 1)))
    build(g)
    g.execute(pack, workspace_for(g))
    return o, lse, dump


def run_backward(handle, q, k, v, o, do, lse, dropout_of):
    g = new_graph(handle)
    arrays = (q, k, v, o, do, lse)
    Q, K, V, O, DO, STATS = (tensor_of(g, a, n) for a, n in zip(arrays, "Q K V O dO stats".split()))
    pack = dict(zip((Q, K, V, O, DO, STATS), arrays))
    grads = g.sdpa_backward(q=Q, k=K, v=V, o=O, dO=DO, stats=STATS, attn_scale=SCALE,
                            dropout=dropout_of(g, pack))
    outs = set_outputs(pack, grads, (q.shape, k.shape, v.shape))
    build(g)
    g.execute(pack, workspace_for(g))
    return outs


def mask_form(mask, scale):
    """dropout= for the mask form; scale a float (graph constant) or an array (a tensor)."""
    def of(g, pack):
        M = tensor_of(g, mask, "dmask")
        pack[M] = mask
        if isinstance(scale, float):
            return (M, scale)
        S = tensor_of(g, scale, "dscale")
        pack[S] = scale
        return (M, S)
    return of


@pytest.mark.parametrize("mask_shape,scale_as_tensor",
                         [((B, HQ, SQ, SKV), False), ((1, HQ, SQ, SKV), True),
                          ((B, 1, SQ, SKV), False)])
def test_mask_form_against_numpy(handle, rng, mask_shape, scale_as_tensor):
    q, k, v, do = inputs(rng)
    mask = (rng.random(mask_shape) < 0.7).astype(np.float32)
    mask.flat[0], mask.flat[1] = 1.0, 0.0
    scale = 1.25
    ref_o, ref_lse, rdq, rdk, rdv = attention_ref(q, k, v, mask * scale, do)
    form = mask_form(mask, np.full((1, 1, 1, 1), scale, np.float32) if scale_as_tensor else scale)

    o, lse, _ = run_forward(handle, q, k, v, form)
    assert_close(o, ref_o, rtol=1e-5)
    assert_close(lse, ref_lse, rtol=1e-5)  # log-sum-exp before dropout
    for got, ref in zip(run_backward(handle, q, k, v, o, do, lse, form), (rdq, rdk, rdv)):
        assert_close(got, ref, rtol=1e-4)


def test_rng_dump_replays_through_mask_form(handle, rng):
    q, k, v, do = inputs(rng)
    p, seed, offset = 0.3, 1234, 5
    by_probability = lambda g, pack: (p, seed, offset)  # noqa: E731
    o, lse, dump = run_forward(handle, q, k, v, by_probability, rng_dump_shape=(B, HQ, SQ, SKV))
    assert set(np.unique(dump)) == {0.0, 1.0}
    assert 0.5 < dump.mean() < 0.9  # about 1 - p kept
    # The dumped mask is what the forward used.
    ref_o, _ = attention_ref(q, k, v, dump / (1 - p))
    assert_close(o, ref_o, rtol=1e-5)

    replay = mask_form(dump, 1.0 / (1.0 - p))
    o2, lse2, _ = run_forward(handle, q, k, v, replay)
    np.testing.assert_array_equal(o2, o)
    np.testing.assert_array_equal(lse2, lse)
    g_prob = run_backward(handle, q, k, v, o, do, lse, by_probability)
    g_mask = run_backward(handle, q, k, v, o, do, lse, replay)
    for a, b in zip(g_prob, g_mask):
        assert np.all(np.isfinite(a))
        np.testing.assert_array_equal(a, b)


def test_dropout_errors(handle, rng):
    q, k, v, _ = inputs(rng)
    g = new_graph(handle)
    Q, K, V = tensor_of(g, q, "Q"), tensor_of(g, k, "K"), tensor_of(g, v, "V")
    dump = g.tensor(name="dump", dim=[B, HQ, SQ, SKV], data_type=cudnn.data_type.FLOAT)
    dump.set_output(True)
    M = g.tensor(name="dmask", dim=[B, HQ, SQ, SKV], data_type=cudnn.data_type.FLOAT)
    O, _ = g.sdpa(q=Q, k=K, v=V, is_inference=True, dropout=(M, 2.0), rng_dump=dump, name="attn")
    O.set_output(True)
    with pytest.raises(ValueError, match="RNG_DUMP 'dump'.*dropout_probability"):
        g.validate()
    with pytest.raises(TypeError, match="sdpa\\(\\): incompatible function arguments"):
        g.sdpa(q=Q, k=K, v=V, is_inference=True, dropout=(0.1, 1))  # neither form
