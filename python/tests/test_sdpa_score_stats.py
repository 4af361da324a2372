"""sdpa score_max / score_sum_exp (the frontend's side outputs: the row max of the masked scores
and the row sum of exp(score - max)) against numpy on the CPU reference engine (fp32, 1e-5),
with padding, causal masks, ALiBi and sinks; rows that attend no key (padded queries) give
max, sum_exp and Stats -inf and O 0, as cuDNN 9.19 writes them. The combinations cuDNN's
composite softmax refuses (Stats with them, one without the other), implementation=UNIFIED
with them (cuDNN 9.21) and sdpa_fp8 with them are clear NotSupportedErrors."""

import math

import numpy as np
import pytest

import dnngraph as cudnn
from conftest import build, poisoned, tensor_of, workspace_for
from sdpa_ref import fp32_graph

B, HQ, HK, SQ, SKV, D = 2, 4, 2, 5, 7, 8
SCALE = 1.0 / math.sqrt(D)


def alibi_slopes(h):
    n = 2 ** int(math.floor(math.log2(h)))
    s = [2.0 ** (-8.0 * (i + 1) / n) for i in range(n)]
    s += [2.0 ** (-4.0 * (2 * i + 1) / n) for i in range(h - n)]
    return np.array(s).reshape(1, h, 1, 1)


def reference(q, k, v, seq_q=None, seq_kv=None, causal=False, alibi=False, sink=None):
    """fp64: O, Stats, row max and row sum of exp; rows with no key get 0, -inf, -inf, -inf."""
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    b, hq, sq, _ = q.shape
    skv = k.shape[2]
    g = hq // k.shape[1]
    s = SCALE * q @ np.repeat(k, g, axis=1).transpose(0, 1, 3, 2)
    row, col = np.arange(sq)[:, None], np.arange(skv)[None, :]
    if alibi:
        s = s + alibi_slopes(hq) * (col - row)
    keep = np.ones((b, 1, sq, skv), dtype=bool)
    if causal:
        keep &= col <= row
    if seq_q is not None:
        for i in range(b):
            keep[i, :, seq_q[i]:, :] = False
            keep[i, :, :, seq_kv[i]:] = False
    s = np.where(keep, s, -np.inf)
    m = s.max(-1, keepdims=True)
    if sink is not None:  # one more logit in every row of a query that is no padding
        sk = np.asarray(sink, dtype=np.float64).reshape(1, hq, 1, 1)
        query = np.arange(sq)[None, None, :, None] < _lens(seq_q, b, sq)
        m = np.where(query, np.maximum(m, sk), -np.inf)
    base = np.where(np.isfinite(m), m, 0.0)  # rows with no logit: nothing to subtract
    e = np.where(keep, np.exp(np.where(keep, s, 0.0) - base), 0.0)
    total = e.sum(-1, keepdims=True)
    if sink is not None:
        total = total + np.where(query, np.exp(sk - base), 0.0)
    with np.errstate(divide="ignore"):
        stats = m + np.log(total)
    p = np.divide(e, total, out=np.zeros_like(e), where=total > 0)
    o = p @ np.repeat(v, g, axis=1)
    # cuDNN 9.19 writes -inf, not the empty sum's 0, into sum_exp of a padded row.
    return o, stats, m, np.where(np.isfinite(m), total, -np.inf)


def _lens(seq, b, full):
    if seq is None:
        return np.full((b, 1, 1, 1), full)
    return np.asarray(seq).reshape(b, 1, 1, 1)


def inputs(rng, dv=D):
    q = rng.standard_normal((B, HQ, SQ, D)).astype(np.float32)
    k = rng.standard_normal((B, HK, SKV, D)).astype(np.float32)
    v = rng.standard_normal((B, HK, SKV, dv)).astype(np.float32)
    return q, k, v


def row_tensor(g, name):
    """A user-made [b, h, s_q, 1] FLOAT output, as the frontend's callers create them."""
    return g.tensor(name=name, dim=[B, HQ, SQ, 1], stride=[HQ * SQ, SQ, 1, 1],
                    data_type=cudnn.data_type.FLOAT).set_output(True)


