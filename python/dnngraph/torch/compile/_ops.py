"""The ATen ops the backend maps, each with its dnngraph lowering.

Only ops whose dnngraph form computes exactly what ATen computes are here (same broadcasting,
same defaults, same outputs); an argument outside that (a rounding mode, a transposed
convolution, dropout, a mask) makes ``check`` return the reason and the node stays in ATen.
"""

from __future__ import annotations

import operator

import torch

import dnngraph as dg

from ._attention import (
    CHECKED,
    check_biased,
    check_cudnn_attention,
    check_cudnn_attention_bwd,
    check_efficient_bwd,
    check_flash,
    check_flash_bwd,
    check_sdpa_cpu,
    check_sdpa_cpu_bwd,
    cudnn_attention,
    cudnn_attention_backward,
    efficient,
    efficient_backward,
    flash,
    flash_backward,
    sdpa_cpu,
    sdpa_cpu_backward,
)
from ._lower import Ctx, Unmappable, check_floating, map_shape, meta
from ._promote import LOSSLESS, in_common_type, nan_propagating, rounded
from ._selects import check_clamp, clamp, hardswish, hardswish_backward, hardtanh_backward
from ._selects import threshold_backward
from ._softmax import check_softmax, check_softmax_bwd, log_softmax, log_softmax_backward
from ._softmax import softmax, softmax_backward

aten = torch.ops.aten
PW = dg.pointwise_mode
F32 = dg.data_type.FLOAT


# ---- pointwise ---------------------------------------------------------------------------------


def _unary(method, **kw):
    def lower(ctx: Ctx, node):
        (x,), d = ctx.pointwise(node, node.args[:1])
        ctx.define(node, getattr(ctx.g, method)(x, **kw), d)

    return lower


def _binary(method, alpha_on_second=False):
    def lower(ctx: Ctx, node):
        (a, b), d = ctx.pointwise(node, node.args[:2])
        a, b = in_common_type(ctx, node.args[:2], (a, b), method.startswith("cmp_"))
        alpha = node.kwargs.get("alpha", 1)
        if alpha_on_second and alpha != 1:
            b = b * alpha if isinstance(b, float) else ctx.g.mul(b, float(alpha))
        if isinstance(a, float) and isinstance(b, float):
            raise Unmappable("both operands are scalars")
        if isinstance(a, float):
            if method not in ("add", "mul", "max", "min"):
                raise Unmappable("scalar first operand of a non-commutative op")
            a, b = b, a  # dnngraph's first operand is a tensor
        y = getattr(ctx.g, method)(a, b)
        if method in ("max", "min"):
            y = nan_propagating(ctx, y, a, b)
        ctx.define(node, y, d)

    return lower


def _where(ctx: Ctx, node):
    cond = node.args[0]
    if cond not in ctx.values:
        raise Unmappable(f"mask '{getattr(cond, 'name', cond)}' is not computed in the graph "
                         "(a torch bool tensor cannot be read: dnngraph's BOOLEAN is bit-packed)")
    (c, a, b), d = ctx.pointwise(node, node.args[:3])
    if isinstance(a, float) and isinstance(b, float):
        raise Unmappable("where with two scalar operands")
    if isinstance(a, float):  # dnngraph's first operand is a tensor: select on the inverse
        ctx.define(node, ctx.g.binary_select(b, a, ctx.g.logical_not(c)), d)
        return
    ctx.define(node, ctx.g.binary_select(a, b, c), d)


def _check_div(node):
    if node.kwargs.get("rounding_mode") is not None:
        return "div with rounding_mode"
    return None


def _gelu(ctx: Ctx, node):
    (x,), d = ctx.pointwise(node, node.args[:1])
    approx = node.kwargs.get("approximate", "none")
    g = ctx.g.gelu_approx_tanh(x) if approx == "tanh" else ctx.g.gelu(x)
    ctx.define(node, g, d)


