"""sdpa / sdpa_backward called the way frontend-written attention code calls them: every
keyword spelled out (unset ones as None/False), implementation=, unfuse_fma=, stats_use_log2=,
1-D sequence-length tensors, outputs re-dimensioned with set_dim/set_stride, int uid keys.
Numbers against an fp64 numpy reference (fp32 1e-5), outputs poisoned."""

import numpy as np
import pytest

import dnngraph as cudnn
from conftest import assert_close, build, poisoned, workspace_for
from sdpa_ref import attention, fp32_graph

B, HQ, HK, SQ, SKV, D, DV = 2, 4, 2, 5, 7, 8, 4
SCALE = 0.125


def reference(q, k, v, seq_q=None, seq_kv=None, do=None):
    """fp64 attention with an optional padding mask; GQA by repeat. Returns O, LSE (and dQ, dK,
    dV when do is given); rows past seq_q are zero in O and dQ."""
    return attention(q, k, v, SCALE, seq_q=seq_q, seq_kv=seq_kv, do=do)


def fe_tensor(g, uid, a, dt=cudnn.data_type.FLOAT):
    st = [s // a.itemsize for s in a.strides]
    return g.tensor(uid=uid, dim=a.shape, stride=st, data_type=dt)


# Every keyword of the frontend's sdpa that frontend-written code passes unset.
FWD_UNSET = dict(bias=None, block_mask=None, use_alibi_mask=False, dropout=None, rng_dump=None,
                 cu_seq_len_q=None, cu_seq_len_kv=None, paged_attention_k_table=None,
                 paged_attention_v_table=None, paged_attention_max_seq_len_kv=None,
                 score_max=None, score_sum_exp=None, sink_token=None, unfuse_fma=False,
                 max_total_seq_len_q=None, max_total_seq_len_kv=None, stats_use_log2=False,
                 diagonal_band_left_bound=None, diagonal_band_right_bound=None,
                 diagonal_alignment=cudnn.diagonal_alignment.TOP_LEFT)


def inputs(rng):
    q = rng.standard_normal((B, HQ, SQ, D)).astype(np.float32)
    k = rng.standard_normal((B, HK, SKV, D)).astype(np.float32)
    v = rng.standard_normal((B, HK, SKV, DV)).astype(np.float32)
    return q, k, v


@pytest.mark.parametrize("impl", ["AUTO", "COMPOSITE", "UNIFIED"])
@pytest.mark.parametrize("one_d", [True, False], ids=["seq_len_1d", "seq_len_4d"])
def test_forward_and_backward_in_the_frontend_form(handle, rng, impl, one_d):
    q, k, v = inputs(rng)
    seq_q = rng.integers(1, SQ + 1, B).astype(np.int32)
    seq_kv = rng.integers(1, SKV + 1, B).astype(np.int32)
    shape = (B,) if one_d else (B, 1, 1, 1)
    lq, lkv = seq_q.reshape(shape), seq_kv.reshape(shape)
    implementation = getattr(cudnn.attention_implementation, impl)

    g = fp32_graph(handle)
    tq, tk, tv = fe_tensor(g, 0, q), fe_tensor(g, 1, k), fe_tensor(g, 2, v)
    tlq = fe_tensor(g, 11, lq, cudnn.data_type.INT32)
    tlkv = fe_tensor(g, 12, lkv, cudnn.data_type.INT32)
    o, stats = g.sdpa(name="fwd", q=tq, k=tk, v=tv, generate_stats=True, attn_scale=SCALE,
                      use_padding_mask=True, seq_len_q=tlq, seq_len_kv=tlkv,
                      implementation=implementation, **FWD_UNSET)
    out = poisoned((B, HQ, SQ, DV))
    # Stats packed [b, h, s_q, 1] while the other tensors keep their own layout.
    lse = poisoned((B, HQ, SQ, 1))
    o.set_uid(3).set_output(True).set_dim(out.shape).set_stride([s // 4 for s in out.strides])
    stats.set_uid(4).set_output(True).set_data_type(cudnn.data_type.FLOAT).set_dim(
        lse.shape).set_stride([s // 4 for s in lse.strides])
    build(g)
    pack = {0: q, 1: k, 2: v, 3: out, 4: lse, 11: lq, 12: lkv}
    g.execute(pack, workspace_for(g), handle=handle)
    o_ref, lse_ref = reference(q, k, v, seq_q, seq_kv)
    rows = np.arange(SQ)[None, None, :, None] < seq_q[:, None, None, None]
    assert_close(np.where(rows, out, 0.0), o_ref)
    assert_close(np.where(rows, lse, 0.0), np.where(rows, lse_ref, 0.0))

    do = rng.standard_normal(out.shape).astype(np.float32)
    g2 = fp32_graph(handle)
    t = [fe_tensor(g2, uid, a) for uid, a in ((0, q), (1, k), (2, v), (3, out), (9, do), (4, lse))]
    tlq2 = fe_tensor(g2, 11, lq, cudnn.data_type.INT32)
    tlkv2 = fe_tensor(g2, 12, lkv, cudnn.data_type.INT32)
    dq, dk, dv = g2.sdpa_backward(
        name="bwd", q=t[0], k=t[1], v=t[2], o=t[3], dO=t[4], stats=t[5], attn_scale=SCALE,
        bias=None, dBias=None, use_alibi_mask=False, use_padding_mask=True, seq_len_q=tlq2,
        seq_len_kv=tlkv2, max_total_seq_len_q=None, max_total_seq_len_kv=None,
        diagonal_band_left_bound=None, diagonal_band_right_bound=None,
        diagonal_alignment=cudnn.diagonal_alignment.TOP_LEFT, dropout=None,
        use_deterministic_algorithm=True, sink_token=None, dSink_token=None,
        implementation=implementation)
    grads = [poisoned(a.shape) for a in (q, k, v)]
    for uid, tg, a in zip((6, 7, 8), (dq, dk, dv), grads):
        tg.set_uid(uid).set_output(True).set_dim(a.shape).set_stride([s // 4 for s in a.strides])
    build(g2)
    g2.execute({0: q, 1: k, 2: v, 3: out, 9: do, 4: lse, 6: grads[0], 7: grads[1],
                8: grads[2], 11: lq, 12: lkv}, workspace_for(g2), handle=handle)
    _, _, dq_ref, dk_ref, dv_ref = reference(q, k, v, seq_q, seq_kv, do)
    for got, ref in zip(grads, (dq_ref, dk_ref, dv_ref)):
        assert_close(got, ref)


def test_one_d_seq_len_must_have_one_length_per_batch_item(handle, rng):
    q, k, v = inputs(rng)
    g = fp32_graph(handle)
    lens = np.full((B + 1,), SQ, dtype=np.int32)
    o, _ = g.sdpa(q=fe_tensor(g, 0, q), k=fe_tensor(g, 1, k), v=fe_tensor(g, 2, v),
                  generate_stats=False, use_padding_mask=True,
                  seq_len_q=fe_tensor(g, 11, lens, cudnn.data_type.INT32),
                  seq_len_kv=fe_tensor(g, 12, lens, cudnn.data_type.INT32))
    o.set_output(True)
    with pytest.raises(ValueError, match=r"SEQ_LEN_Q.*\[3,1,1,1\].*expected \[2,1,1,1\]"):
        g.validate()


def test_stats_use_log2_is_refused_at_validate_like_the_frontend(handle, rng):
    q, k, v = inputs(rng)
    g = fp32_graph(handle)
    # The node is made (frontend-written code catches the refusal around the build steps).
    o, stats = g.sdpa(q=fe_tensor(g, 0, q), k=fe_tensor(g, 1, k), v=fe_tensor(g, 2, v),
                      generate_stats=True, stats_use_log2=True)
    o.set_output(True)
    stats.set_output(True)
    with pytest.raises(cudnn.cudnnGraphNotSupportedError, match=r"stats_use_log2=True.*9\.27"):
        g.validate()
    with pytest.raises(cudnn.cudnnGraphNotSupportedError, match=r"stats_use_log2"):
        g.build()


def test_stats_use_log2_without_stats_changes_nothing(handle, rng):
    q, k, v = inputs(rng)
    g = fp32_graph(handle)
    o, stats = g.sdpa(q=fe_tensor(g, 0, q), k=fe_tensor(g, 1, k), v=fe_tensor(g, 2, v),
                      generate_stats=False, attn_scale=SCALE, stats_use_log2=True)
    assert stats is None
    out = poisoned((B, HQ, SQ, DV))
    o.set_uid(3).set_output(True).set_dim(out.shape).set_stride([s // 4 for s in out.strides])
    build(g)
    g.execute({0: q, 1: k, 2: v, 3: out}, workspace_for(g), handle=handle)
    assert_close(out, reference(q, k, v)[0])
