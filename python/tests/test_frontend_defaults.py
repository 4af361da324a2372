"""The frontend defaults dnngraph promises (docs/compatibility.md), through the public API and
with numbers: what a frontend-written call that leaves a keyword out gets."""

import numpy as np
import pytest

import dnngraph as cudnn
from conftest import assert_close, poisoned, workspace_for
from sdpa_ref import attention, fp32_graph

B, H, S, D = 1, 2, 6, 8
SCALE = 0.3


def qkv(rng):
    return tuple(rng.standard_normal((B, H, S, D)).astype(np.float32) for _ in range(3))


def run_sdpa(handle, q, k, v, **kw):
    g = fp32_graph(handle)
    Q, K, V = g.tensor_like(q), g.tensor_like(k), g.tensor_like(v)
    O, stats = g.sdpa(q=Q, k=K, v=V, attn_scale=SCALE, **kw)
    O.set_output(True)
    pack = {Q: q, K: k, V: v, O: poisoned((B, H, S, D))}
    lse = None
    if stats is not None:
        lse = poisoned((B, H, S, 1))
        stats.set_output(True).set_data_type(cudnn.data_type.FLOAT)
        pack[stats] = lse
    g.build()
    g.execute(pack, workspace_for(g))
    return stats, pack[O], lse


def test_sdpa_is_inference_by_default(handle, rng):
    """No generate_stats / is_inference: the frontend's default is inference, with no Stats."""
    q, k, v = qkv(rng)
    o_ref, lse_ref = attention(q, k, v, SCALE)
    stats, o, _ = run_sdpa(handle, q, k, v)
    assert stats is None, "sdpa without generate_stats/is_inference must not make Stats"
    assert_close(o, o_ref)
    # The explicit forms: training makes Stats, the log-sum-exp of each row.
    for kw in (dict(is_inference=False), dict(generate_stats=True)):
        stats, o, lse = run_sdpa(handle, q, k, v, **kw)
        assert stats is not None, kw
        assert_close(o, o_ref)
        assert_close(lse, lse_ref)
    stats, o, _ = run_sdpa(handle, q, k, v, generate_stats=False)
    assert stats is None
    assert_close(o, o_ref)


def test_sdpa_fp8_makes_no_stats_by_default(handle):
    g = cudnn.pygraph(handle=handle, io_data_type=cudnn.data_type.FP8_E4M3,
                      intermediate_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT)
    Q, K, V = (g.tensor(name=n, dim=[1, 2, 8, 16], stride=[256, 128, 16, 1],
                        data_type=cudnn.data_type.FP8_E4M3) for n in "qkv")
    f = [g.tensor(name=f"f{i}", dim=[1, 1, 1, 1], stride=[1, 1, 1, 1],
                  data_type=cudnn.data_type.FLOAT) for i in range(6)]
    outs = g.sdpa_fp8(Q, K, V, *f)
    assert len(outs) == 4 and outs[1] is None, "sdpa_fp8 makes Stats only with generate_stats"
    outs = g.sdpa_fp8(Q, K, V, *f, generate_stats=True)
    assert outs[1] is not None


def test_unused_tensors_are_allowed_by_default(handle, rng):
    g = cudnn.pygraph(handle=handle, io_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT)
    assert g.allow_unused_tensors is True
    x = rng.standard_normal((2, 3)).astype(np.float32)
    X = g.tensor_like(x)
    unused = g.tensor(name="unused", dim=[4], data_type=cudnn.data_type.FLOAT)
    Y = g.relu(input=X)
    Y.set_output(True)
    g.build()
    y = poisoned((2, 3))
    g.execute({X: x, Y: y, unused: np.ones(4, np.float32)}, workspace_for(g))
    np.testing.assert_array_equal(y, np.maximum(x, 0))
    native = cudnn.NativeGraph(handle=handle, io_data_type=cudnn.data_type.FLOAT,
                               compute_data_type=cudnn.data_type.FLOAT)
    X = native.tensor(name="X", dim=[2, 3], data_type=cudnn.data_type.FLOAT)
    native.tensor(name="lonely", dim=[4], data_type=cudnn.data_type.FLOAT)
    native.relu(input=X).set_output(True)
    with pytest.raises(ValueError, match="lonely"):
        native.validate()


def test_matmul_padding_defaults_to_zero(handle, rng):
    a = rng.standard_normal((1, 3, 4)).astype(np.float32)
    b = rng.standard_normal((1, 4, 5)).astype(np.float32)
    g = cudnn.pygraph(handle=handle, io_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT)
    A, Bt = g.tensor_like(a), g.tensor_like(b)
    Y = g.matmul(A=A, B=Bt)
    Y.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    g.build()
    y = poisoned((1, 3, 5))
    g.execute({A: a, Bt: b, Y: y}, workspace_for(g))
    assert_close(y, a.astype(np.float64) @ b)


def test_experimental_norm_ops_default_eps():
    """dnngraph.experimental.ops layer_norm / rms_norm: eps 1e-5 when not given. Rows of variance
    ~1e-6, where any other default changes the result by far more than the tolerance."""
    torch = pytest.importorskip("torch")
    ops = cudnn.experimental.ops
    gen = torch.Generator().manual_seed(21)
    x = torch.randn(3, 5, 32, generator=gen) * 1e-3
    w, b = torch.randn(32, generator=gen), torch.randn(32, generator=gen)
    tf = torch.nn.functional
    want = tf.layer_norm(x.double(), (32,), w.double(), b.double(), 1e-5)
    assert_close(ops.layer_norm(x, (32,), w, b).double().numpy(), want.numpy(), rtol=1e-4)
    want = tf.rms_norm(x.double(), (32,), w.double(), 1e-5) + b.double()
    assert_close(ops.rms_norm(x, w, b).double().numpy(), want.numpy(), rtol=1e-4)
