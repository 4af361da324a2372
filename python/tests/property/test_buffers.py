"""Arrays of every dtype, shape and layout fed to a built graph: either the layout matches the
tensor exactly and the result is numpy's, or execute raises a dnngraph error and writes
nothing."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import dnngraph as cudnn

from conftest import scalar_mul_graph
from props import check_error, count_case, prop_settings, ws

SHAPE = (2, 3, 4)
DTYPES = [np.float32, np.float64, np.float16, np.int32, np.int8, np.uint8, np.bool_]


@pytest.fixture(scope="module")
def graph():
    handle = cudnn.create_handle(device="cpu")
    g = cudnn.pygraph(handle=handle, name="buffers", io_data_type=cudnn.data_type.FLOAT)
    A = g.tensor(name="A", dim=list(SHAPE))
    B = g.tensor(name="B", dim=[2, 4, 3], stride=[12, 1, 4])  # transposed last two dims
    Y = g.add(a=A, b=g.relu(input=A))
    Z = g.mul(a=B, b=B)
    Y.set_output(True).set_name("Y")
    Z.set_output(True).set_name("Z")
    g.build([cudnn.heur_mode.A])
    return g, A, B, Y, Z


@st.composite
def arrays(draw):
    """An array view: random dtype, a base shape, then transposes / steps / reshapes."""
    dtype = draw(st.sampled_from(DTYPES))
    ndim = draw(st.integers(1, 4))
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=ndim, max_size=ndim)))
    base = np.arange(int(np.prod(shape)) * 4, dtype=np.float64).astype(dtype)[: int(np.prod(shape))]
    a = base.reshape(shape)
    if draw(st.booleans()) and ndim > 1:
        a = a.transpose(draw(st.permutations(range(ndim))))
    if draw(st.booleans()):
        axis = draw(st.integers(0, ndim - 1))
        step = draw(st.integers(1, 2))
        idx = [slice(None)] * ndim
        idx[axis] = slice(None, None, step)
        a = a[tuple(idx)]
    if draw(st.booleans()):
        a = np.asfortranarray(a)
    return a


def matches(a, dims, strides_el, itemsize=4, kind="f"):
    """Does `a` have exactly this layout (dims of 1 ignored)?"""
    if a.dtype.kind != kind or a.dtype.itemsize != itemsize:
        return False
    if a.ndim == 1 and a.size == int(np.prod(dims)) and (a.size <= 1 or a.strides[0] == itemsize):
        return True  # a flat buffer of exactly the (dense) tensor's memory
    want = [(d, s) for d, s in zip(dims, strides_el) if d != 1]
    if any(s % a.itemsize for s in a.strides):
        return False
    have = [(d, s // a.itemsize) for d, s in zip(a.shape, a.strides) if d != 1]
    return want == have


def logical(x, dims, strides_el):
    """A flat buffer viewed with the tensor's dims and strides; other arrays (accepted up to dims
    of 1, e.g. (1, 2, 3, 4) for [2, 3, 4]) in the tensor's dims."""
    if x.ndim != 1:
        return x.reshape(dims)
    return np.lib.stride_tricks.as_strided(x, dims, [s * x.itemsize for s in strides_el])


@prop_settings(20000)
@given(x=arrays(), which=st.sampled_from(["A", "B", "Y"]))
def test_any_array_for_any_tensor(graph, x, which):
    count_case()
    g, A, B, Y, Z = graph
    rng = np.random.default_rng(0)
    a = rng.standard_normal(SHAPE).astype(np.float32)
    b = np.ascontiguousarray(rng.standard_normal((2, 3, 4)).astype(np.float32)).transpose(0, 2, 1)
    y = np.full(SHAPE, np.nan, np.float32)
    z = np.full((2, 3, 4), np.nan, np.float32).transpose(0, 2, 1)
    pack = {A: a, B: b, Y: y, Z: z}
    target = {"A": A, "B": B, "Y": Y}[which]
    layout = {"A": (SHAPE, [12, 4, 1]), "B": ((2, 4, 3), [12, 1, 4]), "Y": (SHAPE, [12, 4, 1])}
    if which == "Y" and not x.flags.writeable:
        x = x.copy()
    before = x.copy()
    pack[target] = x
    ok = matches(x, *layout[which])
    try:
        g.execute(pack, ws(g))
    except Exception as e:  # noqa: BLE001 - the property is about which errors
        check_error(e)
        assert not ok, f"refused a matching layout: {e}"
        if which == "Y":
            np.testing.assert_array_equal(x, before)  # nothing written
        assert np.isnan(y).all() or which == "Y"
        return
    assert ok, f"accepted shape {x.shape} strides {x.strides} dtype {x.dtype} for {which}"
    xv = logical(x, *layout[which])
    av = xv.astype(np.float64) if which == "A" else a.astype(np.float64)
    if which == "Y":
        np.testing.assert_allclose(xv, av + np.maximum(av, 0), rtol=1e-6)
    else:
        np.testing.assert_allclose(y, av + np.maximum(av, 0), rtol=1e-6)
    bv = xv.astype(np.float64) if which == "B" else b.astype(np.float64)
    np.testing.assert_allclose(z, bv * bv, rtol=1e-6)


