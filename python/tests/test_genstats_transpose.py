"""genstats and transpose against numpy."""

import numpy as np
import pytest

import dnngraph as cudnn
from conftest import assert_close, build, poisoned, tensor_of, workspace_for


def strided_out(t, dtype=np.float32):
    """A NaN-poisoned array with the dims and strides the graph inferred for t."""
    dim, stride = t.get_dim(), t.get_stride()
    span = 1 + sum((d - 1) * s for d, s in zip(dim, stride))
    flat = poisoned((span,), dtype)
    return np.lib.stride_tricks.as_strided(flat, dim, [s * np.dtype(dtype).itemsize
                                                        for s in stride])


@pytest.mark.parametrize("shape,channels_last", [((2, 3, 4, 5), False), ((3, 8, 2, 2), True),
                                                 ((4, 6), False)])
def test_genstats_sums_per_channel(handle, rng, shape, channels_last):
    x = rng.standard_normal(shape).astype(np.float32) + 0.5
    if channels_last:
        x = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    g = cudnn.pygraph(handle=handle, io_data_type=cudnn.data_type.FLOAT)
    X = tensor_of(g, x, "x")
    S, Q = g.genstats(input=X, name="stats")
    S.set_output(True)
    Q.set_output(True)
    build(g)
    want_dim = [1, shape[1]] + [1] * (len(shape) - 2)
    assert S.get_dim() == want_dim and Q.get_dim() == want_dim
    assert S.get_data_type() == cudnn.data_type.FLOAT
    s, q = strided_out(S), strided_out(Q)
    g.execute({X: x, S: s, Q: q}, workspace_for(g))
    axes = tuple(i for i in range(len(shape)) if i != 1)
    x64 = x.astype(np.float64)
    assert_close(s, x64.sum(axes, keepdims=True), rtol=1e-5)
    assert_close(q, (x64 * x64).sum(axes, keepdims=True), rtol=1e-5)


@pytest.mark.parametrize("perm", [[0, 2, 1, 3], [3, 2, 1, 0], [1, 0, 3, 2], [0, 1, 2, 3]])
def test_transpose_matches_numpy(handle, rng, perm):
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    g = cudnn.pygraph(handle=handle, io_data_type=cudnn.data_type.FLOAT)
    X = tensor_of(g, x, "x")
    Y = g.transpose(input=X, permutation=perm, name="t")
    Y.set_output(True)
    build(g)
    assert Y.get_dim() == [x.shape[p] for p in perm]
    # By default Y keeps X's memory order: its strides are X's permuted.
    assert Y.get_stride() == [x.strides[p] // 4 for p in perm]
    y = strided_out(Y)
    g.execute({X: x, Y: y}, workspace_for(g))
    np.testing.assert_array_equal(y, np.transpose(x, perm))


def test_transpose_into_an_op_with_packed_output(handle, rng):
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    g = cudnn.pygraph(handle=handle, io_data_type=cudnn.data_type.FLOAT)
    X = tensor_of(g, x, "x")
    Y = g.relu(input=g.transpose(input=X, permutation=[2, 0, 1]))
    Y.set_output(True).set_dim([5, 3, 4]).set_stride([12, 4, 1])
    build(g)
    y = poisoned((5, 3, 4))
    g.execute({X: x, Y: y}, workspace_for(g))
    np.testing.assert_array_equal(y, np.maximum(np.transpose(x, (2, 0, 1)), 0))


def test_transpose_errors(handle):
    g = cudnn.pygraph(handle=handle, io_data_type=cudnn.data_type.FLOAT)
    X = g.tensor(name="x", dim=[2, 3, 4], stride=[12, 4, 1])
    g.transpose(input=X, permutation=[0, 0, 1], name="bad").set_output(True)
    with pytest.raises(ValueError, match=r"transpose 'bad'.*permutation \[0,0,1\].*X 'x'"):
        g.validate()
