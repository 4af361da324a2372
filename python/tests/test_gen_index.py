"""gen_index (pointwise GEN_INDEX) against numpy index grids."""

import numpy as np
import pytest

import dnngraph as cudnn
from conftest import build, poisoned, tensor_of, workspace_for


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_gen_index_matches_numpy_indices(handle, rng, axis):
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    g = cudnn.pygraph(handle=handle, io_data_type=cudnn.data_type.FLOAT)
    X = tensor_of(g, x, "x")
    Y = g.gen_index(input=X, axis=axis, compute_data_type=cudnn.data_type.INT32)
    Y.set_output(True).set_data_type(cudnn.data_type.INT32)
    build(g)
    y = poisoned(x.shape, np.int32)
    g.execute({X: x, Y: y}, workspace_for(g))
    np.testing.assert_array_equal(y, np.indices(x.shape)[axis])


def test_gen_index_feeds_a_causal_mask(handle, rng):
    # The frontend's mask idiom: keep s[i, j] where col <= row, else -inf-like.
    s = rng.standard_normal((1, 1, 4, 4)).astype(np.float32)
    g = cudnn.pygraph(handle=handle, io_data_type=cudnn.data_type.FLOAT,
                      intermediate_data_type=cudnn.data_type.FLOAT)
    S = tensor_of(g, s, "s")
    row = g.gen_index(input=S, axis=2)
    col = g.gen_index(input=S, axis=3)
    keep = g.cmp_ge(input=row, comparison=col)
    keep.set_data_type(cudnn.data_type.BOOLEAN)
    Y = g.binary_select(input0=S, input1=-1e9, mask=keep)
    Y.set_output(True)
    build(g)
    y = poisoned(s.shape)
    g.execute({S: s, Y: y}, workspace_for(g))
    np.testing.assert_array_equal(y, np.where(np.tril(np.ones((4, 4), bool)), s, np.float32(-1e9)))


def test_gen_index_axis_is_checked(handle):
    g = cudnn.pygraph(handle=handle, io_data_type=cudnn.data_type.FLOAT)
    X = g.tensor(name="x", dim=[2, 3], stride=[3, 1])
    g.gen_index(input=X, axis=2, name="gi").set_output(True)
    with pytest.raises(ValueError, match=r"'gi'.*axis in \[0, 2\).*IN_0 'x'.*axis is 2"):
        g.validate()
