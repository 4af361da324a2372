"""sdpa on packed THD tensors on the CPU engine: the layout serving code declares, dims
[b, h, s_max, d] with strides [h*d, d, h*d, 1] (the batch stride equals the token stride: the
ragged offsets, not the batch stride, place each sequence), in the frontend's keyword forms
(tensor(ragged_offset=...) for inputs, set_ragged_offset on outputs). Numbers against an fp64
attention computed per sequence here; outputs poisoned and checked untouched past the tokens;
overlap rules checked per sequence at validate and between sequences at execute. Buffers
holding exactly the packed tokens (what serving code allocates) are checked against the
offsets and lengths at execute, before anything runs."""

import math

import numpy as np
import pytest
import torch

import dnngraph as cudnn
from conftest import assert_close, build, workspace_for
from sdpa_ref import fp32_graph

F32, I32 = cudnn.data_type.FLOAT, cudnn.data_type.INT32


def attend_one(q, k, v, scale, causal_bottom_right=False):
    """fp64 attention of one sequence q [h, sq, d], k/v [h, skv, d]: O [h, sq, d] and the
    log-sum-exp [h, sq, 1]. causal_bottom_right: query i sees keys j <= i + (skv - sq)."""
    s = scale * np.einsum("hid,hjd->hij", q, k)
    if causal_bottom_right:
        sq, skv = q.shape[1], k.shape[1]
        keep = np.arange(skv)[None, :] <= np.arange(sq)[:, None] + (skv - sq)
        s = np.where(keep[None], s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    e = np.exp(s - m)
    z = e.sum(axis=-1, keepdims=True)
    return np.einsum("hij,hjd->hid", e / z, v), m + np.log(z)


class Packed:
    """b sequences of `lens` tokens, h heads of width d, packed one after another (token t of
    the batch at element t*h*d) in a buffer of b*s_max tokens, NaN past the tokens; exact: a
    buffer of the token total only."""

    def __init__(self, lens, s_max, h, d, exact=False):
        self.lens, self.s_max, self.h, self.d = list(lens), s_max, h, d
        self.cum = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
        tokens = int(self.cum[-1]) if exact else len(lens) * s_max
        self.buf = np.full(tokens * h * d, np.nan, dtype=np.float32)

    def fill(self, rng):
        n = int(self.cum[-1]) * self.h * self.d
        self.buf[:n] = rng.standard_normal(n).astype(np.float32)
        return self

    def dims(self):
        return [len(self.lens), self.h, self.s_max, self.d]

    def strides(self):
        t = self.h * self.d
        return [t, self.d, t, 1]

    def offsets(self, unit):
        return (self.cum * self.h * self.d // unit).astype(np.int32).reshape(-1, 1, 1, 1)

    def seq(self, i):
        t = self.buf[self.cum[i] * self.h * self.d:self.cum[i + 1] * self.h * self.d]
        return t.astype(np.float64).reshape(self.lens[i], self.h, self.d).transpose(1, 0, 2)

    def tail_untouched(self):
        return np.all(np.isnan(self.buf[int(self.cum[-1]) * self.h * self.d:]))


def int_input(g, pack, name, a):
    a = np.asarray(a, np.int32).reshape(-1, 1, 1, 1)
    t = g.tensor(name=name, dim=list(a.shape), stride=[1, 1, 1, 1], data_type=I32)
    pack[t] = a
    return t


def as_given(p, form):
    """The packed buffer as serving code passes it: flat, [tokens, h, d] or a torch tensor."""
    if form == "flat":
        return p.buf
    tokens = p.buf.reshape(-1, p.h, p.d)
    return torch.from_numpy(tokens) if form == "torch" else tokens


def thd_input(g, pack, name, p, unit, form="flat"):
    r = int_input(g, pack, name + "_ragged", p.offsets(unit))
    t = g.tensor(name=name, dim=p.dims(), stride=p.strides(), data_type=F32, ragged_offset=r,
                 ragged_offset_multiplier=unit)
    pack[t] = as_given(p, form)
    return t


def thd_output(g, pack, t, name, p, unit, offsets=None, form="flat"):
    off = p.offsets(unit) if offsets is None else offsets
    t.set_output(True).set_dim(p.dims()).set_stride(p.strides()).set_data_type(F32)
    t.set_ragged_offset(int_input(g, pack, name + "_ragged", off))
    t.set_ragged_offset_multiplier(unit)
    pack[t] = as_given(p, form)


def thd_graph(handle, rng, lens_q, lens_kv, sq, skv, h, d, unit_tokens, bottom_right=False,
              o_offsets=None, exact=False, form="flat"):
    q = Packed(lens_q, sq, h, d, exact).fill(rng)
    k = Packed(lens_kv, skv, h, d, exact).fill(rng)
    v = Packed(lens_kv, skv, h, d, exact).fill(rng)
    o, st = Packed(lens_q, sq, h, d, exact), Packed(lens_q, sq, h, 1, exact)
    g, pack = fp32_graph(handle), {}
    unit = h * d if unit_tokens else 1
    Q, K, V = (thd_input(g, pack, n, p, unit, form)
               for n, p in (("Q", q), ("K", k), ("V", v)))
    O, ST = g.sdpa(Q, K, V, attn_scale=1.0 / math.sqrt(d), generate_stats=True,
                   use_padding_mask=True, use_causal_mask_bottom_right=bottom_right,
                   seq_len_q=int_input(g, pack, "seq_q", lens_q),
                   seq_len_kv=int_input(g, pack, "seq_kv", lens_kv), name="sdpa_thd")
    thd_output(g, pack, O, "O", o, unit, o_offsets, form)
    thd_output(g, pack, ST, "Stats", st, h if unit_tokens else 1, form=form)
    return g, pack, (q, k, v, o, st)


def check_per_sequence(tensors, d, bottom_right=False):
    q, k, v, o, st = tensors
    for i in range(len(q.lens)):
        ref_o, ref_lse = attend_one(q.seq(i), k.seq(i), v.seq(i), 1.0 / math.sqrt(d),
                                    bottom_right)
        assert_close(o.seq(i), ref_o, rtol=1e-5)
        assert_close(st.seq(i), ref_lse, rtol=1e-5)
    assert o.tail_untouched() and st.tail_untouched(), "wrote past the packed tokens"


@pytest.mark.parametrize("unit_tokens", [False, True])
def test_packed_thd_three_sequences(handle, rng, unit_tokens):
    # 5 + 9 + 3 = 17 tokens: more than the b - 1 + s_max = 14 tokens the strides alone span.
    g, pack, t = thd_graph(handle, rng, [5, 9, 3], [5, 9, 3], 12, 12, 2, 8, unit_tokens)
    build(g)
    g.execute(pack, workspace_for(g))
    check_per_sequence(t, 8)


def test_chunked_prefill_bottom_right(handle, rng):
    # Each query chunk is the last lens_q tokens of its sequence's lens_kv (s_q < s_kv).
    g, pack, t = thd_graph(handle, rng, [4, 2, 3], [10, 6, 3], 4, 10, 2, 8, True,
                           bottom_right=True)
    build(g)
    g.execute(pack, workspace_for(g))
    check_per_sequence(t, 8, bottom_right=True)


def test_serving_dims_validate(handle):
    # The frontend's serving declaration: [4, 8, 256, 128] with strides [1024, 128, 1024, 1].
    g, b, h, s, d = fp32_graph(handle), 4, 8, 256, 128
    dims, strides = [b, h, s, d], [h * d, d, h * d, 1]

    def ragged(name):
        return g.tensor(name=name, dim=[b + 1, 1, 1, 1], stride=[1, 1, 1, 1], data_type=I32)

    def seq(name):
        return g.tensor(name=name, dim=[b, 1, 1, 1], stride=[1, 1, 1, 1], data_type=I32)

    Q, K, V = (g.tensor(name=n, dim=dims, stride=strides, data_type=F32, ragged_offset=ragged(n))
               for n in ("Q", "K", "V"))
    O, _ = g.sdpa(Q, K, V, attn_scale=0.125, generate_stats=False, use_padding_mask=True,
                  seq_len_q=seq("sq"), seq_len_kv=seq("skv"), name="sdpa_thd")
    O.set_output(True).set_dim(dims).set_stride(strides).set_ragged_offset(ragged("O_r"))
    g.validate()


def test_overlap_within_a_sequence_is_refused(handle):
    g, b, h, s, d = fp32_graph(handle), 2, 2, 4, 8
    dims = [b, h, s, d]
    r = g.tensor(name="r", dim=[b + 1, 1, 1, 1], stride=[1, 1, 1, 1], data_type=I32)
    sl = g.tensor(name="sl", dim=[b, 1, 1, 1], stride=[1, 1, 1, 1], data_type=I32)
    Q, K, V = (g.tensor(name=n, dim=dims, stride=[h * d, d, h * d, 1], data_type=F32,
                        ragged_offset=r) for n in ("Q", "K", "V"))
    O, _ = g.sdpa(Q, K, V, generate_stats=False, use_padding_mask=True, seq_len_q=sl,
                  seq_len_kv=sl, name="sdpa_thd")
    # The token stride d steps over one head only: heads of one sequence share addresses.
    O.set_output(True).set_dim(dims).set_stride([h * d, d, d, 1]).set_ragged_offset(r)
    with pytest.raises(ValueError, match=r"'sdpa_thd::O'.*elements of one sequence would share "
                                         r"addresses.*THD strides \[16,8,16,1\]"):
        g.validate()


def test_overlapping_output_sequences_fail_at_execute(handle, rng):
    # O's offsets (in tokens) start sequence 1 at token 3, inside sequence 0's 5 tokens.
    bad = np.array([0, 3, 14, 17], np.int32).reshape(-1, 1, 1, 1)
    g, pack, (_, _, _, o, _) = thd_graph(handle, rng, [5, 9, 3], [5, 9, 3], 12, 12, 2, 8, True,
                                         o_offsets=bad)
    build(g)
    with pytest.raises(ValueError, match="'sdpa_thd::O': sequence 1 starts at element 48.*inside "
                                         "sequence 0"):
        g.execute(pack, workspace_for(g))
    assert np.all(np.isnan(o.buf)), "a refused execute wrote the output"


def test_offsets_past_the_buffer_fail_at_execute(handle, rng):
    # Sequence 2's 3 tokens at token 40: past the 3 * 12 tokens of the buffer.
    bad = np.array([0, 5, 40, 43], np.int32).reshape(-1, 1, 1, 1)
    g, pack, _ = thd_graph(handle, rng, [5, 9, 3], [5, 9, 3], 12, 12, 2, 8, True,
                           o_offsets=bad)
    build(g)
    with pytest.raises(ValueError, match=r"'sdpa_thd::O' \(uid \d+\): sequence 2 starts at "
                                         r"element 640 \(ragged offset 40 x multiplier 16 of "
                                         r"'O_ragged'\) and its 3 rows \('seq_q'\) reach "
                                         r"element 687, but the array holds 576 elements"):
        g.execute(pack, workspace_for(g))


@pytest.mark.parametrize("form", ["flat", "tokens", "torch"])
@pytest.mark.parametrize("unit_tokens", [False, True])
def test_buffers_of_the_token_total(handle, rng, form, unit_tokens):
    # 5 + 9 + 3 = 17 tokens in each buffer, not 3 x 12: what serving code allocates.
    g, pack, t = thd_graph(handle, rng, [5, 9, 3], [5, 9, 3], 12, 12, 2, 8, unit_tokens,
                           exact=True, form=form)
    assert t[3].buf.size == 17 * 2 * 8
    build(g)
    g.execute(pack, workspace_for(g))
    check_per_sequence(t, 8)


@pytest.mark.parametrize("form", ["flat", "tokens", "torch"])
def test_a_one_token_buffer(handle, rng, form):
    # Decode of one sequence: Q and O hold one token ([1, h, d]), K and V five.
    g, pack, t = thd_graph(handle, rng, [1], [5], 4, 8, 2, 8, True, bottom_right=True,
                           exact=True, form=form)
    build(g)
    g.execute(pack, workspace_for(g))
    check_per_sequence(t, 8, bottom_right=True)


def test_heads_first_token_buffer_is_refused(handle, rng):
    # [h, tokens, d] holds the tokens in another order than the tensor's token stride says.
    g, pack, (q, _, _, _, _) = thd_graph(handle, rng, [5, 9, 3], [5, 9, 3], 12, 12, 2, 8, True,
                                         exact=True)
    Q = next(t for t in pack if getattr(t, "get_name", lambda: "")() == "Q")
    pack[Q] = np.ascontiguousarray(q.buf.reshape(-1, 2, 8).transpose(1, 0, 2))
    build(g)
    with pytest.raises(ValueError, match=r"tensor 'Q' .* but the array has shape \(2, 17, 8\)"):
        g.execute(pack, workspace_for(g))


def test_chunked_prefill_buffers_of_the_token_total(handle, rng):
    g, pack, t = thd_graph(handle, rng, [4, 2, 3], [10, 6, 3], 4, 10, 2, 8, True,
                           bottom_right=True, exact=True, form="tokens")
    build(g)
    g.execute(pack, workspace_for(g))
    check_per_sequence(t, 8, bottom_right=True)


def expect_refused(g, pack, outputs, match):
    """Built g's execute on pack refused (ValueError matching `match`), the outputs unwritten."""
    build(g)
    with pytest.raises(ValueError, match=match):
        g.execute(pack, workspace_for(g))
    assert all(np.all(np.isnan(t.buf)) for t in outputs), "a refused execute wrote"


@pytest.mark.parametrize("form", ["flat", "torch"])
def test_offset_past_a_token_total_buffer_is_refused(handle, rng, form):
    # O's last sequence moved one token on: its 3 rows end one token past the 17-token buffer.
    bad = np.array([0, 5, 15, 18], np.int32).reshape(-1, 1, 1, 1)
    g, pack, (_, _, _, o, st) = thd_graph(handle, rng, [5, 9, 3], [5, 9, 3], 12, 12, 2, 8, True,
                                          o_offsets=bad, exact=True, form=form)
    expect_refused(g, pack, (o, st), r"'sdpa_thd::O' \(uid \d+\): sequence 2 starts at element "
                   r"240 .* reach element 287, but the array holds 272 elements \(1088 bytes\)")


def test_lengths_past_a_token_total_buffer_are_refused(handle, rng):
    # seq_len_q says 4 tokens for the last sequence; the buffers hold its 3.
    g, pack, (_, _, _, o, st) = thd_graph(handle, rng, [5, 9, 3], [5, 9, 3], 12, 12, 2, 8, True,
                                          exact=True)
    seq_q = next(t for t in pack if getattr(t, "get_name", lambda: "")() == "seq_q")
    pack[seq_q] = np.array([5, 9, 4], np.int32).reshape(-1, 1, 1, 1)
    expect_refused(g, pack, (o, st), r"'Q' \(uid \d+\): sequence 2 .* its 4 rows \('seq_q'\) "
                   r"reach element 287, but the array holds 272 elements")
