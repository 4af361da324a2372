"""block_scale_quantize / block_scale_dequantize (MX block scaling) on the CPU engine, against
numpy with ml_dtypes' FP8 types."""

import numpy as np
import pytest

import dnngraph as cudnn
from conftest import build, workspace_for

ml_dtypes = pytest.importorskip("ml_dtypes")
E8M0 = ml_dtypes.float8_e8m0fnu
E4M3 = ml_dtypes.float8_e4m3fn
E5M2 = ml_dtypes.float8_e5m2


def mx_reference(x, block, axis, emax, max_fin, fp8):
    """OCP MX quantization in float64: per block scale 2^(floor(log2(amax)) - emax)."""
    xm = np.moveaxis(x.astype(np.float64), axis, -1)
    blocks = xm.reshape(xm.shape[:-1] + (xm.shape[-1] // block, block))
    amax = np.abs(blocks).max(axis=-1, keepdims=True)
    _, e = np.frexp(np.where(amax > 0, amax, 1.0))  # amax = m * 2^e, m in [0.5, 1)
    exp = np.where(amax > 0, e - 1 - emax, -127).clip(-127, 127)
    scale = np.exp2(exp.astype(np.float64))
    y = np.clip(blocks / scale, -max_fin, max_fin).astype(fp8)
    y = np.moveaxis(y.reshape(xm.shape), -1, axis)
    s = np.moveaxis(scale[..., 0], -1, axis)
    return y, s


@pytest.mark.parametrize("ytype,fp8,emax,max_fin,axis", [
    (cudnn.data_type.FP8_E4M3, E4M3, 8, 448.0, None),
    (cudnn.data_type.FP8_E5M2, E5M2, 15, 57344.0, None),
    (cudnn.data_type.FP8_E4M3, E4M3, 8, 448.0, 1),
])
def test_quantize_matches_the_mx_rule(handle, rng, ytype, fp8, emax, max_fin, axis):
    x = (rng.standard_normal((4, 64)) * np.exp2(rng.integers(-6, 6, (4, 1)))).astype(np.float32)
    x[0, :32] = 0.0  # a block of zeros: scale 2^-127
    x[1, 5] = 1.9375 * 256  # saturates in E4M3 (496 > 448)
    g = cudnn.pygraph(handle=handle, io_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT)
    X = g.tensor_like(x)
    Y, S = g.block_scale_quantize(X, block_size=32 if axis is None else 2, axis=axis,
                                  name="q")
    Y.set_output(True).set_data_type(ytype)
    S.set_output(True)
    build(g)
    assert S.get_data_type() == cudnn.data_type.FP8_E8M0
    block = 32 if axis is None else 2
    want_y, want_s = mx_reference(x, block, 1 if axis is None else axis, emax, max_fin, fp8)
    y = np.full(x.shape, 0x7F, np.uint8).view(fp8)
    s = np.full(S.get_dim(), 0xFF, np.uint8).view(E8M0)
    g.execute({X: x, Y: y, S: s}, workspace_for(g))
    np.testing.assert_array_equal(s.astype(np.float64), want_s)
    np.testing.assert_array_equal(y.astype(np.float64), want_y.astype(np.float64))


def test_dequantize_multiplies_each_block_by_its_scale(handle, rng):
    codes = rng.integers(0, 0x7E, size=(2, 3, 8)).astype(np.uint8)
    q = codes.view(E4M3)
    s = rng.integers(120, 134, size=(2, 3, 2)).astype(np.uint8).view(E8M0)
    g = cudnn.pygraph(handle=handle, io_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT)
    Q, S = g.tensor_like(q), g.tensor_like(s)
    Y = g.block_scale_dequantize(Q, S, block_size=[1, 4], name="dq")
    Y.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    build(g)
    y = np.full(q.shape, np.nan, np.float32)
    g.execute({Q: q, S: s, Y: y}, workspace_for(g))
    want = q.astype(np.float64) * np.repeat(s.astype(np.float64), 4, axis=2)
    np.testing.assert_array_equal(y, want.astype(np.float32))


def test_quantize_then_dequantize_round_trip(handle, rng):
    x = rng.standard_normal((8, 32)).astype(np.float32)
    g = cudnn.pygraph(handle=handle, io_data_type=cudnn.data_type.FLOAT,
                      intermediate_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT)
    X = g.tensor_like(x)
    Y, S = g.block_scale_quantize(input=X, block_size=16)
    Y.set_data_type(cudnn.data_type.FP8_E4M3)
    R = g.block_scale_dequantize(input=Y, descale=S, block_size=[16])
    R.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    build(g)
    r = np.full(x.shape, np.nan, np.float32)
    g.execute({X: x, R: r}, workspace_for(g))
    yq, sq = mx_reference(x, 16, 1, 8, 448.0, E4M3)
    np.testing.assert_array_equal(r, (yq.astype(np.float64) * np.repeat(sq, 16, axis=1))
                                  .astype(np.float32))
    # E4M3 keeps 3 mantissa bits (2^-4 relative; 2^-3 where a block's top saturates at 448)
    # and its subnormals are spaced 2^-9 (times the block's scale).
    bs = np.repeat(sq, 16, axis=1)
    assert np.all(np.abs(r - x) <= np.abs(x) * 2.0 ** -3 + bs * 2.0 ** -10)


def test_errors_name_the_op(handle, rng):
    x = rng.standard_normal((2, 30)).astype(np.float32)
    g = cudnn.pygraph(handle=handle, io_data_type=cudnn.data_type.FLOAT)
    Y, S = g.block_scale_quantize(g.tensor_like(x), block_size=32, name="q")
    Y.set_output(True).set_data_type(cudnn.data_type.FP8_E4M3)
    S.set_output(True)
    with pytest.raises(ValueError, match="block_scale_quantize 'q'.*block_size 32.*divide"):
        g.validate()
    g = cudnn.pygraph(handle=handle, io_data_type=cudnn.data_type.FLOAT)
    Y, S = g.block_scale_quantize(g.tensor_like(x), block_size=2, name="q")
    Y.set_output(True)
    S.set_output(True)
    with pytest.raises(ValueError, match=r"FP8_E4M3, FP8_E5M2 \(MXFP8\) or FP4_E2M1"):
        g.validate()
    with pytest.raises(cudnn.NotSupportedError, match="group_offset"):
        g.block_scale_quantize(g.tensor_like(x), block_size=2, group_offset=g.tensor_like(x))