def _pow(ctx: Ctx, node):
    (x,), d = ctx.pointwise(node, node.args[:1])
    e = node.args[1]
    if e == 2:
        y = ctx.g.mul(x, x)
    elif e == 1:
        y = ctx.g.identity(x)
    elif e == 0.5:
        y = ctx.g.sqrt(x)
    elif e == -0.5:
        y = ctx.g.rsqrt(x)
    else:
        y = ctx.g.pow(x, float(e))
    ctx.define(node, y, d)


def _check_pow(node):
    e = node.args[1]
    if isinstance(e, bool) or not isinstance(e, (int, float)):
        return "exponent is not a number"
    return None


def _to_copy(ctx: Ctx, node):
    # A cast down is stored in its type (it rounds, also when the value stays inside); a
    # cast up is exact: the value keeps the graph's intermediate type.
    (x,), d = ctx.pointwise(node, node.args[:1])
    src, dst = meta(node.args[0]).dtype, meta(node).dtype
    narrows = src != dst and (src, dst) not in LOSSLESS
    ctx.define(node, rounded(ctx, x, dst) if narrows else ctx.g.identity(x), d)


def _check_to_copy(node):
    extra = set(node.kwargs) - {"dtype", "layout", "device", "memory_format"}
    if extra:
        return f"arguments {sorted(extra)}"
    src, dst = meta(node.args[0]), meta(node)
    if src.device != dst.device:
        return "device copy"
    if node.kwargs.get("layout") not in (None, torch.strided):
        return "layout change"
    return None


def _gelu_backward(ctx: Ctx, node):
    (grad, x), d = ctx.pointwise(node, node.args[:2])
    if node.kwargs.get("approximate", "none") == "tanh":
        ctx.define(node, ctx.g.gelu_approx_tanh_backward(grad, x), d)
    else:
        ctx.define(node, ctx.g.gelu_backward(grad, x), d)


def _silu_backward(ctx: Ctx, node):
    (grad, x), d = ctx.pointwise(node, node.args[:2])
    ctx.define(node, ctx.g.silu_backward(grad, x), d)


def _sigmoid_backward(ctx: Ctx, node):
    # ATen's takes the output y: grad * y * (1 - y).
    (grad, y), d = ctx.pointwise(node, node.args[:2])
    one_minus = ctx.g.sub(ctx.g.mul(y, -1.0), -1.0)
    ctx.define(node, ctx.g.mul(ctx.g.mul(grad, y), one_minus), d)


def _rsub(ctx: Ctx, node):
    # other - alpha * self (rsub.Scalar and rsub.Tensor): (self * -alpha) + other.
    (x, other), d = ctx.pointwise(node, node.args[:2])
    x, other = in_common_type(ctx, node.args[:2], (x, other), False)
    if isinstance(x, float):
        raise Unmappable("rsub of a number")
    y = ctx.g.mul(x, -float(node.kwargs.get("alpha", 1)))
    ctx.define(node, ctx.g.add(y, other), d)


def _tanh_backward(ctx: Ctx, node):
    # ATen's takes the output y: grad * (1 - y * y).
    (grad, y), d = ctx.pointwise(node, node.args[:2])
    one_minus = ctx.g.sub(ctx.g.mul(ctx.g.mul(y, y), -1.0), -1.0)
    ctx.define(node, ctx.g.mul(grad, one_minus), d)


def _view(ctx: Ctx, node):
    """A view of an intermediate keeps its dims in the graph (its consumers run in them); a
    view of an input is the input read with the view's dims."""
    x = node.args[0]
    if x in ctx.values:
        ctx.values[node] = ctx.values[x]
        ctx.dims[node] = ctx.dims[x]
    elif x in ctx.aliases:
        ctx.aliases[node] = ctx.aliases[x]
    else:
        ctx.aliases[node] = x


def _check_view(node):
    v, x = meta(node), meta(node.args[0])
    if not isinstance(x, torch.Tensor) or x.dim() == 0 or v.dim() == 0:
        return "view of or to a 0-dim tensor"
    return None


# ---- reductions ------------------------------------------------------------------------------


