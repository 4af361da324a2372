"""Rewrites of an ATen FX graph before its ops are mapped (values computed on the graph's
fake tensors):

* a reduction without keepdim -> a keepdim reduction and a view (the view stays in ATen), so
  every mapped value has its own dims inside a dnngraph graph;
* inference batch norm -> ``x * scale + shift`` (per-channel constants in ATen), the scale
  folded into the weight of a convolution only the batch norm reads;
* ``conv + bias + residual`` -> ``conv + residual + bias`` (the form cuDNN runs as one
  precompiled GEMM kernel with the residual as its C matrix: ``_residual_first``);
* the decomposition of ``nn.RMSNorm`` -> one ``rms_norm_pattern`` call;
* ``convolution_backward`` -> one node per gradient it computes (``_pieces.py``).
"""

from __future__ import annotations

import operator

import torch
import torch.fx as fx
from torch.fx.passes.tools_common import legalize_graph

from ._lower import meta
from ._ops import rms_norm_pattern
from ._pieces import PIECE, split_pieces

aten = torch.ops.aten

_KEEPDIM_REDUCTIONS = {aten.sum.dim_IntList, aten.mean.dim, aten.amax.default}


def _fake_mode(gm):
    for n in gm.graph.nodes:
        v = meta(n)
        if isinstance(v, torch._subclasses.FakeTensor):
            return v.fake_mode
    return None


def canonicalize(gm: fx.GraphModule):
    """Reductions without keepdim -> keepdim reduction + view (values computed on fakes)."""
    mode = _fake_mode(gm)
    if mode is None:
        return
    g = gm.graph
    split_pieces(g, mode)
    for node in list(g.nodes):
        if node.op != "call_function":
            continue
        x = node.args[0] if node.args else None
        xv, yv = meta(x), meta(node)
        if not isinstance(xv, torch.Tensor) or not isinstance(yv, torch.Tensor):
            continue
        if node.target is aten.sum.default and xv.dim() > 0 and not node.kwargs:
            target, dims = aten.sum.dim_IntList, list(range(xv.dim()))
        elif node.target in _KEEPDIM_REDUCTIONS and yv.dim() != xv.dim() and xv.dim() > 0:
            target = node.target
            dims = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
            dims = list(range(xv.dim())) if not dims else list(dims)
            if node.kwargs.get("dtype") is not None:
                continue
        else:
            continue
        with g.inserting_before(node):
            red = g.call_function(target, (x, dims, True))
            view = g.call_function(aten.view.default, (red, list(yv.shape)))
        with mode:
            red.meta["val"] = target(xv, dims, True)
            view.meta["val"] = red.meta["val"].view(list(yv.shape))
        if PIECE in node.meta:
            red.meta[PIECE] = node.meta[PIECE]
        node.replace_all_uses_with(view)
        g.erase_node(node)
    _unfold_batch_norms(g, mode)
    _residual_first(g, mode)
    if _fuse_rms_norms(g, mode):
        legalize_graph(gm)  # the weight may be defined after the pattern's first op
    gm.graph.lint()


def _emit(g, mode, target, *args, keep_in_aten=False):
    node = g.call_function(target, args)
    with mode:
        node.meta["val"] = target(*[meta(a) if isinstance(a, fx.Node) else a for a in args])
    if keep_in_aten:
        node.meta["dnngraph_keep_in_aten"] = True
    return node


