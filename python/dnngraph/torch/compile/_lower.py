"""ATen FX nodes as dnngraph ops: the table of mapped ops and the context that builds a graph.

A mapped op has exactly the semantics of its ATen op. ``LOWERINGS[target](ctx, node)`` adds the
node's ops to ``ctx.g`` and records the dnngraph tensor of each value it defines (the node, or
its ``getitem`` users for ops that return tuples). ``CHECKS[target](node)`` tells, before any
graph is built, why a node cannot be mapped (``None`` when it can).
"""

from __future__ import annotations

import operator

import torch
import torch.fx as fx

from ._runtime import dg_dtype

aten = torch.ops.aten
RESHAPES = {aten.view.default, aten._unsafe_view.default}


class Unmappable(Exception):
    """A node that cannot join a dnngraph graph; the message is the reason."""


def meta(node):
    v = node.meta.get("val") if isinstance(node, fx.Node) else None
    return v


def device_of(nodes) -> torch.device:
    """The device of the first of ``nodes`` whose value is a tensor (the CPU when none is)."""
    for n in nodes:
        v = meta(n)
        if isinstance(v, torch.Tensor):
            return v.device
    return torch.device("cpu")


def concrete(shape) -> bool:
    return all(isinstance(s, int) for s in shape)


class Ctx:
    """Builds one dnngraph graph from a set of FX nodes.

    ``values``: FX node -> dnngraph tensor for values defined inside. ``inputs``: the external
    values read, each as (FX node, layout request) -> tensor; the backend feeds them in that
    order after giving each value its dims with views (``layout_request``)."""

    def __init__(self, g, nodes, compute=torch.float32):
        self.g = g
        self.nodes = nodes
        self.compute = compute  # the type values inside the graph are kept in
        self.values: dict[fx.Node, object] = {}
        self.dims: dict[fx.Node, list] = {}  # dims in the graph of each value defined inside
        self.inputs: dict[tuple, object] = {}
        self.extra_outputs: list[object] = []  # outputs no FX value reads (dropped)
        self.aliases: dict[fx.Node, fx.Node] = {}  # views of graph inputs -> the input
        self.placeholders: dict[fx.Node, object] = {}  # getitems made up (define_items)

    # -- operands --
    def tensor(self, arg, rank=None, dims=None, cut=False):
        """The dnngraph tensor of FX value ``arg``: its own if defined inside, else a graph
        input. ``rank`` pads the dims in front (torch's broadcasting); ``dims`` gives them
        (size-1 dims inserted into the value's)."""
        if not isinstance(arg, fx.Node):
            raise Unmappable(f"operand {arg!r} is not a tensor")
        v = meta(arg)
        if not isinstance(v, torch.Tensor):
            raise Unmappable(f"operand '{arg.name}' is not a tensor")
        if arg in self.values:
            have = self.dims[arg]
            want = list(dims) if dims is not None else _padded(list(v.shape), rank)
            if want != have:
                err = Unmappable(
                    f"'{arg.name}' (dims {have} in the graph) is read with dims {want} "
                    "(needs a reshape)"
                )
                # A view inside the graph is what cannot be followed: it stays in ATen.
                err.nodes = [arg] if arg.target in RESHAPES else None
                raise err
            return self.values[arg]
        if arg in self.aliases:
            # A view of a graph input: read the input with the dims asked of the view.
            src = self.aliases[arg]
            want = list(dims) if dims is not None else _padded(list(v.shape), rank)
            return self.tensor(src, dims=want, cut=cut)
        if dg_dtype(v.dtype) is None:
            raise Unmappable(f"input '{arg.name}' has dtype {v.dtype} (floating types only)")
        if not concrete(v.shape):
            raise Unmappable(f"input '{arg.name}' has symbolic dims {list(v.shape)}")
        request = layout_request(v, rank=rank, dims=dims, cut=cut)
        key = (arg, request)
        t = self.inputs.get(key)
        if t is None:
            shape, stride = adapted_layout(v, request)
            # Named by position, not after the FX node: the same subgraph in every layer of a
            # model then has the same JSON, and run_graph builds it once.
            t = self.g.tensor(
                name=f"in{len(self.inputs)}", dim=list(shape), stride=list(stride),
                data_type=dg_dtype(v.dtype),
            )
            self.inputs[key] = t
        return t

    def pointwise(self, node, args):
        """The operands of pointwise node ``node`` (numbers become constants) and the dims
        of its result in the graph. Operands broadcast as in torch. When an operand is an
        intermediate read through ``view`` (dims in the graph other than its value's), the op
        runs in that operand's dims and the other operands are viewed to match."""
        F = list(meta(node).shape)
        if not F:
            raise Unmappable("0-dim result (a scalar tensor)")
        D = F
        for a in args:
            if isinstance(a, fx.Node) and a in self.values and self.dims[a] != list(meta(a).shape):
                if list(meta(a).shape) != F:
                    raise Unmappable(f"'{a.name}' is reshaped inside the graph and broadcast")
                D = self.dims[a]
                break
        out = []
        for a in args:
            if isinstance(a, bool):
                raise Unmappable("boolean scalar operand")
            if isinstance(a, (int, float)):
                out.append(float(a))
                continue
            c = scalar_constant(a)
            if c is not None:
                out.append(c)
                continue
            if not isinstance(a, fx.Node) or not isinstance(meta(a), torch.Tensor):
                raise Unmappable(f"operand {a!r} is not a tensor or a number")
            o = _padded(list(meta(a).shape), len(F))
            od = o if D == F else map_shape(o, F, D)
            if od is None:
                err = Unmappable(f"'{a.name}' (dims {o}) does not broadcast in dims {D}")
                err.nodes = [a] if a.target in RESHAPES else None
                raise err
            out.append(self.tensor(a, dims=od, cut=True))
        return out, D

    def dims_of(self, arg):
        """Dims of FX value ``arg`` in the graph (its own unless reshaped inside)."""
        return self.dims[arg] if arg in self.values else list(meta(arg).shape)

    def operand(self, arg, rank):
        """A pointwise operand: a Python number becomes a constant, a tensor is padded."""
        if isinstance(arg, bool):
            raise Unmappable("boolean scalar operand")
        if isinstance(arg, (int, float)):
            return float(arg)
        return self.tensor(arg, rank=rank, cut=True)

    def define(self, node, t, dims=None):
        """Records ``t`` as FX value ``node`` (its dims in the graph: ``dims``, else the
        value's). Its data type is set when it becomes a graph output; inside, it keeps the
        graph's intermediate type (fp32)."""
        v = meta(node)
        if dg_dtype(v.dtype) is None and v.dtype != torch.bool:  # masks: inside only
            raise Unmappable(f"'{node.name}' has dtype {v.dtype} (floating types only)")
        self.values[node] = t
        self.dims[node] = list(dims) if dims is not None else list(v.shape)
        # Set, not inferred: a pointwise op whose operands all broadcast a dim (cut to 1)
        # still writes the value's full extent.
        t.set_dim(self.dims[node])
        return t

    def define_items(self, node, outs, dims=None, placeholders=()):
        """Records the outputs of a tuple-returning op on its getitem users; outputs nobody
        reads are kept as extra outputs (engines want the statistics of a training norm
        written). Outputs in ``placeholders`` (random-number state, sequence offsets of
        attention kernels, unused with dropout 0) become empty tensors or their int values."""
        seen = set()
        for user in node.users:
            if user.op == "call_function" and user.target is operator.getitem:
                i = user.args[1]
                if i in placeholders:
                    self.placeholders[user] = meta(user)
                    continue
                if outs[i] is None:
                    raise Unmappable(f"'{node.name}' output {i} is not computed")
                self.define(user, outs[i], dims[i] if dims else None)
                seen.add(i)
            else:
                raise Unmappable(f"'{node.name}' is read whole, not through getitem")
        for i, t in enumerate(outs):
            if t is not None and i not in seen:
                self.extra_outputs.append(t)