def _reduction(mode):
    def lower(ctx: Ctx, node):
        x = node.args[0]
        xv, yv = meta(x), meta(node)
        if xv.dim() == 0 or yv.dim() != xv.dim():
            raise Unmappable("reduction without keepdim (the backend adds a view first)")
        xd, od = ctx.dims_of(x), list(yv.shape)
        if xd != list(xv.shape):  # x reshaped inside the graph: reduce in its dims
            od = map_shape(od, list(xv.shape), xd)
            if od is None:
                raise Unmappable(f"'{x.name}' is reshaped inside the graph across reduced dims")
        t = ctx.g.reduction(ctx.tensor(x, dims=xd), mode=mode)
        t.set_dim(od)
        ctx.define(node, t, od)

    return lower


def _check_reduction(node):
    if node.kwargs.get("dtype") is not None:
        return "reduction with dtype="
    xv, yv = meta(node.args[0]), meta(node)
    if not isinstance(xv, torch.Tensor) or xv.dim() == 0:
        return "reduction of a 0-dim tensor"
    if yv.dim() != xv.dim():
        return "reduction without keepdim"
    return None


# ---- GEMMs -----------------------------------------------------------------------------------


def _matmul(ctx: Ctx, a, b):
    return ctx.g.matmul(ctx.tensor(a), ctx.tensor(b))


def _mm(ctx: Ctx, node):
    ctx.define(node, _matmul(ctx, node.args[0], node.args[1]))


def _addmm(ctx: Ctx, node):
    # beta * input + alpha * (m1 @ m2)  (addmm and baddbmm)
    bias, m1, m2 = node.args[:3]
    beta, alpha = node.kwargs.get("beta", 1), node.kwargs.get("alpha", 1)
    y = _matmul(ctx, m1, m2)
    if alpha != 1:
        y = ctx.g.mul(y, float(alpha))
    if beta == 0:
        ctx.define(node, y)
        return
    b = ctx.pointwise(node, [bias])[0][0]
    if beta != 1:
        b = ctx.g.mul(b, float(beta))
    ctx.define(node, ctx.g.add(y, b))


# ---- convolution -----------------------------------------------------------------------------


def _check_conv(node):
    # Grouped and depthwise convolutions are mapped: the groups follow from the weight's
    # input channels (C / groups), as in ATen.
    if node.args[6]:
        return "transposed convolution"
    return _check_conv_rank(node.args[0])


def _check_conv_rank(x):
    if meta(x).dim() not in (3, 4, 5):
        return "convolution of rank other than 1-D/2-D/3-D"
    return None


def _conv_args(node, first):
    stride, padding, dilation = node.args[first : first + 3]
    return dict(padding=list(padding), stride=list(stride), dilation=list(dilation))


def _conv_bias_dims(x_rank, c):
    return [1, c] + [1] * (x_rank - 2)


def _convolution(ctx: Ctx, node):
    x, w, bias = node.args[:3]
    y = ctx.g.conv_fprop(ctx.tensor(x), ctx.tensor(w), **_conv_args(node, 3))
    if bias is not None:
        yv = meta(node)
        b = ctx.tensor(bias, dims=_conv_bias_dims(yv.dim(), yv.shape[1]))
        y = ctx.g.add(y, b)
    ctx.define(node, y)


def _check_conv_bwd(node):
    if node.args[7]:
        return "transposed convolution"
    return _check_conv_rank(node.args[1])


def _convolution_backward(ctx: Ctx, node):
    grad, x, w = node.args[:3]
    mask = node.args[10]
    kw = _conv_args(node, 4)
    xv, wv, gv = meta(x), meta(w), meta(grad)
    g = ctx.tensor(grad)
    outs, dims = [None, None, None], [None, None, None]
    if mask[0]:
        outs[0] = ctx.g.conv_dgrad(g, ctx.tensor(w), **kw).set_dim(list(xv.shape))
    if mask[1]:
        outs[1] = ctx.g.conv_wgrad(ctx.tensor(x), g, **kw).set_dim(list(wv.shape))
    if mask[2]:
        dims[2] = _conv_bias_dims(gv.dim(), gv.shape[1])
        outs[2] = ctx.g.reduction(g, mode=dg.reduction_mode.ADD).set_dim(dims[2])
    ctx.define_items(node, outs, dims)