def _folded_conv(g, mode, x, scale, k):
    """When ``x`` is a convolution that only this batch norm reads: the same convolution of the
    weight scaled per output channel (``conv(in, w) * scale == conv(in, w * scale)``), and its
    bias (or None), else None. The weight's scaling is one small op kept in ATen; the graph then
    holds a convolution and a bias add, the fused convolution cuDNN has fast kernels for, rather
    than a convolution followed by a per-channel scale and shift."""
    if (not isinstance(x, fx.Node) or x.target is not aten.convolution.default
            or len(x.users) != 1 or x.kwargs or x.args[6]):  # transposed: channels are dim 1
        return None
    w, bias = x.args[1], x.args[2]
    wv = meta(w)
    if not isinstance(w, fx.Node) or not isinstance(wv, torch.Tensor) or wv.shape[0] != k:
        return None
    per_out = _emit(g, mode, aten.view.default, scale, [k] + [1] * (wv.dim() - 1), keep_in_aten=True)
    w2 = _emit(g, mode, aten.mul.Tensor, w, per_out, keep_in_aten=True)
    conv = _emit(g, mode, aten.convolution.default, x.args[0], w2, None, *x.args[3:])
    b2 = None if bias is None else _emit(g, mode, aten.mul.Tensor, bias, scale, keep_in_aten=True)
    return conv, b2


def _unfold_batch_norms(g, mode):
    """Inference batch norm -> ``x * scale + shift`` with ``scale = w * rsqrt(var + eps)`` and
    ``shift = b - mean * scale`` per channel: the per-channel ops stay in ATen (tiny), the
    two pointwise ops on x join the convolution's graph. After a convolution whose output only
    the batch norm reads, the scale folds into the convolution's weight (``_folded_conv``):
    ``conv(in, w * scale) + shift``."""
    target = aten._native_batch_norm_legit_no_training.default
    for bn in list(g.nodes):
        if bn.op != "call_function" or bn.target is not target:
            continue
        x, w, b, mean, var, _momentum, eps = bn.args[:7]
        xv = meta(x)
        users = list(bn.users)
        if (w is None or b is None or not isinstance(xv, torch.Tensor) or xv.dim() < 3
                or any(u.target is not operator.getitem or u.args[1] != 0 for u in users)):
            continue
        c = xv.shape[1]
        shape = [1, c] + [1] * (xv.dim() - 2)
        with g.inserting_before(bn):
            k = dict(keep_in_aten=True)
            inv = _emit(g, mode, aten.rsqrt.default, _emit(g, mode, aten.add.Tensor, var, eps, **k), **k)
            scale = _emit(g, mode, aten.mul.Tensor, w, inv, **k)
            shift = _emit(g, mode, aten.sub.Tensor, b,
                          _emit(g, mode, aten.mul.Tensor, mean, scale, **k), **k)
            folded = _folded_conv(g, mode, x, scale, c)
            if folded is None:
                scaled = _emit(g, mode, aten.mul.Tensor, x,
                               _emit(g, mode, aten.view.default, scale, shape, **k))
            else:
                scaled, b2 = folded
                if b2 is not None:
                    shift = _emit(g, mode, aten.add.Tensor, shift, b2, **k)
            shift = _emit(g, mode, aten.view.default, shift, shape, **k)
            y = _emit(g, mode, aten.add.Tensor, scaled, shift)
        for u in users:
            u.replace_all_uses_with(y)
            g.erase_node(u)
        g.erase_node(bn)
        if folded is not None:
            g.erase_node(x)


def _plain_add(node):
    return (isinstance(node, fx.Node) and node.op == "call_function"
            and node.target is aten.add.Tensor and len(node.args) == 2 and not node.kwargs
            and all(isinstance(a, fx.Node) for a in node.args))