def scalar_constant(arg):
    """The value of ``aten.scalar_tensor(number)`` (a 0-dim tensor ATen makes for a number,
    as in ``torch.where(mask, x, 0.0)``) in its dtype, read as a constant; None for any other
    operand."""
    if not isinstance(arg, fx.Node) or arg.target is not aten.scalar_tensor.default:
        return None
    v, x = meta(arg), arg.args[0]
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not v.is_floating_point():
        return None
    return float(torch.tensor(x, dtype=v.dtype))


def _padded(shape, rank):
    if rank is None or rank <= len(shape):
        return list(shape)
    return [1] * (rank - len(shape)) + list(shape)


def _groups(F, D):
    """Row-major correspondence of two shapes with as many elements: [(dims of F, dims of
    D)], each pair spanning the same elements."""
    groups, i, j = [], 0, 0
    while i < len(F) and j < len(D):
        fi, dj, pf, pd = [i], [j], F[i], D[j]
        i, j = i + 1, j + 1
        while pf != pd:
            if pf < pd and i < len(F):
                fi.append(i)
                pf *= F[i]
                i += 1
            elif pd < pf and j < len(D):
                dj.append(j)
                pd *= D[j]
                j += 1
            else:
                return None
        groups.append((fi, dj))
    if not groups:
        return None
    groups[-1][0].extend(range(i, len(F)))  # trailing 1s
    groups[-1][1].extend(range(j, len(D)))
    return groups


