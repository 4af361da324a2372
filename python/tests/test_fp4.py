"""FP4_E2M1 on the CPU reference engine from Python: decoding against ml_dtypes'
float4_e2m1fn, packed buffers (uint8 and torch.float4_e2m1fn_x2, two elements per byte along
the unit-stride dim, the even one in the low nibble), MXFP4 / NVFP4 block_scale_quantize against
numpy, buffer checks and validation refusals."""

import numpy as np
import pytest

import dnngraph as cudnn
from conftest import build, workspace_for

ml_dtypes = pytest.importorskip("ml_dtypes")
F4 = ml_dtypes.float4_e2m1fn
E8M0 = ml_dtypes.float8_e8m0fnu
E4M3 = ml_dtypes.float8_e4m3fn
FP4 = cudnn.data_type.FP4_E2M1


def graph(handle):
    return cudnn.pygraph(handle=handle, io_data_type=cudnn.data_type.FLOAT,
                         compute_data_type=cudnn.data_type.FLOAT)


def ml_codes(values):
    """ml_dtypes' E2M1 codes of float values (NaN left out: ml_dtypes and dnngraph differ)."""
    return np.asarray(values, np.float32).astype(F4).view(np.uint8) & 0x0F


def test_every_code_decodes_as_ml_dtypes(handle):
    # All 256 bytes as a [1, 512] FP4 tensor: identity to FLOAT decodes every code in both
    # nibbles.
    packed = np.arange(256, dtype=np.uint8).reshape(1, 256)
    g = graph(handle)
    X = g.tensor(name="X", dim=[1, 512], stride=[512, 1], data_type=FP4)
    Y = g.identity(input=X)
    Y.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    build(g)
    y = np.full((1, 512), np.nan, np.float32)
    g.execute({X: packed, Y: y}, workspace_for(g))
    lo = (packed & 0x0F).view(F4).astype(np.float32)
    hi = (packed >> 4).view(F4).astype(np.float32)
    np.testing.assert_array_equal(y[0, 0::2], lo[0])
    np.testing.assert_array_equal(y[0, 1::2], hi[0])
    np.testing.assert_array_equal(np.signbit(y[0, 0::2]), np.signbit(lo[0]))
    np.testing.assert_array_equal(cudnn.unpack_fp4(packed), y)


