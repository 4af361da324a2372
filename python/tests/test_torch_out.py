"""dnngraph.torch out= variants (those whose ATen counterparts have one: layer_norm.out,
linear_act.out, matmul_epilogue.out, conv2d_bias_act.out): values equal the functional op's,
ATen's resize semantics (an empty out silently, a wrong-shaped one with ATen's warning, a
storage that cannot grow is an error), wrong dtype/device errors, no autograd, Meta, opcheck."""

import warnings

import pytest

from torch_util import DEVICES, rand, torch

import dnngraph.torch  # noqa: F401

ops = torch.ops.dnngraph


def cases(device, dtype=torch.float32):
    x, w, b = rand(3, 5, 8, dtype=dtype, device=device), rand(8, dtype=dtype, device=device), rand(
        8, dtype=dtype, device=device)
    W, bias = rand(6, 8, dtype=dtype, device=device), rand(6, dtype=dtype, device=device)
    a3, b3 = rand(2, 4, 8, dtype=dtype, device=device), rand(2, 8, 5, dtype=dtype, device=device)
    xc = rand(2, 3, 6, 6, dtype=dtype, device=device)
    wc, bc = rand(4, 3, 3, 3, dtype=dtype, device=device), rand(4, dtype=dtype, device=device)
    return {
        "layer_norm": (ops.layer_norm, (x, [8], w, b, 1e-5), ("out0", "out1", "out2")),
        "linear_act": (ops.linear_act, (x, W, bias, "gelu"), ("out",)),
        "matmul_epilogue": (ops.matmul_epilogue, (a3, b3, None, 0.5, "relu", True), ("out", "amax")),
        "conv2d_bias_act": (ops.conv2d_bias_act, (xc, wc, bc, [1, 1], [1, 1], [1, 1], 1, "silu"),
                            ("out",)),
    }


def as_tuple(r):
    return r if isinstance(r, tuple) else (r,)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ["layer_norm", "linear_act", "matmul_epilogue", "conv2d_bias_act"])
def test_out_equals_functional(device, name):
    op, args, names = cases(device)[name]
    want = as_tuple(op.default(*args))
    # Right-shaped outs, poisoned: written in place, returned.
    outs = {n: torch.full_like(t, float("nan")) for n, t in zip(names, want)}
    got = as_tuple(op.out(*args, **outs))
    for n, g, w in zip(names, got, want):
        assert g.data_ptr() == outs[n].data_ptr()
        torch.testing.assert_close(outs[n], w, rtol=0, atol=0)
    # Empty outs are resized silently (ATen's resize_output).
    outs = {n: torch.empty(0, dtype=t.dtype, device=device) for n, t in zip(names, want)}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        op.out(*args, **outs)
    for n, w in zip(names, want):
        assert outs[n].shape == w.shape
        torch.testing.assert_close(outs[n], w, rtol=0, atol=0)


def _aten_out_warns():
    """Whether ATen's own out= op, called through torch.ops, raises its resize warning in Python."""
    a = torch.ones(2, 3)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        torch.ops.aten.add.out(a, a, out=torch.empty(7))
    return any("resized" in str(w.message) for w in seen)


@pytest.mark.parametrize("name", ["layer_norm", "linear_act", "matmul_epilogue", "conv2d_bias_act"])
def test_out_errors_and_resize_warning(name):
    op, args, names = cases("cpu")[name]
    want = as_tuple(op.default(*args))
    good = {n: torch.empty_like(t) for n, t in zip(names, want)}
    first = names[0]
    # A non-empty out of another shape: ATen's deprecation warning, then resized. The warning
    # reaches Python as it does from ATen's own out= ops called through torch.ops (torch 2.11
    # leaves it on stderr for both).
    outs = dict(good, **{first: torch.randn(7, dtype=want[0].dtype)})
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        op.out(*args, **outs)
    assert ([str(w.message) for w in seen if "resized" in str(w.message)] != []) == _aten_out_warns()
    assert outs[first].shape == want[0].shape
    torch.testing.assert_close(outs[first], want[0], rtol=0, atol=0)
    # A storage that cannot grow: a clear error, as ATen's.
    fixed = torch.frombuffer(bytearray(4), dtype=want[0].dtype)
    with pytest.raises(RuntimeError, match="not resizable"), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ATen warns of the resize before it fails
        op.out(*args, **dict(good, **{first: fixed}))
    # Wrong dtype: TypeError naming the op and the out tensor.
    with pytest.raises(TypeError, match=rf"dnngraph::{name}\.out: '{first}' has dtype Double but the result has dtype Float"):
        op.out(*args, **dict(good, **{first: torch.empty_like(want[0], dtype=torch.float64)}))
    # An out that overlaps itself.
    with pytest.raises(RuntimeError, match="internal overlap|single memory location"):
        op.out(*args, **dict(good, **{first: torch.empty(1).expand(want[0].shape)}))
    # No autograd through out= (as ATen's out= functions).
    grad_args = tuple(a.detach().clone().requires_grad_() if isinstance(a, torch.Tensor) else a
                      for a in args)
    with pytest.raises(RuntimeError, match="do not support automatic differentiation"):
        op.out(*grad_args, **good)
    with torch.no_grad():
        op.out(*grad_args, **good)


