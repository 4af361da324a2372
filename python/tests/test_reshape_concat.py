"""reshape and concatenate in the frontend's call forms, against numpy, on the CPU engine."""

import numpy as np
import pytest

import dnngraph as cudnn
from conftest import assert_close, build, elem_strides, poisoned, workspace_for


def graph(handle):
    return cudnn.pygraph(handle=handle, io_data_type=cudnn.data_type.FLOAT,
                         compute_data_type=cudnn.data_type.FLOAT)


def run(g, pack, out_tensor, out):
    build(g)
    g.execute({**pack, out_tensor: out}, workspace_for(g))
    return out


def test_reshape_view_only_row_major_is_numpy_reshape(handle, rng):
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    g = graph(handle)
    X = g.tensor_like(x)
    Y = g.reshape(X, name="r")  # reshape_mode defaults to VIEW_ONLY
    Y.set_output(True).set_dim([6, 4]).set_stride([4, 1])
    out = run(g, {X: x}, Y, poisoned((6, 4)))
    np.testing.assert_array_equal(out, x.reshape(6, 4))


def test_reshape_default_strides_and_out_dims(handle, rng):
    # Y's strides default to channels-last (dim 1 innermost), as the frontend fills them: a
    # VIEW_ONLY Y [2, 3, 4] over a row-major X reads X's memory at 12n + c + 3h + ... .
    x = rng.standard_normal((2, 12)).astype(np.float32)
    g = graph(handle)
    X = g.tensor_like(x)
    Y = g.reshape(input=X, reshape_mode=cudnn.reshape_mode.VIEW_ONLY, out_dims=[2, 3, 4])
    Y.set_output(True)
    g.validate()
    assert Y.get_dim() == [2, 3, 4]
    assert Y.get_stride() == [12, 1, 3]
    out = np.empty(24, np.float32)
    out.fill(np.nan)
    view = np.lib.stride_tricks.as_strided(out, (2, 3, 4), (48, 4, 12))
    run(g, {X: x}, Y, view)
    np.testing.assert_array_equal(out, x.reshape(-1))  # memory unchanged


def test_reshape_logical_follows_row_major_order(handle, rng):
    x = np.asfortranarray(rng.standard_normal((4, 6)).astype(np.float32))
    g = graph(handle)
    X = g.tensor(name="x", dim=[4, 6], stride=elem_strides(x), data_type=cudnn.data_type.FLOAT)
    Y = g.reshape(X, reshape_mode=cudnn.reshape_mode.LOGICAL)
    Y.set_output(True).set_dim([3, 8]).set_stride([8, 1])
    out = run(g, {X: x}, Y, poisoned((3, 8)))
    np.testing.assert_array_equal(out, np.ascontiguousarray(x).reshape(3, 8))


def test_reshape_errors_name_the_op(handle, rng):
    x = rng.standard_normal((2, 3)).astype(np.float32)
    g = graph(handle)
    X = g.tensor_like(x)
    g.reshape(X, name="r").set_output(True).set_dim([5])
    with pytest.raises(ValueError, match="reshape 'r'.*number of elements"):
        g.validate()
    g = graph(handle)
    g.reshape(g.tensor_like(x), name="r").set_output(True)
    with pytest.raises(ValueError, match="set_dim"):
        g.validate()


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_concatenate_matches_numpy(handle, rng, axis):
    shapes = [[2, 3, 4], [2, 3, 4], [2, 3, 4]]
    for i, e in enumerate((1, 2, 3)):
        shapes[i][axis] = e
    xs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    g = graph(handle)
    ts = [g.tensor_like(x) for x in xs]
    Y = g.concatenate(ts, axis, name="cat")
    Y.set_output(True)
    ref = np.concatenate(xs, axis=axis)
    out = run(g, dict(zip(ts, xs)), Y, poisoned(ref.shape))
    np.testing.assert_array_equal(out, ref)


def test_concatenate_keywords_in_place_index_and_arrays(handle, rng):
    a = rng.standard_normal((3, 2)).astype(np.float32)
    b = rng.standard_normal((3, 5)).astype(np.float32)
    g = graph(handle)
    A = g.tensor_like(a)
    # An array in the list becomes a graph tensor bound for execute, as in the frontend.
    Y = g.concatenate(inputs=[A, b], axis=1, in_place_index=0, name="cat")
    Y.set_output(True)
    out = run(g, {A: a}, Y, poisoned((3, 7)))
    assert_close(out, np.concatenate([a, b], axis=1), rtol=0, atol=0)


def test_concatenate_errors(handle, rng):
    a = rng.standard_normal((3, 2)).astype(np.float32)
    b = rng.standard_normal((4, 5)).astype(np.float32)
    g = graph(handle)
    g.concatenate([g.tensor_like(a), g.tensor_like(b)], axis=1, name="cat").set_output(True)
    with pytest.raises(ValueError, match="concatenate 'cat'.*IN_1.*but axis 1"):
        g.validate()
    g = graph(handle)
    with pytest.raises(ValueError, match="1 to 8 tensors"):
        g.concatenate([g.tensor_like(a) for _ in range(9)], axis=0)
    with pytest.raises(ValueError, match="1 to 8 tensors"):
        g.concatenate([], axis=0)