def map_shape(o, F, D):
    """Dims in D (a reshape of F) of an operand of dims ``o`` broadcast to F, or None when a
    group of dims is neither whole nor all 1 in ``o``."""
    groups = _groups(F, D)
    if groups is None:
        return None
    out = [1] * len(D)
    for fi, dj in groups:
        if all(o[k] == F[k] for k in fi):
            for k in dj:
                out[k] = D[k]
        elif not all(o[k] == 1 for k in fi):
            return None
    return out


def layout_request(v: torch.Tensor, rank=None, dims=None, cut=False):
    """(view dims, dims cut to 1) that give external value ``v`` its dims inside a graph:
    ``dims`` (the value's with size-1 dims inserted) or its dims padded in front to ``rank``;
    with ``cut``, dims that torch broadcast with stride 0 become extent 1 (a pointwise operand
    broadcasts them again), since engines take strides >= 1."""
    view_dims = list(dims) if dims is not None else _padded(list(v.shape), rank)
    if view_dims != list(v.shape):
        numel = 1
        for d in view_dims:
            numel *= d
        if numel != v.numel():
            raise Unmappable(f"dims {list(v.shape)} cannot be read as {view_dims}")
    m = torch.empty_strided(tuple(v.shape), tuple(v.stride()), dtype=v.dtype, device="meta")
    try:
        m = m.view(view_dims)
    except RuntimeError as e:
        raise Unmappable(f"dims {list(v.shape)} cannot be viewed as {view_dims}: {e}") from e
    cuts = []
    if cut:
        cuts = [d for d, (n, s) in enumerate(zip(m.shape, m.stride())) if s == 0 and n > 1]
    return tuple(view_dims), tuple(cuts)


def _meta_apply(v: torch.Tensor, request):
    """(shape, strides after the views, strides given to the graph) of ``v`` under
    ``request``: a dim of extent 1 and stride 0 (left by a broadcast) gets stride 1, since
    engines take strides >= 1."""
    view_dims, cuts = request
    m = torch.empty_strided(tuple(v.shape), tuple(v.stride()), dtype=v.dtype, device="meta")
    if list(m.shape) != list(view_dims):
        m = m.view(list(view_dims))
    for d in cuts:
        m = m.narrow(d, 0, 1)
    raw = list(m.stride())
    fixed = [1 if (s == 0 and n == 1) else s for n, s in zip(m.shape, raw)]
    return list(m.shape), raw, fixed


def adapted_layout(v: torch.Tensor, request):
    """Shape and strides in the graph of external value ``v`` read under ``request``."""
    shape, _, fixed = _meta_apply(v, request)
    return tuple(shape), tuple(fixed)


def apply_request(node, request, view, narrow, restride, source=None):
    """Builds (with ``view``, ``narrow``, ``restride``) the views of FX value ``node`` that
    give it its layout in the graph, on ``source`` (the node that now holds ``node``'s value,
    when a partition rewritten before replaced it)."""
    v = meta(node)
    shape, raw, fixed = _meta_apply(v, request)
    view_dims, cuts = request
    x = node if source is None else source
    if list(v.shape) != list(view_dims):
        x = view(x, list(view_dims))
    for d in cuts:
        x = narrow(x, d)
    if fixed != raw:
        x = restride(x, shape, fixed)
    return x


def check_floating(node, outputs=None, inputs=None):
    """Why ``node`` is outside what the backend maps (non-floating or symbolic tensors), or
    None. ``outputs``: how many of a tuple's outputs to check; ``inputs``: which arguments."""
    v = meta(node)
    vals = list(v) if isinstance(v, (tuple, list)) else [v]
    for x in vals[:outputs]:
        if x is None:
            continue
        if not isinstance(x, torch.Tensor):
            return f"output is {type(x).__name__}, not a tensor"
        if dg_dtype(x.dtype) is None:
            return f"dtype {x.dtype} (dnngraph maps float32/float16/bfloat16/float64)"
        if not concrete(x.shape):
            return f"symbolic shape {list(x.shape)}"
    args = node.all_input_nodes if inputs is None else [
        node.args[i] for i in inputs if isinstance(node.args[i], fx.Node)]
    for a in args:
        x = meta(a)
        if isinstance(x, torch.Tensor):
            if dg_dtype(x.dtype) is None:
                return f"input '{a.name}' has dtype {x.dtype}"
            if not concrete(x.shape):
                return f"input '{a.name}' has symbolic shape"
    return None
