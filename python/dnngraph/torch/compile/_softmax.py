"""Softmax over the last dim (``_softmax``) and its backward (``_softmax_backward_data``,
``y * (g - sum(g * y))`` as ATen computes it)."""

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
