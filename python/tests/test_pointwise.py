"""Every pointwise method of pygraph, each checked against a numpy reference."""

import math

import numpy as np
import pytest

import dnngraph as cudnn
from conftest import assert_close, build, erf, gelu, poisoned, tensor_of, workspace_for

SHAPE = (2, 3, 5)


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def gelu_tanh_grad(x):
    c = math.sqrt(2.0 / math.pi)
    t = np.tanh(c * (x + 0.044715 * x**3))
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3 * 0.044715 * x * x)


def gelu_grad(x):
    return 0.5 * (1.0 + erf(x / math.sqrt(2.0))) + x * np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)


# method -> (reference, input domain). Domains keep references well conditioned.
UNARY = {
    "abs": (np.abs, "any"),
    "neg": (np.negative, "any"),
    "exp": (np.exp, "any"),
    "log": (np.log, "pos"),
    "sqrt": (np.sqrt, "pos"),
    "rsqrt": (lambda x: 1.0 / np.sqrt(x), "pos"),
    "reciprocal": (lambda x: 1.0 / x, "pos"),
    "tanh": (np.tanh, "any"),
    "sigmoid": (sigmoid, "any"),
    "gelu": (gelu, "any"),
    "gelu_approx_tanh": (gelu_tanh, "any"),
    "erf": (erf, "any"),
    "sin": (np.sin, "any"),
    "cos": (np.cos, "any"),
    "tan": (np.tan, "any"),
    "floor": (np.floor, "any"),
    "ceil": (np.ceil, "any"),
    "identity": (lambda x: x, "any"),
    "relu": (lambda x: np.maximum(x, 0.0), "any"),
    "silu": (lambda x: x * sigmoid(x), "any"),
    "swish": (lambda x: x * sigmoid(x), "any"),
    "elu": (lambda x: np.where(x > 0, x, np.exp(x) - 1.0), "any"),
    "softplus": (lambda x: np.log1p(np.exp(x)), "any"),
}
BINARY = {
    "add": (np.add, "any"),
    "sub": (np.subtract, "any"),
    "mul": (np.multiply, "any"),
    "div": (np.divide, "pos"),
    "max": (np.maximum, "any"),
    "min": (np.minimum, "any"),
    "maximum": (np.maximum, "any"),
    "minimum": (np.minimum, "any"),
    "pow": (np.power, "pos"),
    "add_square": (lambda a, b: a + b * b, "any"),
    "mod": (np.fmod, "pos"),
    "bias": (np.add, "any"),
    "scale": (np.multiply, "any"),
}
COMPARE = {
    "cmp_eq": np.equal,
    "cmp_neq": np.not_equal,
    "cmp_gt": np.greater,
    "cmp_ge": np.greater_equal,
    "cmp_lt": np.less,
    "cmp_le": np.less_equal,
}
# (loss, x) -> dx
BACKWARD = {
    "relu_backward": lambda dy, x: dy * (x > 0),
    "gelu_backward": lambda dy, x: dy * gelu_grad(x),
    "gelu_approx_tanh_backward": lambda dy, x: dy * gelu_tanh_grad(x),
    "sigmoid_backward": lambda dy, x: dy * sigmoid(x) * (1 - sigmoid(x)),
    "tanh_backward": lambda dy, x: dy * (1 - np.tanh(x) ** 2),
    "silu_backward": lambda dy, x: dy * (sigmoid(x) + x * sigmoid(x) * (1 - sigmoid(x))),
    "elu_backward": lambda dy, x: dy * np.where(x > 0, 1.0, np.exp(x)),
    "softplus_backward": lambda dy, x: dy * sigmoid(x),
}


def sample(rng, domain, dtype=np.float32):
    x = rng.standard_normal(SHAPE)
    if domain == "pos":
        x = np.abs(x) + 0.5
    return x.astype(dtype)


def bits(mask):
    """A bool array as BOOLEAN memory: bit-packed, element i in bit i % 8 of byte i // 8."""
    return np.packbits(mask, axis=None, bitorder="little")


