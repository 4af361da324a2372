"""Lowerings whose ATen semantics need a select rather than arithmetic: clamps (a NaN input
stays NaN, where dnngraph's max/min are fmax/fmin), hardswish, and the masked gradients (0 where
the mask is off, even for an inf or NaN gradient; a NaN input passes the gradient)."""

from __future__ import annotations

import torch

from ._lower import Ctx
from ._promote import nan_propagating

aten = torch.ops.aten


def threshold_backward(ctx: Ctx, node):
    # ATen: 0 where self <= threshold, else grad. A select, not grad * (self > threshold): an
    # inf or NaN gradient where the mask is 0 gives 0, and a NaN self passes the gradient.
    (grad, x), d = ctx.pointwise(node, node.args[:2])
    keep = ctx.g.logical_not(ctx.g.cmp_le(x, float(node.args[2])))
    ctx.define(node, ctx.g.binary_select(grad, 0.0, keep), d)


def _clamp_args(node):
    """(min, max) of clamp, clamp_min, clamp_max and hardtanh (None: no bound)."""
    t, a = node.target, node.args
    if t is aten.clamp_min.default:
        return a[1], None
    if t is aten.clamp_max.default:
        return None, a[1]
    if t is aten.hardtanh.default:
        return (a[1] if len(a) > 1 else -1.0), (a[2] if len(a) > 2 else 1.0)
    return (a[1] if len(a) > 1 else node.kwargs.get("min")), (
        a[2] if len(a) > 2 else node.kwargs.get("max"))


def check_clamp(node):
    lo, hi = _clamp_args(node)
    for b in (lo, hi):
        if b is not None and (isinstance(b, bool) or not isinstance(b, (int, float))):
            return "clamp bound is not a number"
    if lo is None and hi is None:
        return "clamp without bounds"
    return None


def clamp(ctx: Ctx, node):
    # min(max(x, lo), hi) as ATen: a NaN x stays NaN (dnngraph's max/min are fmax/fmin).
    (x,), d = ctx.pointwise(node, node.args[:1])
    lo, hi = _clamp_args(node)
    y = x
    if lo is not None:
        y = ctx.g.max(y, float(lo))
    if hi is not None:
        y = ctx.g.min(y, float(hi))
    ctx.define(node, nan_propagating(ctx, y, x, 0.0), d)


def hardtanh_backward(ctx: Ctx, node):
    # ATen: 0 where self <= min or self >= max, else grad (a NaN self passes the gradient).
    (grad, x), d = ctx.pointwise(node, node.args[:2])
    lo, hi = float(node.args[2]), float(node.args[3])
    out = ctx.g.logical_or(ctx.g.cmp_le(x, lo), ctx.g.cmp_ge(x, hi))
    ctx.define(node, ctx.g.binary_select(grad, 0.0, ctx.g.logical_not(out)), d)


def hardswish(ctx: Ctx, node):
    # ATen: x * min(max(x + 3, 0), 6) / 6 (a NaN x gives NaN through the product).
    (x,), d = ctx.pointwise(node, node.args[:1])
    r6 = ctx.g.min(ctx.g.max(ctx.g.add(x, 3.0), 0.0), 6.0)
    ctx.define(node, ctx.g.div(ctx.g.mul(x, r6), 6.0), d)


def hardswish_backward(ctx: Ctx, node):
    # ATen: 0 where x < -3, grad * (x / 3 + 0.5) where x <= 3, else grad (also for a NaN x).
    (grad, x), d = ctx.pointwise(node, node.args[:2])
    mid = ctx.g.mul(grad, ctx.g.add(ctx.g.div(x, 3.0), 0.5))
    y = ctx.g.binary_select(mid, grad, ctx.g.cmp_le(x, 3.0))
    ctx.define(node, ctx.g.binary_select(y, 0.0, ctx.g.logical_not(ctx.g.cmp_lt(x, -3.0))), d)