# ---- norms -----------------------------------------------------------------------------------


def _norm_param_dims(x_rank, normalized_shape):
    return [1] * (x_rank - len(normalized_shape)) + list(normalized_shape)


def _check_layer_norm(node):
    if node.args[2] is None or node.args[3] is None:
        return "layer_norm without weight or bias"
    return None


def _norm_dims(ctx, x, shape):
    xd = ctx.dims_of(x)
    k = len(shape)
    if list(xd[len(xd) - k:]) != list(shape):
        raise Unmappable(f"'{x.name}' has dims {xd} in the graph; normalized dims {list(shape)}")
    return xd, [1] * (len(xd) - k) + list(shape), list(xd[: len(xd) - k]) + [1] * k


def _native_layer_norm(ctx: Ctx, node):
    x, shape, w, b, eps = node.args[:5]
    xd, pd, sd = _norm_dims(ctx, x, shape)
    stats_used = any(u.args[1] in (1, 2) for u in node.users)
    phase = dg.norm_forward_phase.TRAINING if stats_used else dg.norm_forward_phase.INFERENCE
    y, mean, rstd = ctx.g.layernorm(
        phase, ctx.tensor(x, dims=xd), ctx.tensor(w, dims=pd), ctx.tensor(b, dims=pd),
        float(eps),
    )
    for s in (mean, rstd):
        if s is not None:
            s.set_data_type(F32)
    ctx.define_items(node, [y, mean, rstd], [xd, sd, sd])


def _check_layer_norm_bwd(node):
    if node.args[5] is None:
        return "layer_norm backward without weight"
    return None


def _native_layer_norm_backward(ctx: Ctx, node):
    grad, x, shape, mean, rstd, w = node.args[:6]
    xd, pd, sd = _norm_dims(ctx, x, shape)
    dx, dw, db = ctx.g.layernorm_backward(
        ctx.tensor(grad, dims=xd), ctx.tensor(x, dims=xd), ctx.tensor(w, dims=pd),
        ctx.tensor(mean, dims=sd), ctx.tensor(rstd, dims=sd),
    )
    ctx.define_items(node, [dx, dw, db], [xd, pd, pd])


def rms_norm_pattern(x, weight, eps):
    """What the decomposition of ``nn.RMSNorm`` computes: ``(y, rstd, x * rstd)``. The backend
    puts one call of it in place of the decomposed ops; left unclaimed, it runs those ops."""
    rstd = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    xhat = x * rstd
    return xhat * weight, rstd, xhat


def _rms_norm(ctx: Ctx, node):
    x, w, eps = node.args
    xd, pd, sd = _norm_dims(ctx, x, [meta(w).shape[0]])
    used = {u.args[1] for u in node.users}
    phase = dg.norm_forward_phase.TRAINING if used & {1, 2} else dg.norm_forward_phase.INFERENCE
    xt = ctx.tensor(x, dims=xd)
    y, rstd = ctx.g.rmsnorm(
        norm_forward_phase=phase, input=xt, scale=ctx.tensor(w, dims=pd), epsilon=float(eps)
    )
    xhat = ctx.g.mul(xt, rstd) if 2 in used else None
    if rstd is not None:
        rstd.set_data_type(F32)
    ctx.define_items(node, [y, rstd, xhat], [xd, sd, xd])


# Comparisons make masks (bool, read only inside a graph by where); where reads one.
CHECKED.update({getattr(aten, op).Tensor: (0, None) for op in ("gt", "lt", "ge", "le", "eq", "ne")})
CHECKED.update({getattr(aten, op).Scalar: (0, None) for op in ("gt", "lt", "ge", "le", "eq", "ne")})
CHECKED[aten.where.self] = (None, [1, 2])

# How many ATen ops each pattern replaced.
PATTERN_SIZE = {rms_norm_pattern: 6}


