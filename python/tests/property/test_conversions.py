"""The hand-written fp16 / bf16 / fp8 conversions against ml_dtypes, over every bit pattern:
decoding (a tensor of the type read as FLOAT) and encoding (FLOAT values, including every
value of the type and the midpoints between neighbours, written to the type with
round-to-nearest-even)."""

import ml_dtypes
import numpy as np
import pytest

import dnngraph as cudnn
from props import ws

HANDLE = cudnn.create_handle(device="cpu")
TYPES = [
    (cudnn.data_type.HALF, np.dtype(np.float16), np.uint16),
    (cudnn.data_type.BFLOAT16, np.dtype(ml_dtypes.bfloat16), np.uint16),
    (cudnn.data_type.FP8_E4M3, np.dtype(ml_dtypes.float8_e4m3fn), np.uint8),
    (cudnn.data_type.FP8_E5M2, np.dtype(ml_dtypes.float8_e5m2), np.uint8),
]


def identity_graph(n, src, dst):
    g = cudnn.pygraph(handle=HANDLE, io_data_type=dst, compute_data_type=cudnn.data_type.FLOAT)
    X = g.tensor(name="X", dim=[n], data_type=src)
    Y = g.identity(input=X)
    Y.set_output(True).set_data_type(dst)
    g.build([cudnn.heur_mode.A])
    return g, X, Y


def same(got, want):
    """Equal values, NaN where NaN, and the same sign of zero."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    nan = np.isnan(want)
    assert (np.isnan(got) == nan).all(), np.flatnonzero(np.isnan(got) != nan)[:10]
    ok = (got[~nan] == want[~nan]) & (np.signbit(got[~nan]) == np.signbit(want[~nan]))
    bad = np.flatnonzero(~ok)
    assert ok.all(), list(zip(got[~nan][bad][:5], want[~nan][bad][:5]))


@pytest.mark.parametrize("dt,np_dt,bits", TYPES, ids=lambda t: str(t))
def test_decode_every_bit_pattern(dt, np_dt, bits):
    patterns = np.arange(np.iinfo(bits).max + 1, dtype=np.int64).astype(bits)
    x = patterns.view(np_dt)
    g, X, Y = identity_graph(x.size, dt, cudnn.data_type.FLOAT)
    y = np.full(x.size, 7.0, np.float32)
    g.execute({X: x, Y: y}, ws(g))
    same(y, x.astype(np.float32))


@pytest.mark.parametrize("dt,np_dt,bits", TYPES, ids=lambda t: str(t))
def test_encode_values_and_midpoints(dt, np_dt, bits):
    patterns = np.arange(np.iinfo(bits).max + 1, dtype=np.int64).astype(bits)
    vals = patterns.view(np_dt).astype(np.float64)
    finite = np.sort(np.unique(vals[np.isfinite(vals)]))
    mids = (finite[1:] + finite[:-1]) / 2  # ties: round to even
    rng = np.random.default_rng(1)
    near = finite[:, None] * (1 + rng.uniform(-1e-3, 1e-3, (finite.size, 2)))
    x = np.concatenate([finite, mids, near.ravel(), [np.inf, -np.inf, np.nan, 0.0, -0.0]])
    x = x.astype(np.float32)
    # Values beyond the type's range overflow differently for saturating fp8 formats: the
    # cross-check keeps to the finite range (out-of-range by-value scalars are refused).
    top = finite.max()
    x = x[~np.isfinite(x) | (np.abs(x) <= top)]
    if np_dt == np.dtype(ml_dtypes.float8_e4m3fn):
        x = x[np.isfinite(x) | np.isnan(x)]  # e4m3fn has no infinity
    g, X, Y = identity_graph(x.size, cudnn.data_type.FLOAT, dt)
    y = np.zeros(x.size, np_dt)
    g.execute({X: x, Y: y}, ws(g))
    same(y.astype(np.float64), x.astype(np_dt).astype(np.float64))