@prop_settings(10000)
@given(value=st.one_of(st.integers(-2**70, 2**70), st.floats(allow_nan=True, allow_infinity=True),
                       st.booleans()),
       dtype=st.sampled_from([cudnn.data_type.FLOAT, cudnn.data_type.HALF, cudnn.data_type.BFLOAT16,
                              cudnn.data_type.FP8_E4M3, cudnn.data_type.FP8_E5M2,
                              cudnn.data_type.INT8, cudnn.data_type.UINT8, cudnn.data_type.INT32,
                              cudnn.data_type.INT64, cudnn.data_type.DOUBLE]))
def test_any_python_number_for_a_by_value_scalar(scalar_graphs, value, dtype):
    count_case()
    g, X, S, Y = scalar_graphs[dtype]
    x = np.linspace(-1, 1, 4, dtype=np.float32).reshape(2, 2)
    y = np.full((2, 2), np.nan, np.float32)
    try:
        g.execute({X: x, S: value, Y: y}, ws(g))
    except Exception as e:  # noqa: BLE001
        check_error(e)
        assert np.isnan(y).all()
        return
    # Accepted: the value fits the type (after rounding for float types).
    if dtype in (cudnn.data_type.INT8, cudnn.data_type.UINT8, cudnn.data_type.INT32,
                 cudnn.data_type.INT64):
        assert not isinstance(value, float)
        lo, hi = {cudnn.data_type.INT8: (-128, 127), cudnn.data_type.UINT8: (0, 255),
                  cudnn.data_type.INT32: (-2**31, 2**31 - 1),
                  cudnn.data_type.INT64: (-2**63, 2**63 - 1)}[dtype]
        assert lo <= int(value) <= hi
        np.testing.assert_allclose(y, x.astype(np.float64) * float(int(value)), rtol=1e-6)
        return
    # A float type: the value as that type holds it (nearest, within one rounding step of the
    # type), and a finite value must not have become an infinity. The graph computes in fp32.
    want, step = float_as(value, dtype)
    if math.isnan(want):  # NaN, or an infinity in a type without one (E4M3 makes it NaN)
        assert math.isnan(float(value)) or dtype == cudnn.data_type.FP8_E4M3, (value, dtype)
        assert np.isnan(y).all(), (value, dtype, y)
        return
    if math.isfinite(float(value)):
        assert math.isfinite(want), f"{value} accepted for {dtype} but not representable"
    with np.errstate(over="ignore"):
        expected = x * np.float32(want)
    np.testing.assert_allclose(y, expected, rtol=step)


def float_as(value, dtype):
    """(value rounded to the float type dtype, in float64; a relative step of that type)."""
    import ml_dtypes

    t, step = {cudnn.data_type.FLOAT: (np.float32, 1e-6), cudnn.data_type.DOUBLE: (np.float64, 1e-6),
               cudnn.data_type.HALF: (np.float16, 2.0**-10),
               cudnn.data_type.BFLOAT16: (ml_dtypes.bfloat16, 2.0**-7),
               cudnn.data_type.FP8_E4M3: (ml_dtypes.float8_e4m3fn, 2.0**-3),
               cudnn.data_type.FP8_E5M2: (ml_dtypes.float8_e5m2, 2.0**-2)}[dtype]
    v = float(value) if not isinstance(value, int) or abs(value) < 2**1000 else math.inf
    with np.errstate(over="ignore", invalid="ignore"):
        if t is not np.float64:
            v = float(np.float64(v).astype(np.float32).astype(t))
    return v, step


@pytest.fixture(scope="module")
def scalar_graphs():
    handle = cudnn.create_handle(device="cpu")
    out = {}
    for dt in (cudnn.data_type.FLOAT, cudnn.data_type.HALF, cudnn.data_type.BFLOAT16,
               cudnn.data_type.FP8_E4M3, cudnn.data_type.FP8_E5M2, cudnn.data_type.INT8,
               cudnn.data_type.UINT8, cudnn.data_type.INT32, cudnn.data_type.INT64,
               cudnn.data_type.DOUBLE):
        g, X, S, Y = scalar_mul_graph(handle, dt)
        g.build([cudnn.heur_mode.A])
        out[dt] = (g, X, S, Y)
    return out