def _getitem(ctx: Ctx, node):
    if node not in ctx.values and node not in ctx.placeholders:
        raise Unmappable(f"'{node.name}' reads an output its op does not compute")


# ---- the table -------------------------------------------------------------------------------

# target -> (lowering, check or None)
TABLE = {
    aten.add.Tensor: (_binary("add", alpha_on_second=True), None),
    aten.add.Scalar: (_binary("add", alpha_on_second=True), None),
    aten.sub.Tensor: (_binary("sub", alpha_on_second=True), None),
    aten.sub.Scalar: (_binary("sub", alpha_on_second=True), None),
    aten.mul.Tensor: (_binary("mul"), None),
    aten.mul.Scalar: (_binary("mul"), None),
    aten.div.Tensor: (_binary("div"), _check_div),
    aten.div.Scalar: (_binary("div"), None),
    aten.maximum.default: (_binary("max"), None),
    aten.minimum.default: (_binary("min"), None),
    aten.rsub.Scalar: (_rsub, None),
    aten.rsub.Tensor: (_rsub, None),
    aten.clamp.default: (clamp, check_clamp),
    aten.clamp_min.default: (clamp, check_clamp),
    aten.clamp_max.default: (clamp, check_clamp),
    aten.hardtanh.default: (clamp, check_clamp),
    aten.hardtanh_backward.default: (hardtanh_backward, None),
    aten.hardswish.default: (hardswish, None),
    aten.hardswish_backward.default: (hardswish_backward, None),
    aten.gt.Tensor: (_binary("cmp_gt"), None),
    aten.gt.Scalar: (_binary("cmp_gt"), None),
    aten.lt.Tensor: (_binary("cmp_lt"), None),
    aten.lt.Scalar: (_binary("cmp_lt"), None),
    aten.ge.Tensor: (_binary("cmp_ge"), None),
    aten.ge.Scalar: (_binary("cmp_ge"), None),
    aten.le.Tensor: (_binary("cmp_le"), None),
    aten.le.Scalar: (_binary("cmp_le"), None),
    aten.eq.Tensor: (_binary("cmp_eq"), None),
    aten.eq.Scalar: (_binary("cmp_eq"), None),
    aten.ne.Tensor: (_binary("cmp_neq"), None),
    aten.ne.Scalar: (_binary("cmp_neq"), None),
    aten.where.self: (_where, None),
    aten.neg.default: (_unary("neg"), None),
    aten.exp.default: (_unary("exp"), None),
    aten.log.default: (_unary("log"), None),
    aten.sqrt.default: (_unary("sqrt"), None),
    aten.rsqrt.default: (_unary("rsqrt"), None),
    aten.reciprocal.default: (_unary("reciprocal"), None),
    aten.abs.default: (_unary("abs"), None),
    aten.tanh.default: (_unary("tanh"), None),
    aten.sigmoid.default: (_unary("sigmoid"), None),
    aten.relu.default: (_unary("relu"), None),
    aten.silu.default: (_unary("silu"), None),
    aten.erf.default: (_unary("erf"), None),
    aten.gelu.default: (_gelu, None),
    aten.pow.Tensor_Scalar: (_pow, _check_pow),
    aten._to_copy.default: (_to_copy, _check_to_copy),
    aten.view.default: (_view, _check_view),
    aten._unsafe_view.default: (_view, _check_view),
    aten.threshold_backward.default: (threshold_backward, None),
    aten.gelu_backward.default: (_gelu_backward, None),
    aten.silu_backward.default: (_silu_backward, None),
    aten.sigmoid_backward.default: (_sigmoid_backward, None),
    aten.tanh_backward.default: (_tanh_backward, None),
    aten.sum.dim_IntList: (_reduction(dg.reduction_mode.ADD), _check_reduction),
    aten.mean.dim: (_reduction(dg.reduction_mode.AVG), _check_reduction),
    aten.amax.default: (_reduction(dg.reduction_mode.MAX), _check_reduction),  # AMAX is max|x|
    aten._softmax.default: (softmax, check_softmax),
    aten._softmax_backward_data.default: (softmax_backward, check_softmax_bwd),
    aten._log_softmax.default: (log_softmax, check_softmax),
    aten._log_softmax_backward_data.default: (log_softmax_backward, check_softmax_bwd),
    aten.mm.default: (_mm, None),
    aten.bmm.default: (_mm, None),
    aten.addmm.default: (_addmm, None),
    aten.baddbmm.default: (_addmm, None),
    aten.convolution.default: (_convolution, _check_conv),
    aten.convolution_backward.default: (_convolution_backward, _check_conv_bwd),
    aten.native_layer_norm.default: (_native_layer_norm, _check_layer_norm),
    aten.native_layer_norm_backward.default: (
        _native_layer_norm_backward,
        _check_layer_norm_bwd,
    ),
    rms_norm_pattern: (_rms_norm, None),
    aten._scaled_dot_product_flash_attention_for_cpu.default: (sdpa_cpu, check_sdpa_cpu),
    aten._scaled_dot_product_flash_attention_for_cpu_backward.default: (
        sdpa_cpu_backward,
        check_sdpa_cpu_bwd,
    ),
    aten._scaled_dot_product_flash_attention.default: (flash, check_flash),
    aten._scaled_dot_product_flash_attention_backward.default: (
        flash_backward,
        check_flash_bwd,
    ),
    aten._scaled_dot_product_cudnn_attention.default: (cudnn_attention, check_cudnn_attention),
    aten._scaled_dot_product_cudnn_attention_backward.default: (
        cudnn_attention_backward,
        check_cudnn_attention_bwd,
    ),
    aten._scaled_dot_product_efficient_attention.default: (efficient, check_biased),
    aten._scaled_dot_product_efficient_attention_backward.default: (
        efficient_backward,
        check_efficient_bwd,
    ),
}

