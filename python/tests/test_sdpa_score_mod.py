"""sdpa(score_mod=) and sdpa_backward(score_mod=, score_mod_bprop=) on the CPU reference engine
against numpy: softcapping (cap * tanh(score / cap), its bprop through TANH_BWD on a tensor the
forward callback saved, as the cuDNN frontend's Softcap helper does) in fp32 and bf16, a second
modifier (a bias-like add of a scalar tensor plus a causal mask built from gen_index, with a
bprop that zeroes the masked gradient), a softcap with the padding mask (sequence lengths), the
refusals, and the JSON / serialize round trip."""

import math

import ml_dtypes
import numpy as np
import pytest

import dnngraph as cudnn
from conftest import assert_close, build, poisoned, workspace_for

F32, BF16 = cudnn.data_type.FLOAT, cudnn.data_type.BFLOAT16
DTYPE = {F32: np.float32, BF16: ml_dtypes.bfloat16}


class Softcap:
    """The frontend's form: forward saves score / cap for the bprop."""

    def __init__(self, cap):
        self.cap = cap
        self.before_tanh = None

    def forward(self, graph, score):
        self.before_tanh = graph.div(score, self.cap)
        return graph.mul(graph.tanh(self.before_tanh), self.cap)

    def backward(self, graph, ds):
        t = graph.tanh_backward(graph.mul(ds, self.cap), self.before_tanh)
        return graph.div(t, self.cap)


def causal_plus(shift, neg_inf):
    """score + shift (a scalar tensor), keys after the query masked with neg_inf."""

    def fwd(graph, score):
        row = graph.gen_index(score, axis=2)
        row.set_data_type(cudnn.data_type.INT32)
        col = graph.gen_index(score, axis=3)
        col.set_data_type(cudnn.data_type.INT32)
        keep = graph.cmp_ge(row, col, compute_data_type=cudnn.data_type.BOOLEAN)
        keep.set_data_type(cudnn.data_type.BOOLEAN)
        return graph.binary_select(graph.add(score, shift), neg_inf, keep)

    def bprop(graph, ds):
        row = graph.gen_index(ds, axis=2)
        col = graph.gen_index(ds, axis=3)
        keep = graph.cmp_ge(row, col)
        return graph.binary_select(ds, 0.0, keep)

    return fwd, bprop


def reference(q, k, v, do, scale, mod, dmod):
    """fp64: O, lse, dQ, dK, dV with t = mod(s) for s = scale * Q.K^T; dmod(s, dt) = ds."""
    q, k, v, do = (np.asarray(a, dtype=np.float64) for a in (q, k, v, do))
    s = scale * q @ k.transpose(0, 1, 3, 2)
    t = mod(s)
    m = t.max(-1, keepdims=True)
    lse = m + np.log(np.exp(t - m).sum(-1, keepdims=True))
    p = np.exp(t - lse)
    o = p @ v
    dt = p * (do @ v.transpose(0, 1, 3, 2) - (do * o).sum(-1, keepdims=True))
    ds = dmod(s, dt)
    return o, lse, scale * ds @ k, scale * ds.transpose(0, 1, 3, 2) @ q, p.transpose(0, 1, 3, 2) @ do


def new_graph(handle, io=F32):
    return cudnn.pygraph(handle=handle, io_data_type=io, intermediate_data_type=F32,
                         compute_data_type=F32)


