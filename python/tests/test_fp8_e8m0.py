"""FP8_E8M0 (exponent-only MX scales): conversions on the CPU reference engine against
ml_dtypes.float8_e8m0fnu, through graphs that read and write it."""

import numpy as np
import pytest

import dnngraph as cudnn
from conftest import build, workspace_for

ml_dtypes = pytest.importorskip("ml_dtypes")
E8M0 = ml_dtypes.float8_e8m0fnu


def test_data_type_names_and_interop(handle):
    assert cudnn.data_type.FP8_E8M0.name == "FP8_E8M0"
    g = cudnn.pygraph(handle=handle, io_data_type=cudnn.data_type.FLOAT)
    t = g.tensor_like(np.ones((2, 3), dtype=E8M0))
    assert t.get_data_type() == cudnn.data_type.FP8_E8M0


def test_float_to_e8m0_rounds_as_ml_dtypes(handle, rng):
    # Random magnitudes over the whole range, ties (1.5 * 2^k), the clamps and the NaN cases.
    x = np.concatenate([
        np.exp2(rng.uniform(-140, 127, 64)) * rng.uniform(1.0, 2.0, 64),
        [1.5, 3.0, 0.75, 2.0 ** -127, 2.0 ** -130, 2.0 ** 127, 1.6 * 2.0 ** 127, 0.0, -2.0,
         np.inf, np.nan, 1.0]]).astype(np.float32)
    x = x.reshape(1, -1)
    g = cudnn.pygraph(handle=handle, io_data_type=cudnn.data_type.FLOAT)
    X = g.tensor_like(x)
    Y = g.identity(input=X)
    Y.set_output(True).set_data_type(cudnn.data_type.FP8_E8M0)
    build(g)
    y = np.full(x.shape, 0x55, dtype=np.uint8).view(E8M0)  # poisoned
    g.execute({X: x, Y: y}, workspace_for(g))
    want = x.astype(E8M0)
    np.testing.assert_array_equal(y.view(np.uint8), want.view(np.uint8))


def test_e8m0_scales_multiply_exactly(handle, rng):
    codes = rng.integers(100, 150, size=(4, 8)).astype(np.uint8)
    s = codes.view(E8M0)
    x = rng.standard_normal((4, 8)).astype(np.float32)
    g = cudnn.pygraph(handle=handle, io_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT)
    X, S = g.tensor_like(x), g.tensor_like(s)
    Y = g.mul(a=X, b=S)
    Y.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    build(g)
    y = np.full((4, 8), np.nan, dtype=np.float32)
    g.execute({X: x, S: s, Y: y}, workspace_for(g))
    np.testing.assert_array_equal(y, x * np.exp2(codes.astype(np.float64) - 127))