def test_out_bumps_version_and_runs_on_meta():
    op, args, names = cases("cpu")["linear_act"]
    out = torch.empty(3, 5, 6)
    v = out._version
    op.out(*args, out=out)
    assert out._version > v
    margs = tuple(a.to("meta") if isinstance(a, torch.Tensor) else a for a in args)
    mout = torch.empty(0, device="meta")
    r = op.out(*margs, out=mout)
    assert r is mout or r.shape == mout.shape
    assert mout.shape == (3, 5, 6) and mout.device.type == "meta"


@pytest.mark.parametrize("name", ["layer_norm", "linear_act", "matmul_epilogue", "conv2d_bias_act"])
def test_opcheck_out(name):
    """Schema (mutation annotations), autograd registration and fake tensors. Not
    test_aot_dispatch_dynamic: torch's functionalization refuses custom ops whose outputs alias
    an input (`-> Tensor(a!)`, the schema of ATen's out= ops), so the out= forms do not trace
    under torch.compile; the functional forms do."""
    op, args, names = cases("cpu", torch.float64)[name]
    want = as_tuple(op.default(*args))
    outs = {n: torch.empty_like(t) for n, t in zip(names, want)}
    torch.library.opcheck(op.out, args, outs,
                          test_utils=("test_schema", "test_autograd_registration", "test_faketensor"))


def backward_cases(device="cpu", dtype=torch.float32):
    x, w, b = (rand(3, 5, 8, dtype=dtype, device=device), rand(8, dtype=dtype, device=device),
               rand(8, dtype=dtype, device=device))
    _, mean, rstd = ops.layer_norm.default(x, [8], w, b, 1e-5)
    W, bias = rand(6, 8, dtype=dtype, device=device), rand(6, dtype=dtype, device=device)
    xc = rand(2, 3, 6, 6, dtype=dtype, device=device)
    wc, bc = rand(4, 3, 3, 3, dtype=dtype, device=device), rand(4, dtype=dtype, device=device)
    return {
        "layer_norm_backward": (ops.layer_norm_backward,
                                (rand(3, 5, 8, dtype=dtype, device=device), x, [8], mean, rstd, w, b)),
        "linear_act_backward": (ops.linear_act_backward,
                                (rand(3, 5, 6, dtype=dtype, device=device), x, W, bias, "gelu")),
        "conv2d_bias_act_backward": (
            ops.conv2d_bias_act_backward,
            (rand(2, 4, 6, 6, dtype=dtype, device=device), xc, wc, bc, [1, 1], [1, 1], [1, 1], 1,
             "relu")),
    }


BACKWARDS = ["layer_norm_backward", "linear_act_backward", "conv2d_bias_act_backward"]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", BACKWARDS)
@pytest.mark.parametrize("mask", [[True, True, True], [True, False, True]])
def test_backward_out_equals_functional(device, name, mask):
    op, args = backward_cases(device)[name]
    want = op.default(*args, mask)
    outs = {f"out{i}": torch.full_like(want[0] if t is None else t, float("nan"))
            if t is not None else torch.full((2,), 7.0, device=device)
            for i, t in enumerate(want)}
    before = {n: t.clone() for n, t in outs.items()}
    got = op.out(*args, mask, **outs)
    for i, (w, asked) in enumerate(zip(want, mask)):
        n = f"out{i}"
        assert got[i].data_ptr() == outs[n].data_ptr()
        if asked:
            torch.testing.assert_close(outs[n], w, rtol=0, atol=0)
        else:  # not computed: left as given
            torch.testing.assert_close(outs[n], before[n], rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("name", BACKWARDS)
def test_backward_out_errors_and_opcheck(name):
    op, args = backward_cases("cpu", torch.float64)[name]
    mask = [True, True, True]
    want = op.default(*args, mask)
    outs = {f"out{i}": torch.empty_like(t) for i, t in enumerate(want)}
    with pytest.raises(TypeError, match=rf"dnngraph::{name}\.out: 'out1' has dtype Float"):
        op.out(*args, mask, **dict(outs, out1=torch.empty_like(want[1], dtype=torch.float32)))
    grad_args = tuple(a.detach().clone().requires_grad_() if isinstance(a, torch.Tensor) else a
                      for a in args)
    with pytest.raises(RuntimeError, match="do not support automatic differentiation"):
        op.out(*grad_args, mask, **outs)
    torch.library.opcheck(op.out, (*args, mask), outs,
                          test_utils=("test_schema", "test_autograd_registration", "test_faketensor"))
