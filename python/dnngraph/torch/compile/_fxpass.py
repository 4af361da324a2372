"""The backend's pass over one ATen FX graph: candidates, the engine's partitions, the rewrite.

1. ``canonicalize`` (``_canonical.py``): reductions without keepdim, inference batch norms and
   decomposed RMSNorms are rewritten into forms the mapping takes.
2. Candidates: torch's ``CapabilityBasedPartitioner`` groups connected mapped nodes into
   convex sets (no path leaves a set and comes back).
3. Each candidate becomes one dnngraph graph; ``dnngraph.partition`` splits it into what the
   engine of the tensors' device takes (cuDNN's ``check_support``; the CPU engine takes all).
4. Each claimed partition (at least two ATen ops, one of them a GEMM, convolution, norm or
   attention) becomes one ``run_graph`` call.
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
import operator
import time

import torch
import torch.fx as fx
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase
from torch.fx.passes.tools_common import legalize_graph

import dnngraph as dg

from . import _ops
from ._canonical import canonicalize
from ._lower import RESHAPES, Ctx, Unmappable, apply_request, device_of, meta
from ._pieces import piece_label
from ._report import Decision, Report
from ._runtime import dg_dtype, handle_for, partition_all, partition_graph, run_graph_op
from ._runtime import standin_register
from ._runtime import uses_standin
from ._measure import NARROWED, SLOWER, Narrower, measure_partition
from ._verify import check_partition

aten = torch.ops.aten
log = logging.getLogger("dnngraph")

def _op_name(node) -> str:
    t = node.target
    if t is operator.getitem:
        return "getitem"
    return str(getattr(t, "__name__", t)) if not hasattr(t, "_schema") else str(t)


# ---- 2. candidates ---------------------------------------------------------------------------


class _Support(OperatorSupportBase):
    def __init__(self, refused: dict):
        self.refused = refused

    def is_node_supported(self, submodules, node) -> bool:
        if node in self.refused:
            return False
        if node.meta.get("dnngraph_keep_in_aten"):
            self.refused[node] = "per-channel batch-norm constants: computed in ATen"
            return False
        if node.target is operator.getitem:
            return True
        reason = _ops.why_not(node)
        if reason is not None:
            self.refused[node] = reason
            return False
        return True


# Unconnected nodes should not share a candidate: torch merges them ("horizontal fusion"),
# newer torch unless told not to; older torch (e.g. 2.11) has no such keyword, and there each
# candidate is split into its connected parts (_connected_parts), so that each part is lowered,
# built and refused on its own, as on newer torch.
_NO_HORIZONTAL = (
    {"skip_horizontal_fusion": True}
    if "skip_horizontal_fusion" in inspect.signature(CapabilityBasedPartitioner.__init__).parameters
    else {}
)


def _connected_parts(nodes):
    """`nodes` (in graph order) as its weakly connected parts, each in graph order, ordered by
    first node. A part of a convex node set is convex: a path from one part to another through
    outside nodes would leave the set and come back."""
    inside = set(nodes)
    root = {n: n for n in nodes}

    def find(n):
        while root[n] is not n:
            root[n] = root[root[n]]
            n = root[n]
        return n

    for n in nodes:
        for m in n.all_input_nodes:
            if m in inside:
                root[find(m)] = find(n)
    parts = {}
    for n in nodes:
        parts.setdefault(find(n), []).append(n)
    return list(parts.values())


def _candidates(gm, refused):
    part = CapabilityBasedPartitioner(
        gm, _Support(refused), allows_single_node_partition=True, **_NO_HORIZONTAL
    )
    out = []
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    for p in part.propose_partitions():
        nodes = sorted(p.nodes, key=order.__getitem__)
        for piece in _connected_parts(nodes) if not _NO_HORIZONTAL else [nodes]:
            if any(n.target is not operator.getitem for n in piece):
                out.append(piece)
    return out


# ---- 3. one dnngraph graph per node set ------------------------------------------------------


def _compute_nodes(nodes):
    """The nodes that compute (getitem and views aside)."""
    return [n for n in nodes if n.target is not operator.getitem and n.target not in RESHAPES]


class _Built:
    def __init__(self, g, ctx, op_owner, inputs, outputs):
        self.g, self.ctx = g, ctx
        self.op_owner = op_owner  # dnngraph op name -> FX node
        self.inputs = inputs  # [(FX node, layout request)]
        self.outputs = outputs  # [(FX node | None, dims in the graph)]


def _values(nodes):
    for n in nodes:
        v = meta(n)
        for x in (v if isinstance(v, (tuple, list)) else [v]):
            if isinstance(x, torch.Tensor) and dg_dtype(x.dtype) is not None:
                yield x


def _io_type(nodes):
    return next((dg_dtype(x.dtype) for x in _values(nodes)), dg.data_type.FLOAT)


def _compute_type(nodes):
    """fp64 where any value of the nodes (or an input they read) is fp64: ATen computes those
    ops in fp64, and an fp32 intermediate would round them. fp32 otherwise (ATen's opmath type
    of fp32, bf16 and fp16)."""
    reads = [a for n in nodes for a in n.all_input_nodes]
    if any(x.dtype == torch.float64 for x in _values(list(nodes) + reads)):
        return dg.data_type.DOUBLE
    return dg.data_type.FLOAT


def build_graph(nodes, handle, name="fx", owners=True) -> _Built:
    """One dnngraph graph computing ``nodes``; raises Unmappable naming the node that failed."""
    # io type: the first value's (what an output no value reads, such as an unused gradient of
    # a norm backward, is written in); every input and read output has its own type set.
    compute = _compute_type(nodes)
    g = dg.pygraph(name=name, handle=handle, io_data_type=_io_type(nodes),
                   intermediate_data_type=compute, compute_data_type=compute)
    ctx = Ctx(g, set(nodes), torch.float64 if compute == dg.data_type.DOUBLE else torch.float32)
    op_owner = {}
    for n in nodes:
        try:
            _ops.lower(ctx, n)
        except Unmappable as e:
            if not getattr(e, "nodes", None):
                e.nodes = [n]
            raise
        except Exception as e:  # any other failure keeps this op (only) in ATen
            err = Unmappable(f"dnngraph refused the mapping: {type(e).__name__}: {e}")
            err.nodes = [n]
            raise err from e
        if owners:
            for name in g.op_names():
                op_owner.setdefault(name, n)
    node_set = set(nodes)
    outputs = []  # (FX node | None, dims in the graph, run_graph output index)
    out_index = {}  # id(dnngraph tensor) -> output index
    for n in nodes:
        if n not in ctx.values or not any(u not in node_set for u in n.users):
            continue
        if meta(n).dtype == torch.bool:
            # dnngraph's BOOLEAN is bit-packed, torch's bool one byte: a mask stays inside.
            err = Unmappable(f"'{n.name}' is a boolean mask read outside the graph")
            err.nodes = [n]
            raise err
        t = ctx.values[n]
        k = out_index.get(id(t))
        if k is None:
            k = out_index[id(t)] = len(out_index)
            _mark_output(t, meta(n), ctx.dims[n])
        outputs.append((n, ctx.dims[n], k))
    for t in ctx.extra_outputs:
        out_index[id(t)] = len(out_index)
        t.set_output(True)
    inputs = list(ctx.inputs.keys())
    # uids: inputs 1..n in order, then the outputs in order (run_graph's binding order).
    uid = 1
    for key in inputs:
        ctx.inputs[key].set_uid(uid)
        uid += 1
    tensors = {id(t): t for t in list(ctx.values.values()) + ctx.extra_outputs}
    for tid, _k in sorted(out_index.items(), key=lambda kv: kv[1]):
        tensors[tid].set_uid(uid)
        uid += 1
    try:
        g.validate()
    except (ValueError, TypeError, RuntimeError, dg.NotSupportedError) as e:
        err = Unmappable(f"dnngraph refused the graph: {e}")
        err.nodes = _compute_nodes(nodes)
        raise err from e
    return _Built(g, ctx, op_owner, inputs, outputs)


def _mark_output(t, v: torch.Tensor, dims):
    t.set_output(True).set_data_type(dg_dtype(v.dtype))
    t.set_dim(list(dims)).set_stride(_strides_for(v, dims))


def _strides_for(v: torch.Tensor, dims):
    """Strides for a graph output of dims ``dims`` (``v``'s with size-1 dims inserted) that
    match ``v``'s memory, so a view gives ``v``'s shape back."""
    m = torch.empty_strided(tuple(v.shape), tuple(v.stride()), dtype=v.dtype, device="meta")
    if list(v.shape) != list(dims):
        try:
            m = m.view(list(dims))
        except RuntimeError:  # not viewable: packed (a view gives the value's dims back)
            m = torch.empty(list(dims), device="meta")
    return [1 if (s == 0 and n == 1) else s for n, s in zip(m.shape, m.stride())]


# ---- 4. rewrite ------------------------------------------------------------------------------


def _replace(gm, nodes, built: _Built, graph_json: str, replaced: dict):
    """Puts one run_graph call in place of ``nodes``. ``replaced``: FX node -> the node that
    holds its value now (partitions rewritten before this one), updated here."""
    g = gm.graph
    op = run_graph_op()
    anchor = nodes[-1]
    with g.inserting_before(anchor):
        ins = []
        for fxn, request in built.inputs:
            ins.append(apply_request(
                fxn, request,
                lambda n, d: g.call_function(aten.view.default, (n, d)),
                lambda n, d: g.call_function(aten.slice.Tensor, (n, d, 0, 1)),
                lambda n, size, stride: g.call_function(aten.as_strided.default, (n, size, stride)),
                source=replaced.get(fxn),
            ))
        call = g.call_function(op, (graph_json, ins))
        items = {}
        for fxn, dims, k in built.outputs:
            if k not in items:
                items[k] = g.call_function(operator.getitem, (call, k))
            item = items[k]
            shape = list(meta(fxn).shape)
            if list(dims) != shape:
                item = g.call_function(aten.view.default, (item, shape))
            fxn.replace_all_uses_with(item)
            replaced[fxn] = item
        for fxn, v in built.ctx.placeholders.items():
            if fxn.users:
                replaced[fxn] = _placeholder(g, v)
                fxn.replace_all_uses_with(replaced[fxn])
    for n in reversed(nodes):
        if not n.users:  # views of inputs read outside stay
            g.erase_node(n)


def _placeholder(g, v):
    """An int, or an empty tensor like ``v`` (an attention kernel's state the backward reads
    only with dropout)."""
    if not isinstance(v, torch.Tensor):
        return v
    return g.call_function(
        aten.empty_strided.default, (list(v.shape), list(v.stride())),
        {"dtype": v.dtype, "device": v.device},
    )


def _convex(nodes, order, kept=()) -> bool:
    """No path leaves ``nodes`` and comes back (``kept``: members that stay in the graph,
    views of inputs, count as outside)."""
    s = set(nodes) - set(kept)
    nodes = [n for n in nodes if n in s]
    hi = max(order[n] for n in nodes)
    stack = [u for n in nodes for u in n.users if u not in s]
    seen = set()
    while stack:
        n = stack.pop()
        if n in seen or order.get(n, hi + 1) > hi:
            continue
        seen.add(n)
        for u in n.users:
            if u in s:
                return False
            stack.append(u)
    return True


def run_pass(gm: fx.GraphModule, graph_name="graph", rewrite=True, min_ops=2,
             pointwise=False, verify=False, measure=None, inner_fuses=True) -> Report:
    """Finds the partitions of ``gm`` and (``rewrite``) replaces each claimed one with a
    ``run_graph`` call. Returns the decision for every ATen op.

    A partition is claimed when it replaces at least ``min_ops`` ATen ops and (unless
    ``pointwise``) holds an anchor op: a GEMM, convolution, norm or attention. Pointwise and
    reduction ops alone are left to the inner compiler, which fuses them itself.

    ``verify``: each claimed partition is first run both ways on random inputs
    (``_verify.check_partition``); one whose result differs from ATen's stays in ATen.
    ``measure``: each claimed partition on a GPU is timed both ways (``_measure``); one not
    faster than ATen's ops stays out (None: on for GPU partitions, off for CPU ones);
    ``inner_fuses``: the inner compiler fuses pointwise ops, so "faster" is against its
    estimated cost where that is lower (``_measure``)."""
    t0 = time.perf_counter()
    canonicalize(gm)
    refused: dict[fx.Node, str] = {}
    claimed: list[tuple[list, _Built]] = []
    engine_refused: dict[fx.Node, str] = {}
    try:
        claimed, engine_refused = _plan_until_stable(gm, refused, min_ops, pointwise)
    except Exception as e:  # never fail the compile: the graph runs unchanged
        log.warning("dnngraph backend: %s left unchanged: %s: %s", graph_name,
                    type(e).__name__, e)
        claimed, engine_refused = [], {}
        for n in gm.graph.nodes:
            refused.setdefault(n, f"backend error: {type(e).__name__}: {e}")
    # The graphs' JSON (what run_graph reads), written only when a partition will run.
    # measure first: verify then checks the partition measure chose (a head it narrowed to).
    checks = []
    if measure or (measure is None and any(device_of(nodes).type == "cuda" for nodes, _ in claimed)):
        checks.append(functools.partial(_measured, inner_fuses=inner_fuses, min_ops=min_ops,
                                        pointwise=pointwise))
    if verify:
        checks.append(check_partition)
    jsons = [_compact(built.g.to_json()) for _nodes, built in claimed] if rewrite or checks else []
    if uses_standin():
        for (_nodes, built), graph_json in zip(claimed, jsons):
            standin_register(graph_json, built.g)
    t1 = time.perf_counter()
    if checks:
        claimed, jsons = _screened(graph_name, claimed, jsons, engine_refused, checks)
    report = _report(gm, graph_name, claimed, refused, engine_refused)
    report.seconds = {"plan": t1 - t0, "checks": time.perf_counter() - t1}
    if rewrite and claimed:
        replaced = {}
        for (nodes, built), graph_json in zip(claimed, jsons):
            _replace(gm, nodes, built, graph_json, replaced)
        legalize_graph(gm)
        gm.graph.lint()
        gm.recompile()
    return report


def _compact(graph_json: str) -> str:
    """The graph's JSON on one line: it is a constant of the compiled code, and Inductor copies
    node arguments into comments of the code it writes (a newline there breaks the code)."""
    return json.dumps(json.loads(graph_json), separators=(",", ":"))


def _screened(graph_name, claimed, jsons, engine_refused, checks):
    """The claimed partitions every check keeps (a check returns why it refuses, or None); the
    others' ops are refused with the first reason."""
    kept, kept_jsons = [], []
    for (nodes, built), graph_json in zip(claimed, jsons):
        why = None
        for check in checks:
            why = check(nodes, built, graph_json)
            if isinstance(why, Narrower):  # its head alone from here on
                head = set(why.nodes)
                left = [n for n in nodes if n not in head]
                log.info("dnngraph backend: %s: partition [%s]: %s", graph_name,
                         ", ".join(n.name for n in _compute_nodes(left)), why.reason)
                for n in left:
                    engine_refused[n] = why.reason
                nodes, built, graph_json = why.nodes, why.built, why.graph_json
                if uses_standin():
                    standin_register(graph_json, built.g)
                why = None
            elif why:
                break
        if why is None:
            kept.append((nodes, built))
            kept_jsons.append(graph_json)
            continue
        ops = ", ".join(n.name for n in _compute_nodes(nodes))
        # A slower fused graph is a choice; a wrong or failing one is an engine fault.
        level = logging.INFO if why.startswith((SLOWER, NARROWED)) else logging.WARNING
        log.log(level, "dnngraph backend: %s: partition [%s]: %s", graph_name, ops, why)
        for n in nodes:
            engine_refused[n] = why
    return kept, kept_jsons


def _measured(nodes, built, graph_json, inner_fuses, min_ops, pointwise):
    """measure's check, offered the partition's head (``_head``) as a narrower choice."""
    return measure_partition(nodes, built, graph_json, inner_fuses=inner_fuses,
                             head=functools.partial(_head, nodes, min_ops, pointwise))


def _head(nodes, min_ops=2, pointwise=False):
    """The partition without its first pointwise op that reads a tensor of its own size from
    outside (a gate behind a convolution's bias; a residual add there is moved in front of the
    bias by ``canonicalize``, leaving no head) and what follows from that op:
    (FX nodes, built graph, JSON), or None where there is no such op, what remains is no gain
    or does not map."""
    members = set(nodes)

    def outside(a):  # a value read from outside the partition (through views of it too)
        while a in members and a.target in RESHAPES:
            a = a.args[0]
        return a not in members

    def full_size_outside(n):
        v = meta(n)
        return isinstance(v, torch.Tensor) and any(
            outside(a) and isinstance(meta(a), torch.Tensor) and meta(a).numel() == v.numel()
            for a in n.all_input_nodes)

    cut = next((n for n in _compute_nodes(nodes)
                if n.target not in _ops.ANCHORS and full_size_outside(n)), None)
    if cut is None:
        return None
    drop = set()
    for n in nodes:  # graph order: the cut op and everything in the partition after it
        if n is cut or any(a in drop for a in n.all_input_nodes):
            drop.add(n)
    kept = {n for n in nodes if n not in drop}
    for n in reversed(nodes):  # views of inputs that only dropped ops read (chains of views)
        if n in kept and n.target in RESHAPES and outside(n) and not (set(n.users) & kept):
            kept.discard(n)
    head = [n for n in nodes if n in kept]
    if not head or _no_gain(head, min_ops, pointwise):
        return None
    try:
        built = build_graph(head, handle_for(device_of(head)), owners=False)
    except Unmappable:
        return None
    return head, built, _compact(built.g.to_json())


def _plan_until_stable(gm, refused, min_ops, pointwise):
    """The nodes that fail to lower are refused (each with its own reason) and the candidates
    are made again."""
    for _ in range(256):
        try:
            return _plan(gm, refused, min_ops, pointwise)
        except Unmappable as e:
            bad = {}
            for part in getattr(e, "parts", None) or [e]:
                for n in getattr(part, "nodes", None) or []:
                    if n.target is operator.getitem:  # refuse the op, not its getitem
                        n = n.args[0]
                    if n not in refused:
                        bad.setdefault(n, str(part))
            if not bad:
                raise
            refused.update(bad)
    raise RuntimeError("candidates did not settle")


def _no_gain(members, min_ops, pointwise):
    compute = _compute_nodes(members)
    # A fused pattern stands for the ATen ops it replaced.
    count = sum(_ops.PATTERN_SIZE.get(n.target, 1) for n in compute)
    if count < min_ops:
        return "single op: ATen runs it as one kernel already"
    if not pointwise and not any(n.target in _ops.ANCHORS for n in compute):
        return "pointwise/reduction ops only: left to the inner compiler, which fuses them"
    return None


def _plan(gm, refused, min_ops, pointwise):
    """(claimed [(nodes, built graph)], {node: engine's reason}) for the graph as it is."""
    claimed, engine_refused = [], {}
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    cands, jobs, failed = [], [], []
    for nodes in _candidates(gm, refused):
        why = _no_gain(nodes, min_ops, pointwise)
        compute = _compute_nodes(nodes)
        if why and any(n.target in _ops.ANCHORS for n in compute):
            # An anchor op with too little around it for any part to be claimed (a lone GEMM):
            # its plan would be built for nothing.
            for n in compute:
                engine_refused[n] = why
            continue
        device = device_of(nodes)
        try:
            cand = build_graph(nodes, handle_for(device))
        except Unmappable as e:  # every candidate's first failure, then one round again
            failed.append(e)
            continue
        # Only partitions the gain rule can claim are built (a GEMM, convolution, norm or
        # attention among them): cuDNN compiles pointwise-only graphs at run time, for nothing.
        anchors = None if pointwise else [
            name for name, owner in cand.op_owner.items() if owner.target in _ops.ANCHORS]
        cands.append((nodes, cand, device))
        jobs.append((cand.g, device, anchors))
    if failed:
        err = Unmappable("; ".join(str(e) for e in failed))
        err.parts = failed  # refused together: a refusal changes only its own candidate
        raise err
    for (nodes, cand, device), parts in zip(cands, partition_all(jobs, partition_graph)):
        handle = handle_for(device)
        ops_of = {}  # FX node -> the names of its dnngraph ops
        for name, owner in cand.op_owner.items():
            ops_of.setdefault(owner, []).append(name)
        for p in parts:
            # Ops are matched by name: validate() may order them otherwise than they were made.
            p_ops = list(p.ops)  # one conversion of the engine's list
            owners = list(dict.fromkeys(cand.op_owner[name] for name in p_ops))
            if not p.supported:
                for n in owners:
                    engine_refused[n] = f"engine refused: {p.reason}"
                continue
            owners_set = set(owners)
            in_p = set(p_ops)
            split = [n for n in owners if any(name not in in_p for name in ops_of[n])]
            if split:  # the engine cut an ATen op's ops apart: that op stays in ATen
                err = Unmappable(f"the engine splits the ops of '{split[0].name}' across "
                                 "partitions")
                err.nodes = split
                raise err
            members = _members(owners_set, nodes, cand.ctx, order)
            why = _no_gain(members, min_ops, pointwise)
            if why is None and not p.built:
                why = f"engine refused: {p.reason}"
            if why:
                for n in members:
                    engine_refused[n] = why
                continue
            if not _convex(members, order, kept=cand.ctx.aliases):
                for n in members:
                    engine_refused[n] = "partition is not convex in the FX graph"
                continue
            claimed.append((members, build_graph(members, handle, owners=False)))
    return claimed, engine_refused


def _members(owners, cand_nodes, ctx, order):
    """The FX nodes a partition replaces: the owners of its ops, their getitems, the views
    of its values and the views of inputs it reads."""
    members = set(owners)
    members |= {u for n in owners for u in n.users
                if u.target is operator.getitem and (u in ctx.values or u in ctx.placeholders)}
    views = [n for n in cand_nodes if n.target in RESHAPES]
    for n in views:  # views of values computed here (in order: chains of views)
        if n.args[0] in members and n in ctx.values:
            members.add(n)
    for n in reversed(views):  # views of inputs read here
        if n in ctx.aliases and any(u in members for u in n.users):
            members.add(n)
    return sorted(members, key=order.__getitem__)


def _report(gm, name, claimed, refused, engine_refused) -> Report:
    where = {}
    partitions = []
    for k, (nodes, _) in enumerate(claimed):
        partitions.append([n.name for n in _compute_nodes(nodes)])
        for n in nodes:
            where[n] = k
    decisions = []
    for n in gm.graph.nodes:
        if n.op != "call_function" or n.target is operator.getitem:
            continue
        if n in where:
            decisions.append(Decision(n.name, _op_name(n), where[n], "", piece_label(n) or ""))
        elif n.target in _ops.VIEWS or n.target in RESHAPES:
            decisions.append(Decision(n.name, _op_name(n), None, "view: stays in ATen",
                                      piece_label(n) or ""))
        else:
            reason = refused.get(n) or engine_refused.get(n) or _ops.why_not(n) or "not claimed"
            decisions.append(Decision(n.name, _op_name(n), None, reason, piece_label(n) or ""))
    return Report(name, decisions, partitions)