def test_float_to_fp4_rounds_as_ml_dtypes(handle, rng):
    # Random values over and beyond the range, every tie, saturation and signed zeros.
    ties = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0]
    x = np.concatenate([rng.uniform(-8, 8, 200), ties, np.negative(ties),
                        [0.0, -0.0, 6.0, 6.5, -100.0, np.inf, -np.inf, 0.1, -0.3]])
    x = x.astype(np.float32)
    if x.size % 2:
        x = np.append(x, np.float32(1.0))
    x = x.reshape(1, -1)
    g = graph(handle)
    X = g.tensor_like(x)
    Y = g.identity(input=X)
    Y.set_output(True).set_data_type(FP4)
    build(g)
    y = np.full((1, x.shape[1] // 2), 0xEE, np.uint8)
    g.execute({X: x, Y: y}, workspace_for(g))
    codes = np.empty(x.shape, np.uint8)
    codes[:, 0::2], codes[:, 1::2] = y & 0x0F, y >> 4
    np.testing.assert_array_equal(codes, ml_codes(x))
    np.testing.assert_array_equal(cudnn.pack_fp4(x), y)


def test_nan_stores_as_positive_zero(handle):
    x = np.array([[np.nan, 1.0]], np.float32)
    g = graph(handle)
    X = g.tensor_like(x)
    Y = g.identity(input=X)
    Y.set_output(True).set_data_type(FP4)
    build(g)
    y = np.full((1, 1), 0xEE, np.uint8)
    g.execute({X: x, Y: y}, workspace_for(g))
    assert y[0, 0] == 0x20  # NaN -> code 0 in the low nibble, 1.0 (code 2) in the high one


def test_packing_order_by_hand(handle):
    # [2, 4] values {1, -2, 6, 0.5 | 0, 3, -0.5, 4}: codes {2, C, 7, 1 | 0, 5, 9, 6} ->
    # bytes {0xC2, 0x17 | 0x50, 0x69}.
    x = np.array([[1, -2, 6, 0.5], [0, 3, -0.5, 4]], np.float32)
    assert cudnn.pack_fp4(x).tolist() == [[0xC2, 0x17], [0x50, 0x69]]
    g = graph(handle)
    X = g.tensor_like(x)
    Y = g.identity(input=X)
    Y.set_output(True).set_data_type(FP4)
    build(g)
    y = np.zeros((2, 2), np.uint8)
    g.execute({X: x, Y: y}, workspace_for(g))
    assert y.tolist() == [[0xC2, 0x17], [0x50, 0x69]]


def mx_reference(x, block):
    """MXFP4 in float64: scale 2^(floor(log2(amax)) - 2), Y = X / scale rounded (ml_dtypes)
    after saturating to +-6."""
    b = x.astype(np.float64).reshape(x.shape[0], -1, block)
    amax = np.abs(b).max(axis=-1, keepdims=True)
    scale = np.exp2(np.floor(np.log2(amax)) - 2)
    y = np.clip(b / scale, -6, 6).astype(F4).astype(np.float64).reshape(x.shape)
    return y, scale[..., 0]


def nv_reference(x, block):
    """NVFP4 in float64: scale = amax / 6 rounded up to an E4M3 value."""
    b = x.astype(np.float64).reshape(x.shape[0], -1, block)
    amax = np.abs(b).max(axis=-1, keepdims=True) / 6
    e4m3 = np.arange(1, 0x7F, dtype=np.uint8).view(E4M3).astype(np.float64)  # ascending
    scale = e4m3[np.searchsorted(e4m3, np.minimum(amax, 448.0), side="left")]
    y = np.clip(b / scale, -6, 6).astype(F4).astype(np.float64).reshape(x.shape)
    return y, scale[..., 0]


@pytest.mark.parametrize("recipe,block,stype,ref", [
    ("mxfp4", 32, cudnn.data_type.FP8_E8M0, mx_reference),
    ("nvfp4", 16, cudnn.data_type.FP8_E4M3, nv_reference),
])
def test_quantize_recipes_match_numpy(handle, rng, recipe, block, stype, ref):
    x = (rng.standard_normal((4, 64)) * np.exp2(rng.integers(-4, 4, (4, 1)))).astype(np.float32)
    g = graph(handle)
    X = g.tensor_like(x)
    Y, S = g.block_scale_quantize(X, block_size=block, name=recipe)
    Y.set_output(True).set_data_type(FP4)
    S.set_output(True).set_data_type(stype)
    build(g)
    y = np.full((4, 32), 0xEE, np.uint8)  # poison: codes 14 (-4) in both nibbles
    s = np.full(S.get_dim(), 0x7F, np.uint8)
    g.execute({X: x, Y: y, S: s}, workspace_for(g))
    want_y, want_s = ref(x, block)
    sdt = E8M0 if stype == cudnn.data_type.FP8_E8M0 else E4M3
    np.testing.assert_array_equal(s.view(sdt).astype(np.float64), want_s)
    np.testing.assert_array_equal(cudnn.unpack_fp4(y), want_y)
    # Dequantized values are within the format's error: half a step of the block's scale,
    # plus saturation (MX blocks may hold values up to 8 * scale).
    deq = cudnn.unpack_fp4(y).reshape(4, -1, block) * s.view(sdt).astype(np.float64)[..., None]
    q = np.abs(x.astype(np.float64)).reshape(4, -1, block) / s.view(sdt).astype(np.float64)[
        ..., None]
    bound = (np.maximum(q - 6, 0) + np.where(q < 2, 0.25, np.where(q < 4, 0.5, 1.0))) * \
        s.view(sdt).astype(np.float64)[..., None]
    assert (np.abs(deq - x.reshape(4, -1, block)) <= bound).all()


def test_dequantize_and_matmul_from_uint8(handle, rng):
    # C = dequantize(A) @ B: A [1, 8, 64] FP4 given as packed uint8 [1, 8, 32], MX scales.
    a_bytes = rng.integers(0, 256, (1, 8, 32)).astype(np.uint8)
    a_scale = rng.integers(124, 131, (1, 8, 2)).astype(np.uint8)
    b = rng.standard_normal((1, 64, 5)).astype(np.float32)
    g = graph(handle)
    A = g.tensor(name="A", dim=[1, 8, 64], stride=[512, 64, 1], data_type=FP4)
    AS = g.tensor(name="AS", dim=[1, 8, 2], stride=[16, 2, 1], data_type=cudnn.data_type.FP8_E8M0)
    B = g.tensor_like(b)
    deq = g.block_scale_dequantize(A, AS, block_size=[1, 32])
    C = g.matmul(deq, B)
    C.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    build(g)
    c = np.full((1, 8, 5), np.nan, np.float32)
    g.execute({A: a_bytes, AS: a_scale.view(E8M0), B: b, C: c}, workspace_for(g))
    a = cudnn.unpack_fp4(a_bytes).astype(np.float64) * np.repeat(
        a_scale.view(E8M0).astype(np.float64), 32, axis=-1)
    np.testing.assert_allclose(c, a @ b.astype(np.float64), rtol=1e-5, atol=1e-6)


torch = None
try:
    import torch  # noqa: F811
except ImportError:
    pass
HAS_TORCH_FP4 = torch is not None and hasattr(torch, "float4_e2m1fn_x2")


@pytest.mark.skipif(not HAS_TORCH_FP4, reason="torch without float4_e2m1fn_x2 (torch < 2.8)")
def test_torch_float4_e2m1fn_x2_buffers(handle, rng):
    x = rng.uniform(-6, 6, (3, 8)).astype(np.float32)
    packed = torch.from_numpy(cudnn.pack_fp4(x)).view(torch.float4_e2m1fn_x2)
    g = graph(handle)
    X = g.tensor_like(packed)  # a [3, 4] x2 tensor is a [3, 8] FP4 tensor
    assert X.get_data_type() == FP4
    assert list(X.get_dim()) == [3, 8] and list(X.get_stride()) == [8, 1]
    two = np.full((1, 1), 2, np.float32)
    TWO = g.tensor_like(two)
    Y = g.mul(a=X, b=TWO)
    Y.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    Z = g.identity(input=X)
    Z.set_output(True).set_data_type(FP4)
    build(g)
    y = torch.full((3, 8), float("nan"))
    z = torch.zeros((3, 4), dtype=torch.uint8).view(torch.float4_e2m1fn_x2)
    g.execute({X: packed, TWO: two, Y: y, Z: z}, workspace_for(g))
    np.testing.assert_array_equal(y.numpy(), 2 * cudnn.unpack_fp4(cudnn.pack_fp4(x)))
    assert torch.equal(z.view(torch.uint8), packed.view(torch.uint8))
    np.testing.assert_array_equal(cudnn.unpack_fp4(z), cudnn.unpack_fp4(packed))
    # The frontend-style wrapper allocates FP4 outputs as float4_e2m1fn_x2 with dims halved.
    t = g.tensor(name="T", dim=[4, 6], stride=[6, 1], data_type=FP4)
    out = cudnn.Graph._empty_fp4(type("G", (), {"_device": lambda self: "cpu"})(),
                                 t.get_dim(), t.get_stride())
    assert out.dtype == torch.float4_e2m1fn_x2 and tuple(out.shape) == (4, 3)
    # A torch tensor of wider elements is refused by its element size.
    with pytest.raises(ValueError, match=r"is FP4_E2M1 but the array has 4-byte elements"):
        g.execute({X: torch.zeros((3, 8)), TWO: two, Y: y, Z: z}, workspace_for(g))


def test_buffer_checks_name_the_problem(handle):
    g = graph(handle)
    X = g.tensor(name="X", dim=[2, 8], stride=[8, 1], data_type=FP4)
    Y = g.identity(input=X)
    Y.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    build(g)
    y = np.zeros((2, 8), np.float32)
    ws = workspace_for(g)
    g.execute({X: np.zeros((2, 4), np.uint8), Y: y}, ws)  # the packed bytes: fine
    g.execute({X: np.zeros(8, np.uint8), Y: y}, ws)  # flat bytes: fine
    with pytest.raises(ValueError, match=r"ml_dtypes.float4_e2m1fn, which does not pack"):
        g.execute({X: np.zeros((2, 8), F4), Y: y}, ws)
    with pytest.raises(ValueError, match=r"4-byte elements.*uint8 array or a "
                                         r"torch.float4_e2m1fn_x2 tensor"):
        g.execute({X: np.zeros((2, 8), np.float32), Y: y}, ws)
    with pytest.raises(ValueError, match=r"two elements per byte.*shape \(2, 8\)"):
        g.execute({X: np.zeros((2, 8), np.uint8), Y: y}, ws)  # unpacked shape
    with pytest.raises(ValueError, match=r"\(FP4_E2M1, two elements per byte\) is 'X' "
                                         r"\[2,4\]:\[4,1\] UINT8 but the array has shape \(6,\)"):
        g.execute({X: np.zeros(6, np.uint8), Y: y}, ws)  # too few bytes


def test_validation_refusals(handle):
    g = graph(handle)
    X = g.tensor(name="X", dim=[4, 5], stride=[5, 1], data_type=FP4)
    g.identity(input=X, name="id").set_output(True).set_data_type(cudnn.data_type.FLOAT)
    with pytest.raises(ValueError, match=r"tensor 'X'.*'id'.*unit-stride dim 1 has extent 5.*"
                                         r"must be even"):
        g.validate()
    g = graph(handle)
    X = g.tensor(name="X", dim=[4, 4], stride=[8, 2], data_type=FP4)
    g.identity(input=X).set_output(True).set_data_type(cudnn.data_type.FLOAT)
    with pytest.raises(ValueError, match=r"tensor 'X'.*no dim has stride 1"):
        g.validate()
    g = graph(handle)
    x = np.ones((2, 2), np.float32)
    A = g.tensor_like(x)
    c = g.tensor(name="c", dim=[1], stride=[1], data_type=FP4, is_pass_by_value=True)
    g.mul(a=A, b=c).set_output(True)
    with pytest.raises(ValueError, match=r"pass-by-value tensor 'c'.*FP4_E2M1"):
        g.validate()


def test_ml_dtypes_arrays_are_refused_by_tensor_like(handle):
    g = graph(handle)
    with pytest.raises(ValueError, match=r"one FP4 value per byte.*pack_fp4"):
        g.tensor_like(np.zeros((2, 4), F4))
    # As a type name it is FP4_E2M1.
    t = g.tensor(name="T", dim=[2, 4], stride=[4, 1], data_type=F4)
    assert t.get_data_type() == FP4
    # pack_fp4 takes ml_dtypes arrays.
    v = np.array([[0.5, -6, 1, 3]], np.float32)
    # codes {1, 0xF, 2, 5} -> bytes {0xF1, 0x52}
    assert cudnn.pack_fp4(v.astype(F4)).tolist() == cudnn.pack_fp4(v).tolist() == [[0xF1, 0x52]]