# The ops a partition needs to be worth a graph: pointwise and reduction ops alone are fused as
# well by the inner compiler.
ANCHORS = {
    rms_norm_pattern,
    aten.mm.default, aten.bmm.default, aten.addmm.default, aten.baddbmm.default,
    aten.convolution.default, aten.convolution_backward.default,
    aten.native_layer_norm.default, aten.native_layer_norm_backward.default,
    aten._scaled_dot_product_flash_attention_for_cpu.default,
    aten._scaled_dot_product_flash_attention_for_cpu_backward.default,
    aten._scaled_dot_product_flash_attention.default,
    aten._scaled_dot_product_flash_attention_backward.default,
    aten._scaled_dot_product_cudnn_attention.default,
    aten._scaled_dot_product_cudnn_attention_backward.default,
    aten._scaled_dot_product_efficient_attention.default,
    aten._scaled_dot_product_efficient_attention_backward.default,
}

# Ops that only re-index memory: they stay in ATen (free there) and are not reported as
# "not mapped".
VIEWS = {
    aten.t.default, aten.transpose.int,
    aten.permute.default, aten.expand.default, aten.unsqueeze.default, aten.squeeze.dim,
    aten.squeeze.dims, aten.slice.Tensor, aten.select.int, aten.detach.default,
    aten.alias.default, aten.as_strided.default, aten.narrow.default,
}


def why_not(node) -> str | None:
    """None when ``node`` can be mapped, else the reason it stays in ATen."""
    if node.op != "call_function":
        return "not an op"
    if node.target is operator.getitem:
        return None
    entry = TABLE.get(node.target)
    if entry is None:
        if getattr(node.target, "namespace", None) == "dnngraph":
            return "a dnngraph op: runs its own graphs"
        return "op not mapped"
    outputs, inputs = CHECKED.get(node.target, (None, None))
    reason = check_floating(node, outputs, inputs)
    if reason is None and entry[1] is not None:
        reason = entry[1](node)
    return reason


def lower(ctx: Ctx, node):
    if node.target is operator.getitem:
        _getitem(ctx, node)
        return
    TABLE[node.target][0](ctx, node)
