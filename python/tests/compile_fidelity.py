"""Helpers of the torch.compile backend's fidelity tests (test_torch_compile_fidelity*.py):
a function or module run eagerly and compiled with backend "dnngraph" (inner compiler: eager) on
seeded random inputs, outputs and gradients compared with dtype-fit tolerances, the outputs of
every fused graph poisoned first, and the backend's decisions (what ``dnngraph.torch.explain``
shows) returned for the test to assert which ops were fused and why the others stayed out."""

import copy

import pytest
from torch_util import torch  # noqa: F401  (skips without dnngraph.torch)

import torch.nn as nn

import dnngraph.torch as dt
from dnngraph.torch.compile import _backend

TOL = {
    torch.float64: dict(atol=1e-9, rtol=1e-9),
    torch.float32: dict(atol=1e-5, rtol=1e-5),
    torch.bfloat16: dict(atol=2e-2, rtol=2e-2),
    torch.float16: dict(atol=1e-2, rtol=1e-2),
}


@pytest.fixture(autouse=True)
def fresh():
    torch._dynamo.reset()
    torch.manual_seed(0)
    previous = torch.ops.dnngraph._run_graph_poison_outputs(True)
    yield
    torch.ops.dnngraph._run_graph_poison_outputs(previous)
    torch._dynamo.reset()


def rnd(*shape, dtype=torch.float32, grad=False, low=None):
    """Seeded random values (never zeros): normal, or uniform in [low, low + 1] (positive
    operands of log/sqrt)."""
    if low is None:
        t = torch.randn(shape, dtype=torch.float32)
    else:
        t = torch.rand(shape, dtype=torch.float32) + low
    return t.to(dtype).requires_grad_(grad)


def leaves_of(fn, args):
    out = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
    if isinstance(fn, nn.Module):
        out += [p for p in fn.parameters() if p.requires_grad]
    return out


def tensors_of(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def weighted_loss(outs, upstream):
    return sum((o.double() * u).sum() for o, u in zip(outs, upstream) if o.requires_grad)


def close(actual, expected, dtype, scale, what):
    t = {k: v * scale for k, v in TOL[dtype].items()}
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != {expected.dtype}"
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    torch.testing.assert_close(actual, expected, equal_nan=True, msg=lambda m: f"{what}: {m}",
                               **t)


def fidelity(fn, *args, dtype=None, backward=True, fused=(), fused_bw=(), out=None,
             pointwise=True, scale=1.0):
    """Runs ``fn(*args)`` eagerly and compiled with the dnngraph backend (inner: eager), compares
    outputs and the gradients of every input and parameter that requires grad, and returns the
    backend's decisions (``dt.compile.Explanation``) of the compiled run.

    ``fused``/``fused_bw``: ATen ops (substrings of their names) that must run in a fused graph
    of the forward/inference and of the backward graph. ``out``: {op substring: reason
    substring} of ops that must stay in ATen with that reason."""
    dtype = dtype or next(a.dtype for a in args if isinstance(a, torch.Tensor))
    leaves = leaves_of(fn, args)
    for t in leaves:
        t.grad = None
    ref = tensors_of(fn(*args))
    upstream = [torch.rand_like(o, dtype=torch.float64) + 0.5 for o in ref]
    if backward and leaves:
        weighted_loss(ref, upstream).backward()
    ref_grads = [t.grad.clone() if t.grad is not None else None for t in leaves]
    for t in leaves:
        t.grad = None
    options = {"inner": "eager", "fuse_pointwise": pointwise}
    compiled = torch.compile(fn, backend="dnngraph", options=options)
    with _backend.collect_reports() as reports:
        got = tensors_of(compiled(*args))
        if backward and leaves:
            weighted_loss(got, upstream).backward()
    for i, (g, r) in enumerate(zip(got, ref)):
        close(g, r, dtype, scale, f"output {i}")
    for i, (t, r) in enumerate(zip(leaves, ref_grads)):
        if r is None:
            assert t.grad is None
        else:
            assert t.grad is not None, f"gradient {i} missing"
            close(t.grad, r, dtype, scale * 4, f"gradient {i}")
    e = dt.compile.Explanation(list(reports))
    assert_fused(e, fused, ("forward", "inference"))
    assert_fused(e, fused_bw, ("backward",))
    for op, reason in (out or {}).items():
        rows = [(node, o, why) for _, node, o, why in e.left_out if op in o]
        assert rows, f"{op} is not among the ops left in ATen:\n{e}"
        assert all(reason in why for _, _, why in rows), f"{op}: {rows}\n{e}"
    return e


def fused_ops(e, graphs, op):
    return [o for g, _, ops in e.partitions if g.startswith(graphs) for o in ops if op in o]


def assert_fused(e, ops, graphs):
    for op in ops:
        assert fused_ops(e, graphs, op), f"{op} not fused in {graphs}:\n{e}"


def randomize(model):
    """Seeded non-trivial parameters and norm statistics (affine weights around 1)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("weight") and p.dim() == 1:
                p.uniform_(0.5, 1.5)
            elif name.endswith("bias"):
                p.uniform_(-0.5, 0.5)
        for m in model.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 1.5)
    return model


def model_fidelity(model, x, scale=4.0, blocks=True, **kw):
    """Compiled against eager on deep copies of one model (train-mode statistics of the eager
    run must not leak into the compiled one), outputs, input and parameter gradients."""
    ref = copy.deepcopy(model)
    xr = x.detach().clone().requires_grad_(x.requires_grad)
    out = ref(xr)
    upstream = torch.rand_like(out) + 0.5
    if x.requires_grad:
        (out * upstream).sum().backward()
    options = {"inner": "eager", "blocks": blocks}
    compiled = torch.compile(model, backend="dnngraph", options=options, **kw)
    with _backend.collect_reports() as reports:
        got = compiled(x)
        if x.requires_grad:
            (got * upstream).sum().backward()
    close(got, out, torch.float32, scale, "output")
    if x.requires_grad:
        close(x.grad, xr.grad, torch.float32, scale * 4, "input gradient")
        for (n, p), (_, pr) in zip(model.named_parameters(), ref.named_parameters()):
            close(p.grad, pr.grad, torch.float32, scale * 4, f"gradient of {n}")
    for (n, b), (_, br) in zip(model.named_buffers(), ref.named_buffers()):
        close(b, br, b.dtype if b.is_floating_point() else torch.float32, scale, f"buffer {n}")
    return dt.compile.Explanation(list(reports))
