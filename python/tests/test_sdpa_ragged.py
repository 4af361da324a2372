"""sdpa ragged (THD) tensors and paged K/V on the CPU engine, through the frontend's API
(tensor(ragged_offset=...), set_ragged_offset, max_total_seq_len_q/kv, paged_attention_*):
numbers against numpy computed per sequence on the dense, unpadded equivalent (fp32 1e-5,
bf16 1e-2), outputs poisoned (and checked untouched past the packed tokens), and the rules as
clear errors."""

import math

import ml_dtypes
import numpy as np
import pytest

import dnngraph as cudnn
from conftest import assert_close, build, workspace_for
from sdpa_ref import attention, fp32_graph as new_graph

F32, BF16, I32 = cudnn.data_type.FLOAT, cudnn.data_type.BFLOAT16, cudnn.data_type.INT32


def attend(q, k, v, scale, causal=False, do=None):
    """fp64 attention of one sequence: q [hq, sq, d], k [hk, skv, d], v [hk, skv, dv]
    (GQA by repeat); causal is top-left. Returns o, lse (and dq, dk, dv given do)."""
    one = attention(q[None], k[None], v[None], scale, causal=causal,
                    do=None if do is None else do[None])
    return tuple(a[0] for a in one)


class Thd:
    """A packed (THD) buffer of b sequences with `lens` tokens, `h` heads of width `d`,
    declared as [b, h, s_max, d] with strides [s_max*h*d, d, h*d, 1]; the tokens of sequence i
    start at token cum[i]. Offsets count elements (unit = 1) or tokens (unit = h*d)."""

    def __init__(self, lens, s_max, h, d, dtype=np.float32, exact=False):
        self.lens, self.s_max, self.h, self.d = list(lens), s_max, h, d
        self.cum = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
        tokens = int(self.cum[-1]) if exact else len(lens) * s_max  # exact: the token total
        self.buf = np.empty(tokens * h * d, dtype=dtype)
        self.buf.fill(np.nan)  # poison: what is not a token stays NaN

    def fill(self, rng):
        n = int(self.cum[-1]) * self.h * self.d
        self.buf[:n] = rng.standard_normal(n).astype(self.buf.dtype)
        return self

    def dims(self):
        return [len(self.lens), self.h, self.s_max, self.d]

    def strides(self):
        return [self.s_max * self.h * self.d, self.d, self.h * self.d, 1]

    def offsets(self, unit=None):
        """Where each sequence starts, in units of `unit` elements (default 1)."""
        unit = 1 if unit is None else unit
        return (self.cum * self.h * self.d // unit).astype(np.int32).reshape(-1, 1, 1, 1)

    def seq(self, i):
        """Sequence i as [h, len, d] (fp64)."""
        t = self.buf[self.cum[i] * self.h * self.d:self.cum[i + 1] * self.h * self.d]
        return t.astype(np.float64).reshape(self.lens[i], self.h, self.d).transpose(1, 0, 2)

    def untouched_tail(self):
        return np.all(np.isnan(self.buf[int(self.cum[-1]) * self.h * self.d:].astype(np.float64)))


def ragged_tensor(g, name, thd, pack, io=F32, unit=None):
    off = thd.offsets(unit)
    R = g.tensor(name=name + "_ragged", dim=list(off.shape), stride=[1, 1, 1, 1], data_type=I32)
    pack[R] = off
    T = g.tensor(name=name, dim=thd.dims(), stride=thd.strides(), data_type=io,
                 ragged_offset=R, ragged_offset_multiplier=1 if unit is None else unit)
    pack[T] = thd.buf
    return T


def seq_lens(g, pack, name, lens):
    a = np.array(lens, np.int32).reshape(-1, 1, 1, 1)
    t = g.tensor(name=name, dim=list(a.shape), stride=[1, 1, 1, 1], data_type=I32)
    pack[t] = a
    return t


def set_ragged_output(g, t, thd, pack, name, io=F32, unit=None):
    """Marks output `t` as ragged over `thd`'s buffer (the frontend's set_ragged_offset)."""
    off = thd.offsets(unit)
    R = g.tensor(name=name + "_ragged", dim=list(off.shape), stride=[1, 1, 1, 1], data_type=I32)
    pack[R] = off
    t.set_output(True).set_dim(thd.dims()).set_stride(thd.strides()).set_data_type(io)
    t.set_ragged_offset(R)
    if unit is not None:
        t.set_ragged_offset_multiplier(unit)
    pack[t] = thd.buf


def run_forward(handle, rng, lens_q, lens_kv, sq, skv, hq, hk, d, causal=False, io=F32,
                dtype=np.float32, unit=None, exact=False, **kw):
    b = len(lens_q)
    q = Thd(lens_q, sq, hq, d, dtype, exact).fill(rng)
    k = Thd(lens_kv, skv, hk, d, dtype, exact).fill(rng)
    v = Thd(lens_kv, skv, hk, d, dtype, exact).fill(rng)
    o = Thd(lens_q, sq, hq, d, dtype, exact)
    st = Thd(lens_q, sq, hq, 1, exact=exact)
    g = new_graph(handle, io)
    pack = {}
    Q, K, V = (ragged_tensor(g, n, t, pack, io, unit) for n, t in (("Q", q), ("K", k), ("V", v)))
    O, ST = g.sdpa(Q, K, V, attn_scale=1.0 / math.sqrt(d), generate_stats=True,
                   use_causal_mask=causal, use_padding_mask=True,
                   seq_len_q=seq_lens(g, pack, "lq", lens_q),
                   seq_len_kv=seq_lens(g, pack, "lkv", lens_kv), **kw)
    set_ragged_output(g, O, o, pack, "O", io, unit)
    set_ragged_output(g, ST, st, pack, "Stats", F32, None)
    build(g)
    g.execute(pack, workspace_for(g))
    return (q, k, v, o, st), b


@pytest.mark.parametrize("hq,hk,causal,in_tokens", [(2, 2, False, False), (4, 2, True, False),
                                                    (2, 2, False, True)])
def test_forward_against_dense_numpy(handle, rng, hq, hk, causal, in_tokens):
    # in_tokens: offsets count tokens, ragged_offset_multiplier = h * d (Q, K, V, O share h).
    lens_q, lens_kv, d = [3, 6, 1], [5, 2, 7], 8
    (q, k, v, o, st), b = run_forward(handle, rng, lens_q, lens_kv, 6, 7, hq, hk, d,
                                      causal=causal, unit=hq * d if in_tokens else None)
    for i in range(b):
        ref_o, ref_lse = attend(q.seq(i), k.seq(i), v.seq(i), 1.0 / math.sqrt(d), causal)
        assert_close(o.seq(i), ref_o, rtol=1e-5)
        assert_close(st.seq(i), ref_lse, rtol=1e-5)
    assert o.untouched_tail() and st.untouched_tail(), "wrote past the packed tokens"


def test_forward_bf16(handle, rng):
    lens_q, lens_kv, d = [4, 2], [3, 6], 8
    bf = ml_dtypes.bfloat16
    (q, k, v, o, st), b = run_forward(handle, rng, lens_q, lens_kv, 4, 6, 2, 2, d, io=BF16,
                                      dtype=bf)
    for i in range(b):
        ref_o, ref_lse = attend(q.seq(i), k.seq(i), v.seq(i), 1.0 / math.sqrt(d))
        assert_close(o.seq(i), ref_o, rtol=1e-2)
        assert_close(st.seq(i), ref_lse, rtol=1e-2)
    assert o.untouched_tail()


def test_max_total_seq_len_accepted_and_checked(handle, rng):
    run_forward(handle, rng, [2, 3], [4, 1], 3, 4, 2, 2, 8, max_total_seq_len_q=5,
                max_total_seq_len_kv=6)
    with pytest.raises(Exception, match="add up to 5 tokens but max_total_seq_len_q is 4"):
        run_forward(handle, rng, [2, 3], [4, 1], 3, 4, 2, 2, 8, max_total_seq_len_q=4)


@pytest.mark.parametrize("exact", [False, True])
def test_backward_against_dense_numpy(handle, rng, exact):
    # exact: every buffer (Q, K, V, O, dO, Stats, dQ, dK, dV) holds only the packed tokens.
    lens_q, lens_kv, hq, hk, d = [4, 1, 5], [3, 6, 5], 4, 2, 8
    scale = 1.0 / math.sqrt(d)
    (q, k, v, o, st), b = run_forward(handle, rng, lens_q, lens_kv, 5, 6, hq, hk, d,
                                      causal=True, exact=exact)
    assert q.buf.size == (10 if exact else 15) * hq * d
    do = Thd(lens_q, 5, hq, d, exact=exact).fill(rng)
    dq, dk, dv = (Thd(lens_q, 5, hq, d, exact=exact), Thd(lens_kv, 6, hk, d, exact=exact),
                  Thd(lens_kv, 6, hk, d, exact=exact))
    g = new_graph(handle)
    pack = {}
    Q, K, V, O, DO = (ragged_tensor(g, n, t, pack) for n, t in
                      (("Q", q), ("K", k), ("V", v), ("O", o), ("dO", do)))
    ST = ragged_tensor(g, "Stats", st, pack)
    DQ, DK, DV = g.sdpa_backward(Q, K, V, O, DO, ST, attn_scale=scale, use_causal_mask=True,
                                 use_padding_mask=True, seq_len_q=seq_lens(g, pack, "lq", lens_q),
                                 seq_len_kv=seq_lens(g, pack, "lkv", lens_kv),
                                 max_total_seq_len_q=sum(lens_q),
                                 max_total_seq_len_kv=sum(lens_kv))
    for t, thd, n in ((DQ, dq, "dQ"), (DK, dk, "dK"), (DV, dv, "dV")):
        set_ragged_output(g, t, thd, pack, n)
    build(g)
    g.execute(pack, workspace_for(g))
    for i in range(b):
        _, _, rdq, rdk, rdv = attend(q.seq(i), k.seq(i), v.seq(i), scale, True, do=do.seq(i))
        assert_close(dq.seq(i), rdq, rtol=1e-5)
        assert_close(dk.seq(i), rdk, rtol=1e-5)
        assert_close(dv.seq(i), rdv, rtol=1e-5)
    assert dq.untouched_tail() and dk.untouched_tail() and dv.untouched_tail()


def test_ragged_offset_getters_and_serialization(handle):
    g = new_graph(handle)
    R = g.tensor(name="R", dim=[3, 1, 1, 1], data_type=I32)
    Q = g.tensor(name="Q", dim=[2, 2, 4, 8])
    assert Q.get_ragged_offset() is None and Q.get_ragged_offset_multiplier() == 1
    Q.set_ragged_offset(R).set_ragged_offset_multiplier(16)
    assert Q.get_ragged_offset().get_name() == "R" and Q.get_ragged_offset_multiplier() == 16
    K, V = g.tensor(name="K", dim=[2, 2, 4, 8]), g.tensor(name="V", dim=[2, 2, 4, 8])
    L = g.tensor(name="L", dim=[2, 1, 1, 1], data_type=I32)
    O, _ = g.sdpa(Q, K, V, use_padding_mask=True, seq_len_q=L, seq_len_kv=L)
    O.set_output(True)
    g.validate()
    text = g.to_json()
    assert "Q_RAGGED_OFFSET" in text and "ragged_offset_multiplier" in text
    key = g.key()
    Q.set_ragged_offset_multiplier(32)
    g.validate()
    assert g.key() != key, "the multiplier must change the graph's key"


def errors_graph(handle, lens=2, odims=None, otype=I32, padding=True, **kw):
    g = new_graph(handle)
    R = g.tensor(name="R", dim=odims or [lens + 1, 1, 1, 1], data_type=otype)
    Q = g.tensor(name="Q", dim=[lens, 2, 4, 8], ragged_offset=R)
    K, V = g.tensor(name="K", dim=[lens, 2, 4, 8]), g.tensor(name="V", dim=[lens, 2, 4, 8])
    args = {}
    if padding:
        L = g.tensor(name="L", dim=[lens, 1, 1, 1], data_type=I32)
        args = dict(use_padding_mask=True, seq_len_q=L, seq_len_kv=L)
    O, _ = g.sdpa(Q, K, V, **args, **kw)
    O.set_output(True)
    g.q = Q
    return g


def test_one_dimensional_offsets_are_promoted(handle):
    g = new_graph(handle)
    R1 = g.tensor(name="R1", dim=[3], data_type=I32)
    R2 = g.tensor(name="R2", dim=[3], data_type=I32)
    Q = g.tensor(name="Q", dim=[2, 2, 4, 8], ragged_offset=R1)
    K = g.tensor(name="K", dim=[2, 2, 4, 8]).set_ragged_offset(R2)
    assert R1.get_dim() == [3, 1, 1, 1] and R2.get_dim() == [3, 1, 1, 1]
    assert Q.get_ragged_offset().get_name() == "R1" and K.get_ragged_offset().get_name() == "R2"


def test_validation_errors(handle):
    with pytest.raises(ValueError, match=r"Q_RAGGED_OFFSET 'R'.*dims \[2,1,1,1\].*\[3,1,1,1\]"):
        errors_graph(handle, odims=[2, 1, 1, 1]).validate()
    with pytest.raises(ValueError, match="must be INT32 or INT64 but is FLOAT"):
        errors_graph(handle, otype=F32).validate()
    with pytest.raises(cudnn.NotSupportedError, match="ragged offsets need the padding mask"):
        errors_graph(handle, padding=False).validate()
    g = new_graph(handle)
    Q = g.tensor(name="Q", dim=[1, 1, 4, 8])
    O, _ = g.sdpa(Q, Q, Q, max_total_seq_len_q=4)
    O.set_output(True)
    with pytest.raises(cudnn.NotSupportedError, match="max_total_seq_len_q is only supported"):
        g.validate()
    g = new_graph(handle)
    R = g.tensor(name="R", dim=[2, 1, 1, 1], data_type=I32)
    A = g.tensor(name="A", dim=[1, 4, 4], ragged_offset=R)
    C = g.matmul(A, A)
    C.set_output(True)
    with pytest.raises(ValueError, match="'A' has a ragged offset but matmul .* dense"):
        g.validate()
    g = errors_graph(handle)
    g.q.set_ragged_offset_multiplier(0)
    with pytest.raises(ValueError, match="ragged_offset_multiplier 0"):
        g.validate()


def test_offset_out_of_bounds_is_an_error(handle, rng):
    # Sequence 1 claims to start 4 tokens before the end of a 2-sequence buffer of s_max 4,
    # with 4 rows: its last row is the buffer's last; a start one token later is outside.
    g = new_graph(handle)
    pack = {}
    q = Thd([4, 4], 4, 2, 8).fill(rng)
    Q = ragged_tensor(g, "Q", q, pack)
    K = ragged_tensor(g, "K", q, pack)
    V = ragged_tensor(g, "V", q, pack)
    bad = q.offsets().copy()
    bad[1] += 2 * 8  # one token later
    rq = [t for t in pack if t.get_name() == "Q_ragged"][0]
    pack[rq] = bad
    O, _ = g.sdpa(Q, K, V, use_padding_mask=True, seq_len_q=seq_lens(g, pack, "lq", [4, 4]),
                  seq_len_kv=seq_lens(g, pack, "lkv", [4, 4]))
    out = np.full(128, np.nan, np.float32)
    O.set_output(True).set_dim([2, 2, 4, 8]).set_stride([64, 8, 16, 1])
    pack[O] = out
    build(g)
    with pytest.raises(ValueError, match=r"'Q' \(uid \d+\): sequence 1 starts at element 80 .*"
                                         r"reach element 143, but the array holds 128 elements"):
        g.execute(pack, workspace_for(g))
    assert np.all(np.isnan(out)), "a refused execute wrote the output"
    bad[1] = -1
    with pytest.raises(Exception, match=r"Q_RAGGED_OFFSET 'Q_ragged'\[1\] = -1"):
        g.execute(pack, workspace_for(g))


# ---- paged K / V ------------------------------------------------------------------------------

def run_paged(handle, rng, lens_q, lens_kv, sq, hq, hk, d, page, pages_per_seq, num_pages,
              paged_v=True, max_seq=None, table=None):
    b = len(lens_q)
    q = rng.standard_normal((b, hq, sq, d)).astype(np.float32)
    kc = rng.standard_normal((num_pages, hk, page, d)).astype(np.float32)
    vc = rng.standard_normal((num_pages, hk, page, d)).astype(np.float32)
    if table is None:
        table = rng.permutation(num_pages)[:b * pages_per_seq].astype(np.int32).reshape(
            b, 1, pages_per_seq, 1)
    skv = max_seq or pages_per_seq * page
    # The dense K / V the pages describe (for the reference and for a dense V).
    kd = np.zeros((b, hk, skv, d), np.float32)
    vd = np.zeros((b, hk, skv, d), np.float32)
    for i in range(b):
        for j in range(min(skv, pages_per_seq * page)):
            pg = min(int(table[i, 0, j // page, 0]), num_pages - 1)  # bad tables: see errors
            kd[i, :, j] = kc[pg, :, j % page]
            vd[i, :, j] = vc[pg, :, j % page]
    g = new_graph(handle)
    pack = {}

    def t(name, a, dt=F32):
        x = g.tensor(name=name, dim=list(a.shape), stride=[s // a.itemsize for s in a.strides],
                     data_type=dt)
        pack[x] = a
        return x

    Q, K = t("Q", q), t("Kc", kc)
    V = t("Vc", vc) if paged_v else t("V", vd)
    TK = t("table_k", table, I32)
    TV = t("table_v", table, I32) if paged_v else None
    O, _ = g.sdpa(Q, K, V, attn_scale=0.5, use_padding_mask=True,
                  seq_len_q=t("lq", np.array(lens_q, np.int32).reshape(-1, 1, 1, 1), I32),
                  seq_len_kv=t("lkv", np.array(lens_kv, np.int32).reshape(-1, 1, 1, 1), I32),
                  paged_attention_k_table=TK, paged_attention_v_table=TV,
                  paged_attention_max_seq_len_kv=max_seq)
    o = np.full((b, hq, sq, d), np.nan, np.float32)
    O.set_output(True).set_dim(list(o.shape)).set_stride([s // 4 for s in o.strides])
    pack[O] = o
    build(g)
    g.execute(pack, workspace_for(g))
    for i in range(b):
        ref, _ = attend(q[i, :, :lens_q[i]], kd[i, :, :lens_kv[i]], vd[i, :, :lens_kv[i]], 0.5)
        assert_close(o[i, :, :lens_q[i]], ref, rtol=1e-5)
        assert np.all(o[i, :, lens_q[i]:] == 0)  # padded query rows: O = 0
    return o


@pytest.mark.parametrize("paged_v,max_seq", [(True, None), (False, None), (True, 10)])
def test_paged_against_dense_numpy(handle, rng, paged_v, max_seq):
    run_paged(handle, rng, [3, 5], [9, 10] if max_seq else [12, 7], 5, 4, 2, 8, page=4,
              pages_per_seq=3, num_pages=9, paged_v=paged_v, max_seq=max_seq)


def test_paged_errors(handle, rng):
    table = np.array([[0, 1, 9], [2, 3, 4]], np.int32).reshape(2, 1, 3, 1)
    with pytest.raises(Exception, match=r"PAGE_TABLE_K 'table_k'\[0, 0, 2, 0\] = 9 .*not a page"):
        run_paged(handle, rng, [2, 2], [12, 4], 2, 2, 2, 8, page=4, pages_per_seq=3,
                  num_pages=9, table=table)
    with pytest.raises(ValueError, match="paged_attention_max_seq_len_kv 13 is outside 1..12"):
        run_paged(handle, rng, [2, 2], [4, 4], 2, 2, 2, 8, page=4, pages_per_seq=3,
                  num_pages=9, max_seq=13)
    g = new_graph(handle)
    Q = g.tensor(name="Q", dim=[2, 2, 4, 8])
    KC = g.tensor(name="Kc", dim=[6, 2, 4, 8])
    T = g.tensor(name="T", dim=[2, 1, 3, 1], data_type=I32)
    O, _ = g.sdpa(Q, KC, KC, paged_attention_k_table=T, paged_attention_v_table=T)
    O.set_output(True)
    with pytest.raises(cudnn.NotSupportedError, match="page tables need the padding mask"):
        g.validate()
    g = new_graph(handle)
    Q = g.tensor(name="Q", dim=[2, 2, 4, 8])
    T = g.tensor(name="T", dim=[2, 3, 1, 1], data_type=I32)
    L = g.tensor(name="L", dim=[2, 1, 1, 1], data_type=I32)
    O, _ = g.sdpa(Q, KC, KC, paged_attention_k_table=T, use_padding_mask=True, seq_len_q=L,
                  seq_len_kv=L)
    O.set_output(True)
    with pytest.raises(ValueError, match=r"PAGE_TABLE_K 'T' has dims \[2,3,1,1\]"):
        g.validate()
