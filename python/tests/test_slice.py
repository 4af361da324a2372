"""graph.slice(input, slices) with Python slice objects, against numpy indexing."""

import numpy as np
import pytest

import dnngraph as cudnn
from conftest import build, poisoned, tensor_of, workspace_for


def run_slice(handle, a, slices, into_relu=False):
    g = cudnn.pygraph(handle=handle, io_data_type=cudnn.data_type.FLOAT)
    X = tensor_of(g, a, "x")
    Y = g.slice(X, slices, name="s")
    if into_relu:
        Y = g.relu(input=Y)
    Y.set_output(True)
    build(g)
    # Y is packed in X's dim order: allocate it with the strides the graph inferred.
    dim, stride = Y.get_dim(), Y.get_stride()
    flat = poisoned((int(np.prod(dim)),), a.dtype)
    y = np.lib.stride_tricks.as_strided(flat, dim, [s * a.itemsize for s in stride])
    g.execute({X: a, Y: y}, workspace_for(g))
    return np.array(y)


@pytest.mark.parametrize(
    "slices",
    [
        [slice(1, 3), slice(0, 5, 2), slice(None)],
        [slice(None, None, 2), slice(-3, None), slice(1, -1, 3)],
        [slice(2, 3)],  # trailing dims taken whole
        [slice(0, 100), slice(-100, 2)],  # bounds clamp as in Python
    ],
)
def test_slice_matches_numpy(handle, rng, slices):
    a = rng.standard_normal((4, 6, 5)).astype(np.float32)
    y = run_slice(handle, a, slices)
    np.testing.assert_array_equal(y, a[tuple(slices)])


def test_slice_of_a_channels_last_input_feeds_an_op(handle, rng):
    a = np.transpose(rng.standard_normal((2, 7, 7, 3)).astype(np.float32), (0, 3, 1, 2))  # NHWC
    sl = [slice(None), slice(1, 3), slice(0, 7, 3), slice(2, 6)]
    y = run_slice(handle, a, sl, into_relu=True)
    np.testing.assert_array_equal(y, np.maximum(a[tuple(sl)], 0))


def test_slice_errors(handle):
    g = cudnn.pygraph(handle=handle, io_data_type=cudnn.data_type.FLOAT)
    X = g.tensor(name="x", dim=[4, 6], stride=[6, 1], data_type=cudnn.data_type.FLOAT)
    with pytest.raises(ValueError, match="step"):
        g.slice(X, [slice(None, None, -1)])
    with pytest.raises(TypeError, match="Python slice"):
        g.slice(X, [1, slice(None)])
    with pytest.raises(ValueError, match="3 slices"):
        g.slice(X, [slice(None)] * 3)
    g.slice(X, [slice(2, 2), slice(None)], name="empty").set_output(True)
    with pytest.raises(ValueError, match="empty slice"):
        g.validate()
