"""Softmax and log-softmax over the last dim (``_softmax``, ``_log_softmax``) and their
backwards (``y * (g - sum(g * y))`` and ``g - exp(y) * sum(g)``, as ATen computes them)."""

from __future__ import annotations

import torch

import dnngraph as dg

from ._lower import Ctx, Unmappable, meta


def _check_softmax_dim(x, dim):
    if not isinstance(x, torch.Tensor) or x.dim() == 0:
        return "softmax of a 0-dim tensor"
    if dim not in (-1, x.dim() - 1):
        return f"softmax over dim {dim} (dnngraph's softmax runs over the last dim)"
    return None


def check_softmax(node):
    # _softmax(self, dim, half_to_float)
    if node.args[2]:
        return "softmax with half_to_float"
    return _check_softmax_dim(meta(node.args[0]), node.args[1])


def check_softmax_bwd(node):
    # _softmax_backward_data(grad_output, output, dim, input_dtype)
    if node.args[3] != meta(node).dtype:
        return "softmax backward to another dtype"
    return _check_softmax_dim(meta(node.args[0]), node.args[2])


def _last_dim_dims(ctx: Ctx, x):
    d = ctx.dims_of(x)
    if d != list(meta(x).shape):
        raise Unmappable(f"'{x.name}' is reshaped inside the graph (softmax needs its last dim)")
    return d


def softmax(ctx: Ctx, node):
    x = node.args[0]
    y, _ = ctx.g.softmax(ctx.tensor(x, dims=_last_dim_dims(ctx, x)))
    ctx.define(node, y)


def softmax_backward(ctx: Ctx, node):
    # ATen: y * (g - sum(g * y, dim, keepdim)).
    g, y = node.args[:2]
    dims = _last_dim_dims(ctx, g)
    gt, yt = ctx.tensor(g, dims=dims), ctx.tensor(y, dims=_last_dim_dims(ctx, y))
    s = ctx.g.reduction(ctx.g.mul(gt, yt), mode=dg.reduction_mode.ADD)
    s.set_dim(dims[:-1] + [1])
    ctx.define(node, ctx.g.mul(yt, ctx.g.sub(gt, s)))


def log_softmax(ctx: Ctx, node):
    # x - logsumexp(x): the softmax's statistics are the log-sum-exp of each row.
    x = node.args[0]
    xt = ctx.tensor(x, dims=_last_dim_dims(ctx, x))
    _, lse = ctx.g.softmax(xt, generate_stats=True)
    ctx.define(node, ctx.g.sub(xt, lse))


def log_softmax_backward(ctx: Ctx, node):
    # ATen: g - exp(y) * sum(g, dim, keepdim).
    g, y = node.args[:2]
    dims = _last_dim_dims(ctx, g)
    gt, yt = ctx.tensor(g, dims=dims), ctx.tensor(y, dims=_last_dim_dims(ctx, y))
    s = ctx.g.reduction(gt, mode=dg.reduction_mode.ADD)
    s.set_dim(dims[:-1] + [1])
    ctx.define(node, ctx.g.sub(gt, ctx.g.mul(ctx.g.exp(yt), s)))
