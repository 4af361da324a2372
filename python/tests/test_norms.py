"""Reductions, normalizations (forward and backward) and softmax against numpy references."""

import numpy as np
import pytest

import dnngraph as cudnn
from conftest import assert_close, build, poisoned, tensor_of, workspace_for

EPS = 1e-5


def execute(handle, make, inputs, rtol=1e-5):
    """make(g, *tensors) -> list of output tensors. Returns the output arrays."""
    g = cudnn.pygraph(handle=handle, io_data_type=cudnn.data_type.FLOAT,
                      intermediate_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT)
    ts = [tensor_of(g, a, f"in{i}") for i, a in enumerate(inputs)]
    outs = make(g, *ts)
    for o in outs:
        o.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    build(g)
    arrays = []
    pack = dict(zip(ts, inputs))
    for o in outs:
        # Allocate from the inferred dims and strides.
        a = poisoned(tuple(o.get_dim()))
        assert [s // 4 for s in a.strides] == o.get_stride()
        pack[o] = a
        arrays.append(a)
    g.execute(pack, workspace_for(g))
    return arrays


REDUCE = {
    "ADD": lambda x, ax: x.sum(ax, keepdims=True),
    "MUL": lambda x, ax: x.prod(ax, keepdims=True),
    "MIN": lambda x, ax: x.min(ax, keepdims=True),
    "MAX": lambda x, ax: x.max(ax, keepdims=True),
    "AMAX": lambda x, ax: np.abs(x).max(ax, keepdims=True),
    "AVG": lambda x, ax: x.mean(ax, keepdims=True),
    "NORM1": lambda x, ax: np.abs(x).sum(ax, keepdims=True),
    "NORM2": lambda x, ax: np.sqrt((x * x).sum(ax, keepdims=True)),
}


@pytest.mark.parametrize("mode", sorted(REDUCE))
def test_reduction_keep_dims(handle, rng, mode):
    x = (rng.standard_normal((3, 4, 5)) * 0.5 + 1.0).astype(np.float32)

    def make(g, t):
        y = g.reduction(input=t, mode=getattr(cudnn.reduction_mode, mode),
                        compute_data_type=cudnn.data_type.FLOAT)
        y.set_dim([3, 1, 5]).set_stride([5, 5, 1])
        return [y]

    (y,) = execute(handle, make, [x])
    assert_close(y, REDUCE[mode](x.astype(np.float64), 1), rtol=1e-5)


def test_reduction_all(handle, rng):
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    (y,) = execute(handle, lambda g, t: [g.reduction(input=t, mode=cudnn.reduction_mode.ADD)], [x])
    assert y.shape == (1, 1, 1)
    assert_close(y, x.astype(np.float64).sum().reshape(1, 1, 1), rtol=1e-5)


def norm_ref(x, axes, scale, bias):
    mean = x.mean(axes, keepdims=True)
    var = x.var(axes, keepdims=True)
    inv = 1.0 / np.sqrt(var + EPS)
    return (x - mean) * inv * scale + bias, mean, inv


def test_layernorm_training_and_inference(handle, rng):
    x = rng.standard_normal((4, 3, 2, 5)).astype(np.float32)
    scale = rng.standard_normal((1, 3, 2, 5)).astype(np.float32)
    bias = rng.standard_normal((1, 3, 2, 5)).astype(np.float32)
    y, mean, inv = execute(
        handle, lambda g, t, s, b: list(g.layernorm(
            norm_forward_phase=cudnn.norm_forward_phase.TRAINING, input=t, scale=s, bias=b,
            epsilon=EPS)), [x, scale, bias])
    ry, rmean, rinv = norm_ref(x.astype(np.float64), (1, 2, 3), scale, bias)
    assert_close(y, ry)
    assert_close(mean, rmean)
    assert_close(inv, rinv)

    def make_inference(g, t, s, b):
        out = g.layernorm(cudnn.norm_forward_phase.INFERENCE, t, s, b, EPS)
        assert out[1] is None and out[2] is None
        return [out[0]]

    (y,) = execute(handle, make_inference, [x, scale, bias])
    assert_close(y, ry)


def test_rmsnorm(handle, rng):
    x = rng.standard_normal((3, 8)).astype(np.float32)
    scale = rng.standard_normal((1, 8)).astype(np.float32)
    y, inv = execute(handle, lambda g, t, s: list(g.rmsnorm(
        norm_forward_phase=cudnn.norm_forward_phase.TRAINING, input=t, scale=s, epsilon=EPS)),
        [x, scale])
    xd = x.astype(np.float64)
    rinv = 1.0 / np.sqrt((xd * xd).mean(1, keepdims=True) + EPS)
    assert_close(y, xd * rinv * scale)
    assert_close(inv, rinv)


def test_batchnorm_training_and_inference(handle, rng):
    x = rng.standard_normal((4, 3, 2, 2)).astype(np.float32)
    scale, bias = (rng.standard_normal((1, 3, 1, 1)).astype(np.float32) for _ in range(2))
    y, mean, inv = execute(handle, lambda g, t, s, b: list(g.batchnorm(
        input=t, scale=s, bias=b, epsilon=EPS))[:3], [x, scale, bias])
    ry, rmean, rinv = norm_ref(x.astype(np.float64), (0, 2, 3), scale, bias)
    assert_close(y, ry)
    assert_close(mean, rmean)
    assert_close(inv, rinv)

    (y2,) = execute(handle, lambda g, t, m, v, s, b: [g.batchnorm_inference(
        input=t, mean=m, inv_variance=v, scale=s, bias=b)],
        [x, rmean.astype(np.float32), rinv.astype(np.float32), scale, bias])
    assert_close(y2, ry, rtol=1e-5)


def test_batchnorm_running_stats(handle, rng):
    x = rng.standard_normal((4, 3, 2, 2)).astype(np.float32)
    scale, bias = (rng.standard_normal((1, 3, 1, 1)).astype(np.float32) for _ in range(2))
    rm, rv = rng.standard_normal((1, 3, 1, 1)).astype(np.float32), np.ones((1, 3, 1, 1),
                                                                           np.float32)

    def make(g, t, s, b, m, v):
        out = g.batchnorm(input=t, scale=s, bias=b, epsilon=EPS, in_running_mean=m,
                          in_running_var=v, momentum=0.1)
        assert len(out) == 5 and out[3] is not None
        return [out[3], out[4]]

    nm, nv = execute(handle, make, [x, scale, bias, rm, rv])
    xd = x.astype(np.float64)
    n = xd.size // 3
    assert_close(nm, 0.9 * rm + 0.1 * xd.mean((0, 2, 3), keepdims=True))
    # Running variance uses the unbiased estimate, as cuDNN does.
    assert_close(nv, 0.9 * rv + 0.1 * xd.var((0, 2, 3), keepdims=True) * n / (n - 1))


def norm_bwd_ref(dy, x, scale, axes, rms=False):
    """dx, dscale, dbias of y = xhat * scale + bias, normalized over `axes`."""
    mean = 0.0 if rms else x.mean(axes, keepdims=True)
    var = (x * x).mean(axes, keepdims=True) if rms else x.var(axes, keepdims=True)
    inv = 1.0 / np.sqrt(var + EPS)
    xhat = (x - mean) * inv
    gg = dy * scale
    dx = gg - xhat * (gg * xhat).mean(axes, keepdims=True)
    if not rms:
        dx -= gg.mean(axes, keepdims=True)
    sum_axes = tuple(i for i in range(x.ndim) if scale.shape[i] == 1)
    dscale = (dy * xhat).sum(sum_axes, keepdims=True)
    return dx * inv, dscale, dy.sum(sum_axes, keepdims=True), mean, inv


@pytest.mark.parametrize("method, x_shape, scale_shape, axes", [
    ("layernorm_backward", (3, 2, 4), (1, 2, 4), (1, 2)),
    ("batchnorm_backward", (4, 3, 2, 2), (1, 3, 1, 1), (0, 2, 3)),
])
def test_norm_backward(handle, rng, method, x_shape, scale_shape, axes):
    x, dy = (rng.standard_normal(x_shape) for _ in range(2))
    scale = rng.standard_normal(scale_shape)
    dx, ds, db, mean, inv = norm_bwd_ref(dy, x, scale, axes)
    f = [a.astype(np.float32) for a in (dy, x, scale, mean, inv)]
    out = execute(handle, lambda g, d, t, s, m, v: list(getattr(g, method)(
        grad=d, input=t, scale=s, mean=m, inv_variance=v)), f)
    for got, ref in zip(out, (dx, ds, db)):
        assert_close(got, ref, rtol=1e-4)


def test_rmsnorm_backward(handle, rng):
    x, dy = (rng.standard_normal((3, 6)) for _ in range(2))
    scale = rng.standard_normal((1, 6))
    dx, ds, _, _, inv = norm_bwd_ref(dy, x, scale, (1,), rms=True)
    f = [a.astype(np.float32) for a in (dy, x, scale, inv)]

    def make(g, d, t, s, v):
        out = g.rmsnorm_backward(grad=d, input=t, scale=s, inv_variance=v, has_dbias=False)
        assert out[2] is None
        return list(out[:2])

    out = execute(handle, make, f)
    for got, ref in zip(out, (dx, ds)):
        assert_close(got, ref, rtol=1e-4)


def test_softmax_with_stats(handle, rng):
    x = rng.standard_normal((2, 3, 7)).astype(np.float32)
    y, stats = execute(handle, lambda g, t: list(g.softmax(input=t, generate_stats=True)), [x])
    xd = x.astype(np.float64)
    m = xd.max(-1, keepdims=True)
    e = np.exp(xd - m)
    assert_close(y, e / e.sum(-1, keepdims=True))
    assert_close(stats, m + np.log(e.sum(-1, keepdims=True)))
