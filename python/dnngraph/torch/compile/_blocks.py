"""Block rewrites on the graph Dynamo hands the backend, before AOTAutograd: a pattern whose
backward fuses across ops (which the ATen graphs, forward and backward traced apart, no longer
show as one thing) is replaced by the dnngraph op that computes it, whose C++ autograd then
gives the backward graphs.

One pattern: the ResNet basic block without batch norm,
``relu(x + conv2d(relu(conv2d(x, w1, b1)), w2, b2))`` (either order of the add, or ``+=``) with ``[C, C,
k, k]`` weights, k odd, stride 1, padding k // 2 (or ``"same"``), dilation 1, groups 1, every
tensor of one floating dtype, the intermediate results used only inside the pattern ->
``dnngraph::residual_block`` (its backward: the inner relu's derivative and bias gradient in
the outer convolution's dgrad graph, the residual's gradient in the inner one's)."""

from __future__ import annotations

import operator

import torch
from torch import fx

_CONV = {torch.conv2d, torch.nn.functional.conv2d}
_RELU = {torch.relu, torch.nn.functional.relu}
# iadd: `out += x` on the convolution's output, which nothing else reads (checked).
_ADD = {operator.add, operator.iadd, torch.add}
_CONV_ARGS = ("input", "weight", "bias", "stride", "padding", "dilation", "groups")
_CONV_DEFAULTS = {"bias": None, "stride": 1, "padding": 0, "dilation": 1, "groups": 1}


def _is(node, targets):
    return isinstance(node, fx.Node) and node.op == "call_function" and node.target in targets


def _conv_args(node):
    args = dict(_CONV_DEFAULTS)
    args.update(zip(_CONV_ARGS, node.args))
    args.update(node.kwargs)
    return args


def _value(gm, node):
    if not isinstance(node, fx.Node):
        return node
    if node.op == "get_attr":
        v = gm
        for part in node.target.split("."):
            v = getattr(v, part)
        return v
    return node.meta.get("example_value")


def _pair_is(v, want):
    if isinstance(v, int) and not isinstance(v, bool):
        return v == want
    return isinstance(v, (tuple, list)) and len(v) == 2 and all(e == want for e in v)


def _only_user(node, user):
    return len(node.users) == 1 and user in node.users


def _relu_arg(node):
    if not _is(node, _RELU) or node.kwargs.get("inplace", False):
        return None
    if len(node.args) > 1 and node.args[1]:  # F.relu(x, True)
        return None
    return node.args[0] if node.args else node.kwargs.get("input")


def _conv_ok(gm, conv, x, dtype, channels):
    a = _conv_args(conv)
    w, b = _value(gm, a["weight"]), _value(gm, a["bias"])
    if not isinstance(w, torch.Tensor) or w.dim() != 4 or w.dtype != dtype:
        return False
    k = w.shape[-1]
    if list(w.shape) != [channels, channels, k, k] or k % 2 == 0:
        return False
    if a["bias"] is not None and (not isinstance(b, torch.Tensor) or list(b.shape) != [channels]
                                  or b.dtype != dtype):
        return False
    pad = a["padding"]
    pad_ok = pad == "same" or _pair_is(pad, k // 2)
    return (a["input"] is x and pad_ok and _pair_is(a["stride"], 1) and _pair_is(a["dilation"], 1)
            and a["groups"] == 1)


def _match(gm, out):
    """(x, w1, b1, w2, b2, nodes) when ``out`` ends the pattern, else None."""
    add = _relu_arg(out)
    if not _is(add, _ADD) or len(add.args) != 2 or add.kwargs or not _only_user(add, out):
        return None
    for conv2, x in (add.args, add.args[::-1]):
        if not _is(conv2, _CONV) or not _only_user(conv2, add) or not isinstance(x, fx.Node):
            continue
        inner = _conv_args(conv2)["input"]
        conv1 = _relu_arg(inner)
        if not _is(conv1, _CONV) or not _only_user(inner, conv2) or not _only_user(conv1, inner):
            continue
        xv = _value(gm, x)
        if (not isinstance(xv, torch.Tensor) or xv.dim() != 4
                or xv.dtype not in (torch.float32, torch.float16, torch.bfloat16)):
            continue
        c = xv.shape[1]
        if not (_conv_ok(gm, conv1, x, xv.dtype, c) and _conv_ok(gm, conv2, inner, xv.dtype, c)):
            continue
        a1, a2 = _conv_args(conv1), _conv_args(conv2)
        return x, a1["weight"], a1["bias"], a2["weight"], a2["bias"], [out, add, conv2, inner,
                                                                         conv1]
    return None


def _op_label(node):
    t = node.target
    return f"{getattr(t, '__module__', '') or ''}.{getattr(t, '__name__', t)}".lstrip(".")


def rewrite_blocks(gm: fx.GraphModule) -> list[list[tuple[str, str]]]:
    """Replaces each match in ``gm`` (in place); returns the replaced nodes per match, as
    (name, op) in graph order."""
    op = torch.ops.dnngraph.residual_block.default
    done = []
    for node in list(gm.graph.nodes):
        # A match erases only nodes before ``node``, which the loop has passed.
        m = _match(gm, node)
        if m is None:
            continue
        x, w1, b1, w2, b2, nodes = m
        done.append([(n.name, _op_label(n)) for n in nodes[::-1]])
        with gm.graph.inserting_before(node):
            new = gm.graph.call_function(op, (x, w1, b1, w2, b2))
        new.meta.update({k: v for k, v in node.meta.items() if k != "source_fn_stack"})
        node.replace_all_uses_with(new)
        for n in nodes:
            gm.graph.erase_node(n)
    if done:
        gm.graph.lint()
        gm.recompile()
    return done
