"""ATen ops whose mapping yields independent pieces become one FX node per piece, before the
candidates are made.

``convolution_backward`` maps to a data gradient (dgrad), a weight gradient (wgrad) and a
bias gradient (a sum over every dim but the channels). The three read only the incoming
gradient and share no value, so the engine's partitioner, which joins ops along the tensors one
makes and another reads, puts them in separate partitions; one FX node for all three could then
join none. As separate nodes each piece joins the partition its producers and consumers allow
(the gradient of a ReLU in front, the next ReLU gradient or a residual add behind), or stays in
ATen on its own, with its own reason.

Pieces carry ``meta["dnngraph_piece"]`` (``convolution_backward.grad_input`` ...), the name
``explain`` shows. Outputs the original did not compute (``output_mask``) or that nothing reads
make no piece.
"""

from __future__ import annotations

import operator

import torch

from ._lower import meta

aten = torch.ops.aten

PIECE = "dnngraph_piece"
_CONV_PIECES = ("grad_input", "grad_weight", "grad_bias")


def piece_label(node):
    """The piece's name (``convolution_backward.grad_weight``) or None."""
    return node.meta.get(PIECE)


def _used_outputs(node):
    """{output index: [getitem users]}; None when a user is not a getitem."""
    used = {}
    for u in node.users:
        if u.target is not operator.getitem:
            return None
        used.setdefault(u.args[1], []).append(u)
    return used


def _fake(mode, target, args):
    with mode:
        return target(*[meta(a) if isinstance(a, torch.fx.Node) else a for a in args])


def _conv_piece(g, mode, node, k):
    """One piece of a ``convolution_backward`` node: output k alone."""
    args = list(node.args)
    name = f"{node.name}_{_CONV_PIECES[k]}"
    if k == 2:  # a keepdim sum (every mapped value keeps its dims) and a view to [C]
        grad = args[0]
        dims = [d for d in range(meta(grad).dim()) if d != 1]
        target, args = aten.sum.dim_IntList, (grad, dims, True)
    else:
        args[10] = [i == k for i in range(3)]
        target, args = aten.convolution_backward.default, tuple(args)
    piece = g.create_node("call_function", target, args, {}, name=name)
    piece.meta["val"] = _fake(mode, piece.target, piece.args)
    piece.meta[PIECE] = f"convolution_backward.{_CONV_PIECES[k]}"
    if k != 2:
        return piece
    c = meta(piece).shape[1]
    view = g.call_function(aten.view.default, (piece, [c]))
    view.meta["val"] = _fake(mode, view.target, view.args)
    return view


def split_pieces(g, mode) -> bool:
    """Splits every ``convolution_backward`` with more than one output in use; one with a single
    output in use computes only that one and is labelled. True when the graph changed."""
    changed = False
    for node in list(g.nodes):
        if node.op != "call_function" or node.target is not aten.convolution_backward.default:
            continue
        used = _used_outputs(node)
        if not used or any(k not in (0, 1, 2) or not node.args[10][k] for k in used):
            continue
        if len(used) == 1:  # one piece already: it computes only that output
            (k,) = used
            node.args = node.args[:10] + ([i == k for i in range(3)],) + node.args[11:]
            node.meta["val"] = _fake(mode, node.target, node.args)  # what it computes now
            node.meta[PIECE] = f"convolution_backward.{_CONV_PIECES[k]}"
            continue
        for k in sorted(used):
            with g.inserting_before(node):
                piece = _conv_piece(g, mode, node, k)
            for item in used[k]:
                if k == 2:
                    item.replace_all_uses_with(piece)
                    g.erase_node(item)
                else:
                    item.args = (piece, k)
        g.erase_node(node)
        changed = True
    return changed
