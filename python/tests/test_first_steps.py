"""The messages a first graph meets: no outputs marked, a virtual tensor in the pack, a
torch-style norm scale."""

import numpy as np
import pytest

import dnngraph as cudnn


def _mm_gelu(mark_output):
    g = cudnn.pygraph(handle=cudnn.create_handle(device="cpu"), name="mlp",
                      io_data_type=cudnn.data_type.FLOAT)
    rng = np.random.default_rng(7)
    a = rng.standard_normal((1, 4, 8), dtype=np.float32)
    b = rng.standard_normal((1, 8, 2), dtype=np.float32)
    A, B = g.tensor_like(a, "a"), g.tensor_like(b, "b")
    mm = g.matmul(A=A, B=B, name="mm")
    Y = g.gelu(input=mm, name="act")
    if mark_output:
        Y.set_output(True)
    return g, a, b, A, B, mm, Y


def test_graph_without_outputs_is_refused_naming_set_output():
    g, *_ = _mm_gelu(mark_output=False)
    with pytest.raises(ValueError) as e:
        g.build()
    msg = str(e.value)
    for part in ("graph 'mlp' has no outputs", "'act::OUT_0'", "set_output(True)", "build()"):
        assert part in msg, msg


def test_virtual_tensor_in_pack_says_set_output_before_build():
    g, a, b, A, B, mm, Y = _mm_gelu(mark_output=True)
    g.build()
    y = np.full((1, 4, 2), np.nan, np.float32)
    ws = np.empty(g.get_workspace_size(), np.uint8)
    t = np.full((1, 4, 2), np.nan, np.float32)
    for key in (mm, mm.get_uid()):  # keyed by the tensor and by its uid
        with pytest.raises(ValueError) as e:
            g.execute({A: a, B: b, Y: y, key: t}, ws)
        msg = str(e.value)
        assert "is virtual" in msg and "set_output(True)" in msg and "before build()" in msg, msg
        assert "belongs to" not in msg and "was it built" not in msg, msg
    # Without it the graph runs, and Y is gelu(a @ b).
    g.execute({A: a, B: b, Y: y}, ws)
    from math import erf, sqrt

    ref = np.vectorize(lambda v: 0.5 * v * (1 + erf(v / sqrt(2))))(a.astype(np.float64) @ b)
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)


def _layernorm(scale_dims):
    g = cudnn.pygraph(handle=cudnn.create_handle(device="cpu"), name="ln",
                      io_data_type=cudnn.data_type.FLOAT)
    X = g.tensor(name="x", dim=[2, 8, 32], data_type=cudnn.data_type.FLOAT)
    W = g.tensor(name="w", dim=scale_dims, data_type=cudnn.data_type.FLOAT)
    B = g.tensor(name="b", dim=scale_dims, data_type=cudnn.data_type.FLOAT)
    Y, _, _ = g.layernorm(input=X, scale=W, bias=B, epsilon=1e-5,
                          norm_forward_phase=cudnn.norm_forward_phase.INFERENCE)
    Y.set_output(True)
    return g


def test_torch_style_norm_scale_message_offers_per_last_dim_shape():
    with pytest.raises(ValueError) as e:
        _layernorm([32]).validate()
    msg = str(e.value)
    assert "expected [1,8,32]" in msg and "or [1,1,32]" in msg and "layer_norm(x, [32])" in msg, msg
    _layernorm([1, 1, 32]).validate()  # the shape the message offers is accepted