def run(handle, make, inputs, out_dtype=np.float32, out_type=cudnn.data_type.FLOAT):
    """Builds graph `make(g, *tensors)` on `inputs`, runs it, returns the output array (bool
    arrays go in and come out bit-packed, as BOOLEAN tensors are stored)."""
    g = cudnn.pygraph(handle=handle, io_data_type=cudnn.data_type.FLOAT)
    ts = [tensor_of(g, a, f"in{i}") for i, a in enumerate(inputs)]
    y = make(g, *ts)
    y.set_output(True).set_data_type(out_type)
    build(g)
    shape = tuple(y.get_dim())
    boolean = out_type == cudnn.data_type.BOOLEAN
    out = np.full((math.prod(shape) + 7) // 8, 0xA5, np.uint8) if boolean else poisoned(shape, out_dtype)
    pack = {t: bits(a) if a.dtype == np.bool_ else a for t, a in zip(ts, inputs)}
    pack[y] = out
    g.execute(pack, workspace_for(g))
    if boolean:
        return np.unpackbits(out, count=math.prod(shape), bitorder="little").reshape(shape) == 1
    return out


@pytest.mark.parametrize("method", sorted(UNARY))
def test_unary(handle, rng, method):
    ref, domain = UNARY[method]
    x = sample(rng, domain)
    out = run(handle, lambda g, t: getattr(g, method)(input=t, name=f"{method}_node"), [x])
    assert_close(out, ref(x.astype(np.float64)), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("method", sorted(BINARY))
def test_binary(handle, rng, method):
    ref, domain = BINARY[method]
    a, b = sample(rng, domain), sample(rng, domain)
    kw = {"bias": ("input", "bias"), "scale": ("input", "scale")}.get(method, ("a", "b"))
    out = run(handle, lambda g, x, y: getattr(g, method)(**{kw[0]: x, kw[1]: y}), [a, b])
    assert_close(out, ref(a.astype(np.float64), b), rtol=1e-5)


def test_binary_broadcast_and_python_scalar(handle, rng):
    a = sample(rng, "any")
    row = rng.standard_normal((1, 1, SHAPE[2])).astype(np.float32)
    out = run(handle, lambda g, x, r: g.sub(a=g.mul(a=x, b=2.5), b=r), [a, row])
    assert_close(out, a.astype(np.float64) * 2.5 - row, rtol=1e-5)


@pytest.mark.parametrize("method", sorted(COMPARE))
def test_compare(handle, rng, method):
    a = sample(rng, "any")
    b = a.copy()
    b[0] += 1.0  # some equal, some different
    b[1] -= 1.0
    out = run(handle, lambda g, x, y: getattr(g, method)(a=x, b=y), [a, b], np.bool_,
              cudnn.data_type.BOOLEAN)
    np.testing.assert_array_equal(out, COMPARE[method](a, b))


def test_mod_keeps_the_sign_of_the_dividend(handle, rng):
    # fmod, as cuDNN's MOD: -7.5 mod 2 = -1.5 (Python's % would give 0.5).
    a = (rng.standard_normal(SHAPE) * 4).astype(np.float32)
    b = (np.abs(rng.standard_normal(SHAPE)) + 0.75).astype(np.float32)
    a[0, 0, 0], b[0, 0, 0] = -7.5, 2.0
    out = run(handle, lambda g, x, y: g.mod(a=x, b=y), [a, b])
    assert out[0, 0, 0] == -1.5
    assert_close(out, np.fmod(a.astype(np.float64), b), rtol=1e-5, atol=1e-6)


def test_boolean_output_bits_worked_by_hand(handle):
    # x > 0 for x = [1, -1, 1, 1, -1, -1, -1, 1 | 1, -1, -1]: bits (LSB first) 1,0,1,1,0,0,0,1
    # = 0b10001101 = 0x8D, then 1,0,0 = 0x01; the unused high bits of the last byte are kept.
    x = np.array([1, -1, 1, 1, -1, -1, -1, 1, 1, -1, -1], np.float32).reshape(1, 1, 11)
    g = cudnn.pygraph(handle=handle, io_data_type=cudnn.data_type.FLOAT)
    z = np.zeros((1, 1, 1), np.float32)
    X, Z = tensor_of(g, x, "X"), tensor_of(g, z, "Z")
    m = g.cmp_gt(input=X, comparison=Z)
    m.set_output(True).set_data_type(cudnn.data_type.BOOLEAN)
    build(g)
    out = np.array([0x00, 0xF0], np.uint8)
    g.execute({X: x, Z: z, m: out}, workspace_for(g))
    assert out.tolist() == [0x8D, 0xF1]


def test_boolean_memory_refuses_bool_arrays(handle):
    p = np.array([[True, False, True]])
    g = cudnn.pygraph(handle=handle, io_data_type=cudnn.data_type.FLOAT)
    P = tensor_of(g, p, "P")
    y = g.logical_not(input=P)
    y.set_output(True).set_data_type(cudnn.data_type.BOOLEAN)
    build(g)
    with pytest.raises(ValueError, match=r"tensor 'P'.*BOOLEAN but the array holds bools.*np\.packbits"):
        g.execute({P: p, y: np.zeros(1, np.uint8)}, workspace_for(g))
    with pytest.raises(ValueError, match=r"needs 1 bytes.*holds 0"):
        g.execute({P: bits(p), y: np.zeros(0, np.uint8)}, workspace_for(g))
    out = np.zeros(1, np.uint8)
    g.execute({P: bits(p), y: out}, workspace_for(g))
    assert out[0] == 0b010


def test_logical_and_select(handle, rng):
    p = rng.standard_normal(SHAPE) > 0
    q = rng.standard_normal(SHAPE) > 0
    for method, ref in (("logical_and", np.logical_and), ("logical_or", np.logical_or)):
        out = run(handle, lambda g, x, y: getattr(g, method)(a=x, b=y), [p, q], np.bool_,
                  cudnn.data_type.BOOLEAN)
        np.testing.assert_array_equal(out, ref(p, q))
    out = run(handle, lambda g, x: g.logical_not(input=x), [p], np.bool_, cudnn.data_type.BOOLEAN)
    np.testing.assert_array_equal(out, ~p)

    a, b = sample(rng, "any"), sample(rng, "any")
    out = run(handle, lambda g, x, y, m: g.binary_select(input0=x, input1=y, mask=m), [a, b, p])
    assert_close(out, np.where(p, a, b), rtol=1e-6)


@pytest.mark.parametrize("method", sorted(BACKWARD))
def test_backward(handle, rng, method):
    dy, x = sample(rng, "any"), sample(rng, "any")
    out = run(handle, lambda g, l, t: getattr(g, method)(loss=l, input=t), [dy, x])
    assert_close(out, BACKWARD[method](dy.astype(np.float64), x.astype(np.float64)), rtol=1e-5,
                 atol=1e-6)


def test_relu_clips_and_slope(handle, rng):
    x = sample(rng, "any") * 2
    out = run(handle, lambda g, t: g.relu(input=t, negative_slope=0.1), [x])
    assert_close(out, np.where(x > 0, x, 0.1 * x.astype(np.float64)), rtol=1e-6)
    out = run(handle, lambda g, t: g.relu(input=t, lower_clip=-0.5, upper_clip=1.0), [x])
    assert_close(out, np.clip(x.astype(np.float64), -0.5, 1.0), rtol=1e-6)


def test_attribute_modes(handle, rng):
    x = sample(rng, "any")
    xd = x.astype(np.float64)
    out = run(handle, lambda g, t: g.elu(input=t, alpha=0.5), [x])
    assert_close(out, np.where(xd > 0, xd, 0.5 * (np.exp(xd) - 1)), rtol=1e-5)
    out = run(handle, lambda g, t: g.softplus(input=t, beta=2.0), [x])
    assert_close(out, np.log1p(np.exp(2 * xd)) / 2, rtol=1e-5)
    out = run(handle, lambda g, t: g.silu(input=t, swish_beta=1.5), [x])
    assert_close(out, xd * sigmoid(1.5 * xd), rtol=1e-5)


def test_generic_pointwise(handle, rng):
    a, b = sample(rng, "any"), sample(rng, "any")
    out = run(handle, lambda g, x, y: g.pointwise(cudnn.pointwise_mode.SUB, x, y), [a, b])
    assert_close(out, a.astype(np.float64) - b, rtol=1e-6)
    out = run(handle, lambda g, x: g.pointwise(cudnn.pointwise_mode.RELU, x, upper_clip=0.25),
              [a])
    assert_close(out, np.clip(a.astype(np.float64), 0, 0.25), rtol=1e-6)