def run(handle, q, k, v, seq_q=None, seq_kv=None, stats=False, sides=True, **kw):
    """O and (Stats or score_max, score_sum_exp) from the reference engine."""
    g = fp32_graph(handle)
    Q, K, V = (tensor_of(g, a, n) for a, n in zip((q, k, v), "QKV"))
    pack = {Q: q, K: k, V: v}
    if seq_q is not None:
        lq, lkv = (np.asarray(x, dtype=np.int32).reshape(B, 1, 1, 1) for x in (seq_q, seq_kv))
        LQ, LKV = tensor_of(g, lq, "seq_q"), tensor_of(g, lkv, "seq_kv")
        pack.update({LQ: lq, LKV: lkv})
        kw.update(use_padding_mask=True, seq_len_q=LQ, seq_len_kv=LKV)
    if "sink" in kw:
        sink = kw.pop("sink")
        S = tensor_of(g, sink, "sink")
        pack[S] = sink
        kw["sink_token"] = S
    MX = SE = None
    if sides:
        MX, SE = row_tensor(g, "max"), row_tensor(g, "sum_exp")
        kw.update(score_max=MX, score_sum_exp=SE)
    O, ST = g.sdpa(q=Q, k=K, v=V, generate_stats=stats, attn_scale=SCALE, **kw)
    o = poisoned((B, HQ, SQ, v.shape[3]))
    O.set_output(True).set_dim(list(o.shape)).set_stride([s // 4 for s in o.strides])
    pack[O] = o
    out = {"O": o}
    for name, t in (("max", MX), ("sum_exp", SE), ("stats", ST)):
        if t is None:
            continue
        a = poisoned((B, HQ, SQ, 1))
        if name == "stats":
            t.set_output(True).set_data_type(cudnn.data_type.FLOAT)
        pack[t] = a
        out[name] = a
    build(g)
    g.execute(pack, workspace_for(g))
    return out


def check(got, ref_o, ref_stats, ref_m, ref_sum, tol=1e-5):
    np.testing.assert_allclose(got["O"], ref_o, rtol=tol, atol=tol)
    if "max" in got:
        # -inf where the row attends no key, finite elsewhere: equal_nan=False keeps NaN out.
        np.testing.assert_allclose(got["max"], ref_m, rtol=tol, atol=tol)
        np.testing.assert_allclose(got["sum_exp"], ref_sum, rtol=tol, atol=tol)
    if "stats" in got:
        np.testing.assert_allclose(got["stats"], ref_stats, rtol=tol, atol=tol)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_max_and_sum_exp_match_numpy(handle, rng, causal):
    q, k, v = inputs(rng, dv=6)
    got = run(handle, q, k, v, use_causal_mask=causal)
    o, stats, m, total = reference(q, k, v, causal=causal)
    check(got, o, stats, m, total)
    # What they are for: Stats = max + log(sum_exp), as the frontend defines them.
    np.testing.assert_allclose(got["max"] + np.log(got["sum_exp"]), stats, rtol=1e-5, atol=1e-5)
    assert np.all(got["sum_exp"] >= 1.0 - 1e-6)  # the max's own term is exp(0) = 1


def test_padded_rows_give_minus_inf_max_and_sum(handle, rng):
    q, k, v = inputs(rng)
    seq_q, seq_kv = [3, 5], [7, 2]
    got = run(handle, q, k, v, seq_q, seq_kv)
    o, stats, m, total = reference(q, k, v, seq_q, seq_kv)
    check(got, o, stats, m, total)
    for name in ("max", "sum_exp"):
        assert np.all(got[name][0, :, 3:] == -np.inf), name
    assert np.all(np.isfinite(got["max"][1])) and np.all(got["sum_exp"][1] > 0.0)
    assert np.all(got["O"][0, :, 3:] == 0.0)


def test_padded_rows_stats_are_minus_inf(handle, rng):
    """Stats of a row with no key: -inf + log(0) = -inf, as cuDNN (>= 9.14) writes it."""
    q, k, v = inputs(rng)
    seq_q, seq_kv = [2, 5], [4, 7]
    got = run(handle, q, k, v, seq_q, seq_kv, stats=True, sides=False)
    o, stats, m, total = reference(q, k, v, seq_q, seq_kv)
    check(got, o, stats, m, total)
    assert np.all(got["stats"][0, :, 2:] == -np.inf) and np.all(got["O"][0, :, 2:] == 0.0)
    assert np.all(np.isfinite(got["stats"][0, :, :2])) and np.all(np.isfinite(got["stats"][1]))


def test_alibi_and_padding(handle, rng):
    q, k, v = inputs(rng)
    seq_q, seq_kv = [5, 4], [6, 7]
    got = run(handle, q, k, v, seq_q, seq_kv, use_causal_mask=True, use_alibi_mask=True)
    check(got, *reference(q, k, v, seq_q, seq_kv, causal=True, alibi=True))


def test_sink_is_in_max_and_sum(handle, rng):
    """With sinks the max is MAX'ed with the sink and the sum has exp(sink - max) (the
    frontend's composite softmax); a padded row still gives -inf in both."""
    q, k, v = inputs(rng)
    sink = (rng.standard_normal((1, HQ, 1, 1)) + 3.0).astype(np.float32)  # often the max
    seq_q, seq_kv = [4, 5], [7, 3]
    got = run(handle, q, k, v, seq_q, seq_kv, sink=sink)
    o, stats, m, total = reference(q, k, v, seq_q, seq_kv, sink=sink)
    check(got, o, stats, m, total)
    assert np.any(got["max"][:, :, :4] == sink.reshape(1, HQ, 1, 1))  # the sink won somewhere
    for name in ("max", "sum_exp"):
        assert np.all(got[name][0, :, 4:] == -np.inf), name


def refused(handle, rng, match, **kw):
    q, k, v = inputs(rng)
    g = fp32_graph(handle)
    Q, K, V = (tensor_of(g, a, n) for a, n in zip((q, k, v), "QKV"))
    for key in ("score_max", "score_sum_exp"):
        if kw.get(key) is True:
            kw[key] = row_tensor(g, key)
    O, ST = g.sdpa(q=Q, k=K, v=V, attn_scale=SCALE, **kw)
    O.set_output(True)
    if ST is not None:
        ST.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    with pytest.raises(cudnn.NotSupportedError, match=match):
        g.validate()


def test_stats_with_them_is_refused(handle, rng):
    refused(handle, rng, r"STATS .* and SCORE_MAX 'score_max' and SCORE_SUM_EXP 'score_sum_exp' "
            r"are given together.*STATS alone, SCORE_MAX with SCORE_SUM_EXP, or none",
            generate_stats=True, score_max=True, score_sum_exp=True)


@pytest.mark.parametrize("only", ["score_max", "score_sum_exp"])
def test_one_without_the_other_is_refused(handle, rng, only):
    refused(handle, rng, rf"'{only}' is given alone.*give both score_max and score_sum_exp",
            generate_stats=False, **{only: True})


def test_unified_implementation_is_refused(handle, rng):
    refused(handle, rng, r"implementation=UNIFIED.*cuDNN 9\.21",
            implementation=cudnn.attention_implementation.UNIFIED, score_max=True,
            score_sum_exp=True)


@pytest.mark.parametrize("impl", ["AUTO", "COMPOSITE"])
def test_other_implementations_serve_them(handle, rng, impl):
    q, k, v = inputs(rng)
    got = run(handle, q, k, v, implementation=getattr(cudnn.attention_implementation, impl))
    check(got, *reference(q, k, v))


def test_sdpa_fp8_refuses_them(handle):
    g = fp32_graph(handle)
    e4m3 = cudnn.data_type.FP8_E4M3
    Q, K, V = (g.tensor(name=n, dim=[1, 2, 4, 16], stride=[128, 64, 16, 1], data_type=e4m3)
               for n in "QKV")
    f = [g.tensor(name=f"f{i}", dim=[1, 1, 1, 1], stride=[1, 1, 1, 1],
                  data_type=cudnn.data_type.FLOAT) for i in range(6)]
    mx = g.tensor(name="mx", dim=[1, 2, 4, 1], stride=[8, 4, 1, 1],
                  data_type=cudnn.data_type.FLOAT)
    g.sdpa_fp8(Q, K, V, *f, is_inference=True, score_max=mx)
    with pytest.raises(cudnn.NotSupportedError, match=r"sdpa_fp8\(score_max=\.\.\.\).*FP8"):
        g.validate()