def tensor(g, a, name, dt):
    return g.tensor(name=name, dim=list(a.shape), stride=[s // a.itemsize for s in a.strides],
                    data_type=dt)


def scalar(g, name, value):
    """A pass-by-value FLOAT scalar [1,1,1,1] and its host value (the frontend's form)."""
    t = g.tensor(name=name, dim=[1, 1, 1, 1], stride=[1, 1, 1, 1], is_pass_by_value=True,
                 data_type=F32)
    return t, np.full((1, 1, 1, 1), value, np.float32)


def outputs(pack, tensors, arrays_like, dt):
    got = []
    for t, like in zip(tensors, arrays_like):
        a = poisoned(like.shape, dtype=DTYPE[dt] if like.dtype != np.float32 else np.float32)
        t.set_output(True).set_dim(list(a.shape)).set_stride([s // a.itemsize for s in a.strides])
        pack[t] = a
        got.append(a)
    return got


def seq_lens(g, pack, lens):
    """seq_len_q / seq_len_kv keywords (the padding mask) for per-batch lengths (lq, lkv)."""
    if lens is None:
        return {}
    kw = {}
    for key, n in zip(("seq_len_q", "seq_len_kv"), lens):
        a = np.asarray(n, np.int32).reshape(-1, 1, 1, 1)
        t = g.tensor(name=key, dim=list(a.shape), stride=[1, 1, 1, 1],
                     data_type=cudnn.data_type.INT32)
        pack[t] = a
        kw[key] = t
    return kw


def run(handle, q, k, v, do, scale, make_mods, io=F32, lens=None):
    """Forward then backward through dnngraph; make_mods(graph) -> (score_mod, score_mod_bprop,
    {tensor: host value}); lens: (seq_len_q, seq_len_kv) per batch item, the padding mask."""
    g = new_graph(handle, io)
    Q, K, V = (tensor(g, a, n, io) for a, n in zip((q, k, v), "QKV"))
    fwd, _, extra = make_mods(g)
    pack = {Q: q, K: k, V: v, **extra}
    O, ST = g.sdpa(q=Q, k=K, v=V, is_inference=False, attn_scale=scale, score_mod=fwd,
                   **seq_lens(g, pack, lens))
    o, lse = outputs(pack, (O, ST), (q, np.zeros(q.shape[:3] + (1,), np.float32)), io)
    ST.set_data_type(F32)
    build(g)
    g.execute(pack, workspace_for(g))

    g = new_graph(handle, io)
    arrays = (q, k, v, o, do)
    Q, K, V, O, DO = (tensor(g, a, n, io) for a, n in zip(arrays, ("Q", "K", "V", "O", "dO")))
    S = tensor(g, lse, "stats", F32)
    fwd, bprop, extra = make_mods(g)
    pack = {**dict(zip((Q, K, V, O, DO), arrays)), S: lse, **extra}
    grads = g.sdpa_backward(q=Q, k=K, v=V, o=O, dO=DO, stats=S, attn_scale=scale, score_mod=fwd,
                            score_mod_bprop=bprop, **seq_lens(g, pack, lens))
    got = outputs(pack, grads, (q, k, v), io)
    build(g)
    g.execute(pack, workspace_for(g))
    return [o, lse, *got]


def softcap_mods(cap):
    def make(g):
        t, value = scalar(g, "cap", cap)
        sc = Softcap(t)
        return sc.forward, sc.backward, {t: value}

    return make


def softcap_ref(cap):
    return (lambda s: cap * np.tanh(s / cap),
            lambda s, dt: dt * (1.0 - np.tanh(s / cap) ** 2))


def inputs(rng, b, h, sq, skv, d, dtype, spread=3.0):
    # Large scores so that the cap matters (|s| reaches several times the cap).
    q = (rng.standard_normal((b, h, sq, d)) * spread).astype(dtype)
    k, v = (rng.standard_normal((b, h, skv, d)).astype(dtype) for _ in range(2))
    do = rng.standard_normal((b, h, sq, d)).astype(dtype)
    return q, k, v, do


@pytest.mark.parametrize("io,rtol", [(F32, 1e-5), (BF16, 2e-2)])
def test_softcap_forward_backward_against_numpy(handle, rng, io, rtol):
    b, h, sq, skv, d, cap = 2, 3, 5, 7, 8, 2.0
    scale = 1.0 / math.sqrt(d)
    q, k, v, do = inputs(rng, b, h, sq, skv, d, DTYPE[io])
    got = run(handle, q, k, v, do, scale, softcap_mods(cap), io)
    ref = reference(q, k, v, do, scale, *softcap_ref(cap))
    for name, a, r in zip(("O", "stats", "dQ", "dK", "dV"), got, ref):
        # bf16 outputs: one bf16 step of the largest value on top of the relative tolerance.
        atol = None if io == F32 else 1e-2 * float(np.abs(r).max())
        assert_close(np.asarray(a, np.float64), r, rtol=rtol, atol=atol), name
    # The cap changed the result: plain attention differs.
    plain = reference(q, k, v, do, scale, lambda s: s, lambda s, dt: dt)
    assert not np.allclose(np.asarray(got[0], np.float64), plain[0], rtol=1e-2, atol=1e-2)
    assert not np.allclose(np.asarray(got[2], np.float64), plain[2], rtol=1e-2, atol=1e-2)


def test_softcap_gradient_matches_finite_differences(handle, rng):
    b, h, sq, skv, d, cap, scale = 1, 2, 3, 4, 4, 1.5, 0.7
    q, k, v, do = inputs(rng, b, h, sq, skv, d, np.float64, spread=2.0)
    mod, dmod = softcap_ref(cap)
    loss = lambda qq: (reference(qq, k, v, do, scale, mod, dmod)[0] * do).sum()  # noqa: E731
    eps, fd = 1e-6, np.zeros_like(q)
    for idx in np.ndindex(q.shape):
        e = np.zeros_like(q)
        e[idx] = eps
        fd[idx] = (loss(q + e) - loss(q - e)) / (2 * eps)
    assert_close(reference(q, k, v, do, scale, mod, dmod)[2], fd, rtol=1e-6, atol=1e-8)
    f32 = [a.astype(np.float32) for a in (q, k, v, do)]
    got = run(handle, *f32, scale, softcap_mods(cap))
    assert_close(got[2], fd, rtol=1e-4, atol=1e-5)


def test_shift_and_causal_mask_modifier(handle, rng):
    b, h, s, d, shift = 2, 2, 6, 8, 0.75
    scale = 1.0 / math.sqrt(d)
    q, k, v, do = inputs(rng, b, h, s, s, d, np.float32, spread=1.0)

    def make(g):
        t, value = scalar(g, "shift", shift)
        n, nv = scalar(g, "neg_inf", -1e9)
        fwd, bprop = causal_plus(t, n)
        return fwd, bprop, {t: value, n: nv}

    got = run(handle, q, k, v, do, scale, make)
    keep = np.arange(s)[None, :] <= np.arange(s)[:, None]
    ref = reference(q, k, v, do, scale, lambda x: np.where(keep, x + shift, -1e9),
                    lambda x, dt: np.where(keep, dt, 0.0))
    for a, r in zip(got, ref):
        assert_close(a, r, rtol=1e-5, atol=1e-6)
    # Equal to dnngraph's own causal mask (the shift cancels in the softmax; stats move by it).
    g = new_graph(handle)
    Q, K, V = (tensor(g, a, n, F32) for a, n in zip((q, k, v), "QKV"))
    O, ST = g.sdpa(q=Q, k=K, v=V, is_inference=False, attn_scale=scale, use_causal_mask=True)
    pack = {Q: q, K: k, V: v}
    o, lse = outputs(pack, (O, ST), (q, np.zeros((b, h, s, 1), np.float32)), F32)
    build(g)
    g.execute(pack, workspace_for(g))
    assert_close(got[0], o, rtol=1e-5)
    assert_close(got[1], lse + shift, rtol=1e-5)


def test_identity_modifier_and_no_bprop_pass_the_gradient_through(handle, rng):
    b, h, s, d = 1, 2, 4, 8
    q, k, v, do = inputs(rng, b, h, s, s, d, np.float32, spread=1.0)
    got = run(handle, q, k, v, do, 0.3, lambda g: (lambda gr, x: x, None, {}))
    ref = reference(q, k, v, do, 0.3, lambda x: x, lambda x, dt: dt)
    for a, r in zip(got, ref):
        assert_close(a, r, rtol=1e-5)


def modifier_graph(handle, **kw):
    g = new_graph(handle)
    q = np.zeros((1, 2, 4, 8), np.float32)
    Q, K, V = (tensor(g, q, n, F32) for n in "QKV")
    return g, Q, K, V


@pytest.mark.parametrize("kw,words", [
    (dict(use_causal_mask=True), r"score modifier \(score_mod\) cannot be combined with the "
                                 r"causal mask"),
    (dict(use_alibi_mask=True, use_causal_mask=True), r"cannot be combined with use_alibi_mask"),
    (dict(left_bound=2), r"cannot be combined with diagonal_band_left_bound"),
    (dict(right_bound=1), r"cannot be combined with diagonal_band_right_bound"),
])
def test_mask_combinations_refused(handle, kw, words):
    g, Q, K, V = modifier_graph(handle)
    O, _ = g.sdpa(q=Q, k=K, v=V, is_inference=True, score_mod=lambda gr, s: gr.mul(s, 0.5), **kw)
    O.set_output(True)
    # the frontend raises cudnnGraphNotSupportedError for these at validate
    with pytest.raises(cudnn.cudnnGraphNotSupportedError, match=words):
        g.validate()


def padded_reference(q, k, v, do, scale, mod, dmod, lens_q, lens_kv):
    """fp64 per batch item on its first lens_q queries and lens_kv keys; padded query rows give
    O = 0, stats -inf and dQ = 0; keys past lens_kv get dK = dV = 0."""
    o, dq = np.zeros(q.shape), np.zeros(q.shape)
    lse = np.full(q.shape[:3] + (1,), -np.inf)
    dk, dv = np.zeros(k.shape), np.zeros(v.shape)
    for i, (lq, lkv) in enumerate(zip(lens_q, lens_kv)):
        r = reference(q[i:i + 1, :, :lq], k[i:i + 1, :, :lkv], v[i:i + 1, :, :lkv],
                      do[i:i + 1, :, :lq], scale, mod, dmod)
        for out, part, n in zip((o, lse, dq, dk, dv), r, (lq, lq, lq, lkv, lkv)):
            out[i, :, :n] = part[0]
    return o, lse, dq, dk, dv


@pytest.mark.parametrize("lens_q,lens_kv", [([5, 3, 1], [7, 4, 6]), ([1, 1, 1], [7, 3, 5])])
def test_softcap_with_the_padding_mask(handle, rng, lens_q, lens_kv):
    # The frontend's modifier programs give seq_len_q / seq_len_kv with score_mod (a softcap);
    # the second case is decode (one query per sequence).
    b, h, sq, skv, d, cap = 3, 2, 5, 7, 8, 2.0
    scale = 1.0 / math.sqrt(d)
    q, k, v, do = inputs(rng, b, h, sq, skv, d, np.float32)
    got = run(handle, q, k, v, do, scale, softcap_mods(cap), lens=(lens_q, lens_kv))
    ref = padded_reference(q, k, v, do, scale, *softcap_ref(cap), lens_q, lens_kv)
    for name, a, r in zip(("O", "stats", "dQ", "dK", "dV"), got, ref):
        a = np.asarray(a, np.float64)
        live = np.isfinite(r)
        assert_close(a[live], r[live], rtol=1e-5, atol=1e-6), name
        assert np.array_equal(a[~live], r[~live]), name + ": padded rows"
    # Both masks matter: the padding (keys past lens_kv left out) and the cap.
    plain = padded_reference(q, k, v, do, scale, lambda s: s, lambda s, dt: dt, lens_q, lens_kv)
    assert not np.allclose(got[0], plain[0], rtol=1e-2, atol=1e-2)
    full = reference(q, k, v, do, scale, *softcap_ref(cap))
    n = lens_q[1]  # item 1 has keys past its length
    assert not np.allclose(got[0][1, :, :n], full[0][1, :, :n], rtol=1e-2, atol=1e-2)


def test_padding_mask_and_modifier_validate_with_paged_kv(handle):
    # Paged decode with a modifier, as the frontend's flexible-graph program: page tables and
    # sequence lengths without use_padding_mask=True.
    g, Q, K, V = modifier_graph(handle)
    I32 = cudnn.data_type.INT32
    lens = g.tensor(name="lens", dim=[1, 1, 1, 1], stride=[1, 1, 1, 1], data_type=I32)
    table = g.tensor(name="table", dim=[1, 1, 1, 1], stride=[1, 1, 1, 1], data_type=I32)
    O, _ = g.sdpa(q=Q, k=K, v=V, is_inference=True, seq_len_q=lens, seq_len_kv=lens,
                  paged_attention_k_table=table, paged_attention_v_table=table,
                  score_mod=lambda gr, s: gr.mul(s, 0.5))
    O.set_output(True)
    g.validate()


def test_bad_modifiers_are_clear_errors(handle):
    # A non-pointwise op in the modifier.
    g, Q, K, V = modifier_graph(handle)
    O, _ = g.sdpa(q=Q, k=K, v=V, is_inference=True,
                  score_mod=lambda gr, s: gr.reduction(s, mode=cudnn.reduction_mode.ADD))
    O.set_output(True)
    with pytest.raises(ValueError, match=r"score_mod: node reduction.* is not pointwise"):
        g.validate()
    # A result of another shape (the modifier must keep the score's dims).
    g, Q, K, V = modifier_graph(handle)
    other = g.tensor(name="row", dim=[1, 2, 4, 8, 1], stride=[64, 32, 8, 1, 1], data_type=F32)
    O, _ = g.sdpa(q=Q, k=K, v=V, is_inference=True, score_mod=lambda gr, s: gr.add(s, other))
    O.set_output(True)
    with pytest.raises(ValueError, match=r"rank mismatch|score's dims"):
        g.validate()
    # Returning something that is not a tensor, and a callback that raises: the graph is left
    # as it was (its nodes and tensors).
    g, Q, K, V = modifier_graph(handle)
    before = g.to_json()
    with pytest.raises(TypeError, match=r"score_mod must return the modified score tensor"):
        g.sdpa(q=Q, k=K, v=V, is_inference=True, score_mod=lambda gr, s: 3)

    def boom(gr, s):
        gr.mul(s, 2.0)
        raise RuntimeError("callback failed")

    with pytest.raises(RuntimeError, match="callback failed"):
        g.sdpa(q=Q, k=K, v=V, is_inference=True, score_mod=boom)
    assert g.to_json() == before
    # The modifier's own results are not graph outputs.
    g, Q, K, V = modifier_graph(handle)

    def leak(gr, s):
        y = gr.mul(s, 2.0)
        y.set_output(True)
        return y

    O, _ = g.sdpa(q=Q, k=K, v=V, is_inference=True, score_mod=leak)
    O.set_output(True)
    with pytest.raises(ValueError, match=r"marked as a graph output"):
        g.validate()


def test_json_and_serialize_round_trip_and_key(handle, rng):
    b, h, s, d, cap = 1, 2, 4, 8, 1.5
    q, k, v, do = inputs(rng, b, h, s, s, d, np.float32)
    g = new_graph(handle)
    Q, K, V = (tensor(g, a, n, F32) for a, n in zip((q, k, v), "QKV"))
    C, cv = scalar(g, "cap", cap)
    sc = Softcap(C)
    O, ST = g.sdpa(q=Q, k=K, v=V, is_inference=False, attn_scale=0.4, score_mod=sc.forward)
    O.set_output(True)
    ST.set_output(True).set_data_type(F32)
    g.validate()
    desc = g.to_json()
    assert '"subgraphs"' in desc and '"score_mod"' in desc and "SCORE_MOD_IN_0" in desc
    build(g)
    blob = g.serialize()
    g2 = cudnn.pygraph(handle=handle)
    g2.deserialize(handle, blob)
    assert g2.key() == g.key()
    pack = {Q.get_uid(): q, K.get_uid(): k, V.get_uid(): v, C.get_uid(): cv}
    o, lse = poisoned(q.shape), poisoned((b, h, s, 1))
    pack[O.get_uid()], pack[ST.get_uid()] = o, lse
    g2.execute(pack, workspace_for(g2), handle=handle)
    mod, dmod = softcap_ref(cap)
    ref = reference(q, k, v, do, 0.4, mod, dmod)
    assert_close(o, ref[0], rtol=1e-5)
    assert_close(lse, ref[1], rtol=1e-5)

    # Another modifier (the same ops but a multiply for the divide): another key.
    g3 = new_graph(handle)
    Q3, K3, V3 = (tensor(g3, a, n, F32) for a, n in zip((q, k, v), "QKV"))
    C3, _ = scalar(g3, "cap", cap)

    def other(gr, s3):
        return gr.mul(gr.tanh(gr.mul(s3, C3)), C3)

    O3, ST3 = g3.sdpa(q=Q3, k=K3, v=V3, is_inference=False, attn_scale=0.4, score_mod=other)
    O3.set_output(True)
    ST3.set_output(True).set_data_type(F32)
    g3.validate()
    assert g3.key() != g.key()