def _residual_first(g, mode):
    """``(conv + b) + r`` -> ``(conv + r) + b`` where ``b`` broadcasts (a bias), ``r`` has the
    output's size (a residual) and only the outer add reads the inner one: cuDNN 9.19 runs the
    first as a kernel it compiles at run time and the second, for a 1×1 convolution, as a
    precompiled GEMM with the residual as its C matrix and the bias in its epilogue (H100, b64
    NHWC bf16: 134 -> 93 µs at 64->256 56²). In fp32 inside a fused graph the order changes
    only the rounding."""
    for outer in list(g.nodes):
        if not _plain_add(outer):
            continue
        yv = meta(outer)
        for k in (0, 1):
            inner, r = outer.args[k], outer.args[1 - k]
            if not _plain_add(inner) or not _only_user(inner, outer):
                continue
            conv = next((a for a in inner.args if a.target is aten.convolution.default), None)
            if conv is None:
                continue
            b = inner.args[1] if inner.args[0] is conv else inner.args[0]
            rv, bv, cv = meta(r), meta(b), meta(conv)
            if not all(isinstance(v, torch.Tensor) for v in (rv, bv, cv, yv)):
                continue
            if (list(rv.shape) != list(yv.shape) or list(cv.shape) != list(yv.shape)
                    or bv.numel() >= yv.numel() or rv.dtype != yv.dtype or cv.dtype != yv.dtype):
                continue
            with g.inserting_before(outer):
                first = _emit(g, mode, aten.add.Tensor, conv, r)
                second = _emit(g, mode, aten.add.Tensor, first, b)
            outer.replace_all_uses_with(second)
            g.erase_node(outer)
            g.erase_node(inner)
            break


def _only_user(node, user):
    return list(node.users) == [user]


def _match_rms(mul):
    """(x, weight, eps, rsqrt, xhat) when ``mul`` is ``(x * rsqrt(mean(x^2, -1) + eps)) * w``."""
    if mul.op != "call_function" or mul.target is not aten.mul.Tensor:
        return None
    xhat, w = mul.args[:2]
    if not isinstance(xhat, fx.Node) or xhat.target is not aten.mul.Tensor:
        return None
    x, r = xhat.args[:2]
    if not isinstance(r, fx.Node) or r.target is not aten.rsqrt.default:
        return None
    add = r.args[0]
    if not isinstance(add, fx.Node) or add.target not in (aten.add.Scalar, aten.add.Tensor):
        return None
    mean, eps = add.args[:2]
    if not isinstance(eps, (int, float)) or isinstance(eps, bool) or "alpha" in add.kwargs:
        return None
    if not isinstance(mean, fx.Node) or mean.target is not aten.mean.dim:
        return None
    sq = mean.args[0]
    xv = meta(x)
    if not isinstance(xv, torch.Tensor) or list(mean.args[1]) not in ([-1], [xv.dim() - 1]):
        return None
    if not isinstance(sq, fx.Node) or sq.target is not aten.pow.Tensor_Scalar:
        return None
    if sq.args[0] is not x or sq.args[1] != 2:
        return None
    wv = meta(w)
    if not isinstance(w, fx.Node) or not isinstance(wv, torch.Tensor) or wv.dim() != 1:
        return None
    if not (_only_user(sq, mean) and _only_user(mean, add) and _only_user(add, r)):
        return None
    return x, w, float(eps), r, xhat


def _fuse_rms_norms(g, mode):
    """Each decomposed RMSNorm becomes one ``rms_norm_pattern`` call (its rstd and x * rstd
    too, where the graph reads them: the backward saves them). Returns how many."""
    count = 0
    for mul in list(g.nodes):
        m = _match_rms(mul)
        if m is None:
            continue
        x, w, eps, r, xhat = m
        with g.inserting_before(r.args[0].args[0].args[0]):  # the first op, pow
            call = g.call_function(rms_norm_pattern, (x, w, eps))
            items = [g.call_function(operator.getitem, (call, i)) for i in range(3)]
        with mode:
            call.meta["val"] = rms_norm_pattern(meta(x), meta(w), eps)
        for i, it in enumerate(items):
            it.meta["val"] = call.meta["val"][i]
        mul.replace_all_uses_with(items[0])
        g.erase_node(mul)
        xhat.replace_all_uses_with(items[2])
        r.replace_all_uses_with(items[1])
        add = r.args[0]
        mean = add.args[0]
        sq = mean.args[0]
        for n in (xhat, r, add, mean, sq):
            g.erase_node(n)
        for it in items:
            if not it.users:
                g.erase_node(it)
        count += 1
    return count
