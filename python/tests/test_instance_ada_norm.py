"""instancenorm and adalayernorm (forward and backward) against numpy: the forward against the
formula, the backward against central differences of the numpy forward (fp64)."""

import numpy as np
import pytest

import dnngraph as cudnn
from conftest import assert_close, build, poisoned, tensor_of, workspace_for

EPS = 1e-5
TRAINING = cudnn.norm_forward_phase.TRAINING


def forward_ref(x, axes, scale, bias):
    mean = x.mean(axes, keepdims=True)
    inv = 1.0 / np.sqrt(x.var(axes, keepdims=True) + EPS)
    return (x - mean) * inv * scale + bias, mean, inv


def run(handle, make, inputs, out_shapes):
    """make(g, *tensors) -> output tensors; the outputs are given packed arrays of out_shapes."""
    g = cudnn.pygraph(handle=handle, io_data_type=cudnn.data_type.FLOAT,
                      intermediate_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT)
    ts = [tensor_of(g, a, f"in{i}") for i, a in enumerate(inputs)]
    outs = make(g, *ts)
    pack = dict(zip(ts, inputs))
    arrays = []
    for o, shape in zip(outs, out_shapes):
        o.set_output(True).set_data_type(cudnn.data_type.FLOAT)
        a = poisoned(shape)
        pack[o] = a
        arrays.append(a)
    build(g)
    for o, a in zip(outs, arrays):
        assert tuple(o.get_dim()) == a.shape
        assert o.get_stride() == [s // 4 for s in a.strides]
    g.execute(pack, workspace_for(g))
    return arrays


def numeric_grads(x, scale, bias, dy, axes):
    """d/dx, d/dscale, d/dbias of sum(dy * forward(x)) by central differences."""
    def loss(x_, s_, b_):
        return float((dy * forward_ref(x_, axes, s_, b_)[0]).sum())

    grads = []
    for which in range(3):
        args = [x.copy(), scale.copy(), bias.copy()]
        g = np.zeros_like(args[which])
        h = 1e-6
        for i in np.ndindex(g.shape):
            plus = [a.copy() for a in args]
            minus = [a.copy() for a in args]
            plus[which][i] += h
            minus[which][i] -= h
            g[i] = (loss(*plus) - loss(*minus)) / (2 * h)
        grads.append(g)
    return grads


CASES = {
    # name: (x shape, scale shape, normalized axes, stats shape)
    "instancenorm": ((2, 3, 4, 5), (1, 3, 1, 1), (2, 3), (2, 3, 1, 1)),
    "instancenorm_3d": ((2, 2, 3, 2, 2), (1, 2, 1, 1, 1), (2, 3, 4), (2, 2, 1, 1, 1)),
    "adalayernorm": ((2, 5, 6), (2, 1, 6), (2,), (2, 5, 1)),
    "adalayernorm_shared_scale": ((3, 4, 8), (1, 1, 8), (2,), (3, 4, 1)),
}


def op_of(name):
    return "instancenorm" if name.startswith("instancenorm") else "adalayernorm"


@pytest.mark.parametrize("name", sorted(CASES))
def test_forward_training_and_inference(handle, rng, name):
    xs, ss, axes, st = CASES[name]
    x = rng.standard_normal(xs).astype(np.float32) * 2 + 0.5
    scale = rng.standard_normal(ss).astype(np.float32)
    bias = rng.standard_normal(ss).astype(np.float32)
    op = op_of(name)
    y, mean, inv = run(handle, lambda g, t, s, b: list(getattr(g, op)(
        norm_forward_phase=TRAINING, input=t, scale=s, bias=b, epsilon=EPS)),
        [x, scale, bias], [xs, st, st])
    ry, rmean, rinv = forward_ref(x.astype(np.float64), axes, scale, bias)
    assert_close(y, ry, rtol=1e-5)
    assert_close(mean, rmean, rtol=1e-5)
    assert_close(inv, rinv, rtol=1e-5)

    def inference(g, t, s, b):
        outs = getattr(g, op)(norm_forward_phase=cudnn.norm_forward_phase.INFERENCE, input=t,
                              scale=s, bias=b, epsilon=EPS)
        assert outs[1] is None and outs[2] is None
        return [outs[0]]
    (y2,) = run(handle, inference, [x, scale, bias], [xs])
    assert_close(y2, ry, rtol=1e-5)


@pytest.mark.parametrize("name", ["instancenorm", "adalayernorm"])
def test_backward_against_finite_differences(handle, rng, name):
    xs, ss, axes, st = {"instancenorm": ((2, 3, 2, 3), (1, 3, 1, 1), (2, 3), (2, 3, 1, 1)),
                        "adalayernorm": ((2, 3, 4), (2, 1, 4), (2,), (2, 3, 1))}[name]
    x = rng.standard_normal(xs)
    scale = rng.standard_normal(ss)
    bias = rng.standard_normal(ss)
    dy = rng.standard_normal(xs)
    _, mean, inv = forward_ref(x, axes, scale, bias)
    f32 = [a.astype(np.float32) for a in (dy, x, scale, mean, inv)]
    dx, dscale, dbias = run(handle, lambda g, d, t, s, m, i: list(getattr(g, name + "_backward")(
        grad=d, input=t, scale=s, mean=m, inv_variance=i)), f32, [xs, ss, ss])
    rdx, rds, rdb = numeric_grads(x, scale, bias, dy, axes)
    assert_close(dx, rdx, rtol=1e-4)
    assert_close(dscale, rds, rtol=1e-4)
    assert_close(dbias, rdb, rtol=1e-4)


def test_errors_name_the_op_and_tensor(handle):
    g = cudnn.pygraph(handle=handle, io_data_type=cudnn.data_type.FLOAT)
    x = g.tensor(name="x", dim=[2, 5, 6], stride=[30, 6, 1])
    bad = g.tensor(name="ada_scale", dim=[2, 5, 4], stride=[20, 4, 1])
    g.adalayernorm(norm_forward_phase=TRAINING, input=x, scale=bad, bias=bad,
                   epsilon=EPS)[0].set_output(True)
    with pytest.raises(ValueError, match=r"adalayernorm.*SCALE 'ada_scale'.*\[2,5,4\]"):
        g.validate()
    g = cudnn.pygraph(handle=handle, io_data_type=cudnn.data_type.FLOAT)
    x = g.tensor(name="x", dim=[2, 3, 4, 4], stride=[48, 16, 4, 1])
    s = g.tensor(name="in_scale", dim=[1, 3, 4, 4], stride=[48, 16, 4, 1])
    g.instancenorm(norm_forward_phase=TRAINING, input=x, scale=s, bias=s,
                   epsilon=EPS)[0].set_output(True)
    with pytest.raises(ValueError, match=r"instancenorm.*SCALE 'in_scale'.*\[1,3,1,1\]"):
        g.validate()
