"""How ATen converts the operands of a pointwise op, as the mapping reproduces it: the common
dtype of a binary op, the rounding of operands to it, NaN-propagating maximum/minimum."""

from __future__ import annotations

import torch
import torch.fx as fx

from ._lower import Ctx, Unmappable, meta
from ._runtime import dg_dtype


def _proxy(arg):
    """What ``torch.result_type`` needs of an operand: a number, or a tensor of its dtype and
    of its rank class (0-dim tensors promote like numbers within a category)."""
    if not isinstance(arg, fx.Node):
        return arg
    v = meta(arg)
    return torch.empty([1] * v.dim(), dtype=v.dtype)


# (from, to) conversions that keep every value.
LOSSLESS = {(torch.bfloat16, torch.float32), (torch.float16, torch.float32),
            (torch.bfloat16, torch.float64), (torch.float16, torch.float64),
            (torch.float32, torch.float64)}


def rounded(ctx: Ctx, t, dtype):
    """``t`` stored as ``dtype`` (the reference engine rounds a value to its stored type)."""
    y = ctx.g.identity(t)
    y.set_data_type(dg_dtype(dtype))
    return y


def in_common_type(ctx: Ctx, args, vals, compare):
    """The operands of a binary op as ATen computes them: each converted to the op's common
    dtype first. A wider operand (a 0-dim fp32 tensor with a bf16 one) is rounded to it; a
    comparison also rounds a Python number, and the values computed inside the graph (kept
    there in its compute type) when that type is wider, since ATen compares rounded values."""
    common = torch.result_type(*[_proxy(a) for a in args])
    low = common != ctx.compute and (common, ctx.compute) in LOSSLESS
    out = []
    for a, v in zip(args, vals):
        if isinstance(v, float):
            # A number (rounded by a comparison) or a 0-dim constant tensor (converted).
            keep = not compare and not isinstance(a, fx.Node)
            out.append(v if keep else float(torch.tensor(v, dtype=common)))
            continue
        src = meta(a).dtype
        if (src != common and (src, common) not in LOSSLESS) or (
                compare and low and a in ctx.values):
            v = rounded(ctx, v, common)
        out.append(v)
    return out


def nan_propagating(ctx: Ctx, y, a, b):
    """``maximum``/``minimum`` as ATen computes them: a NaN operand gives NaN (dnngraph's max
    and min return the other operand, as fmax and fmin do)."""
    for t in (a, b):
        if isinstance(t, float):
            if t != t:
                raise Unmappable("maximum/minimum with a NaN constant")
            continue
        y = ctx.g.binary_select(t, y, ctx.g.cmp_neq(t, t))
    return y
