"""The attention ops the backend maps: scaled dot-product attention forward and backward, on
the CPU (``_scaled_dot_product_flash_attention_for_cpu``) and in the three CUDA forms (flash,
cuDNN, memory-efficient), without dropout, mask or bias."""

from __future__ import annotations

import math

import torch

import dnngraph as dg

from ._lower import Ctx, Unmappable, meta

aten = torch.ops.aten
F32 = dg.data_type.FLOAT


def check_sdpa_cpu(node):
    if node.args[3] if len(node.args) > 3 else 0.0:
        return "dropout_p > 0"
    if node.kwargs.get("attn_mask") is not None:
        return "attention mask"
    return None


def _scale(node, q):
    s = node.kwargs.get("scale")
    return float(s) if s is not None else 1.0 / math.sqrt(meta(q).shape[-1])


def _stats_dims(lse):
    """Dims of the statistics in the graph ([B, H, S_q, 1]) for torch's logsumexp."""
    shape = list(meta(lse).shape)
    return shape if len(shape) == 4 and shape[-1] == 1 else shape + [1]


def _check_lse_precision(q, lse):
    """Some torch versions (2.11) trace the logsumexp of fp64 attention as fp32 while the kernel
    returns fp64: a graph that followed the trace would hand fp32 statistics to the backward
    (fp32-accurate gradients), and one that did not would break the trace. Left in ATen."""
    if lse is not None and meta(q).dtype == torch.float64 and meta(lse).dtype != torch.float64:
        raise Unmappable(f"fp64 attention whose traced logsumexp is {meta(lse).dtype} (this "
                         "torch version's fake kernel): fused, it would lose fp64 precision")


def _sdpa_fwd(ctx: Ctx, node, causal, out_count):
    q, k, v = node.args[:3]
    lse = next((u for u in node.users if u.args[1] == 1), None)  # the logsumexp, when read
    _check_lse_precision(q, lse)
    o, stats = ctx.g.sdpa(
        ctx.tensor(q), ctx.tensor(k), ctx.tensor(v), is_inference=lse is None,
        attn_scale=_scale(node, q), use_causal_mask=bool(causal),
    )
    outs = [o, stats] + [None] * (out_count - 2)
    dims = [None] * out_count
    if stats is not None:
        stats.set_data_type(F32)
        dims[1] = _stats_dims(lse)
        qv = meta(q)
        if math.prod(dims[1]) != qv.shape[0] * qv.shape[1] * qv.shape[2]:
            raise Unmappable(f"logsumexp of dims {list(meta(lse).shape)} (padded)")
    ctx.define_items(node, outs, dims, placeholders=range(2, out_count))


def _sdpa_bwd(ctx: Ctx, node, grad, q, k, v, out, lse, causal, outputs=3):
    _check_lse_precision(q, lse)
    dq, dk, dv = ctx.g.sdpa_backward(
        ctx.tensor(q), ctx.tensor(k), ctx.tensor(v), ctx.tensor(out), ctx.tensor(grad),
        ctx.tensor(lse, dims=_stats_dims(lse)), attn_scale=_scale(node, q),
        use_causal_mask=bool(causal),
    )
    ctx.define_items(node, [dq, dk, dv] + [None] * (outputs - 3))


def _arg(node, i, name, default):
    return node.args[i] if len(node.args) > i else node.kwargs.get(name, default)


def sdpa_cpu(ctx: Ctx, node):
    _sdpa_fwd(ctx, node, _arg(node, 4, "is_causal", False), 2)


def sdpa_cpu_backward(ctx: Ctx, node):
    grad, q, k, v, out, lse = node.args[:6]
    _sdpa_bwd(ctx, node, grad, q, k, v, out, lse, _arg(node, 7, "is_causal", False))


def check_sdpa_cpu_bwd(node):
    if node.args[6]:
        return "dropout_p > 0"
    if node.kwargs.get("attn_mask") is not None:
        return "attention mask"
    return None


# CUDA forms: flash, cuDNN and memory-efficient attention. Their extra outputs (sequence
# offsets, maxima, random-number state, debug mask) only serve dropout and nested tensors.


def check_flash(node):
    if _arg(node, 3, "dropout_p", 0.0):
        return "dropout_p > 0"
    if _arg(node, 5, "return_debug_mask", False):
        return "debug mask"
    return None


def flash(ctx: Ctx, node):
    _sdpa_fwd(ctx, node, _arg(node, 4, "is_causal", False), 9)


def check_flash_bwd(node):
    return "dropout_p > 0" if node.args[10] else None


def flash_backward(ctx: Ctx, node):
    grad, q, k, v, out, lse = node.args[:6]
    _sdpa_bwd(ctx, node, grad, q, k, v, out, lse, node.args[11])


def _bias_or_dropout(node, bias, dropout):
    """Why an attention node with its bias at args[bias] and dropout_p at args[dropout] is not
    mapped (None when it is)."""
    if node.args[bias] is not None:
        return "attention bias"
    return "dropout_p > 0" if _arg(node, dropout, "dropout_p", 0.0) else None


def check_biased(node):
    return _bias_or_dropout(node, 3, 5)


def check_cudnn_attention(node):
    return check_biased(node) or ("debug mask" if _arg(node, 7, "return_debug_mask", False)
                                   else None)


def cudnn_attention(ctx: Ctx, node):
    _sdpa_fwd(ctx, node, _arg(node, 6, "is_causal", False), 9)


def check_cudnn_attention_bwd(node):
    return _bias_or_dropout(node, 8, 13)


def cudnn_attention_backward(ctx: Ctx, node):
    grad, q, k, v, out, lse = node.args[:6]
    _sdpa_bwd(ctx, node, grad, q, k, v, out, lse, node.args[14])


def efficient(ctx: Ctx, node):
    _sdpa_fwd(ctx, node, _arg(node, 6, "is_causal", False), 4)


def check_efficient_bwd(node):
    return _bias_or_dropout(node, 4, 9)


def efficient_backward(ctx: Ctx, node):
    grad, q, k, v, _bias, out, lse = node.args[:7]
    _sdpa_bwd(ctx, node, grad, q, k, v, out, lse, _arg(node, 11, "is_causal", False), 4)


# (outputs, arguments) the mapping reads of the attention ops: the others are placeholders.
CHECKED = {
    aten._scaled_dot_product_flash_attention.default: (2, [0, 1, 2]),
    aten._scaled_dot_product_cudnn_attention.default: (2, [0, 1, 2]),
    aten._scaled_dot_product_efficient_attention.default: (2, [0, 1, 2]),
    aten._scaled_dot_product_flash_attention_backward.default: (3, [0, 1, 2, 3, 4, 5]),
    aten._scaled_dot_product_cudnn_attention_backward.default: (3, [0, 1, 2, 3, 4, 5]),
    aten._scaled_dot_product_efficient_attention_backward.default: (3, [0, 1, 2, 3, 5, 6]),
}
