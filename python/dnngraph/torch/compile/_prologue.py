"""Work on parameters alone, done once per parameter change: in an inference graph, the ops
whose inputs are all parameters and buffers (the static inputs AOTAutograd names) -- the scaled
weights and per-channel constants of folded batch norms, above all -- are taken out of the graph
and run before it, and their results are kept and passed in as inputs until one of the tensors
they read changes.

A change is seen through the tensor's identity, its storage address and its version counter,
which every in-place op bumps (``copy_``, optimizer steps, ``load_state_dict``). Writes through
``.data`` do not bump it: the backend's option ``"cache_parameter_work": False`` turns this off
for code that updates weights that way (docs/torch.md). Results the graph returns are never
kept (the caller could write to them), nor is anything with a symbolic shape or a random or
mutating op.
"""

from __future__ import annotations

import threading

import torch
from torch import fx

from ._lower import meta

def _static_shape(v) -> bool:
    return isinstance(v, torch.Tensor) and all(isinstance(s, int) for s in v.shape)


def _hoistable(node) -> bool:
    """A pure, deterministic ATen op with a tensor result of static shape."""
    t = node.target
    if node.op != "call_function" or not isinstance(t, torch._ops.OpOverload):
        return False
    if t._schema.is_mutable or torch.Tag.nondeterministic_seeded in t.tags:
        return False
    return _static_shape(meta(node))


def _aliases(node) -> bool:
    """Whether the op's result may be a view of an input."""
    return any(r.alias_info is not None for r in node.target._schema.returns)


def _split(gm: fx.GraphModule, static: set[int]):
    """(prologue nodes in graph order, the static placeholders they read, the prologue nodes
    the rest of the graph reads), or None when nothing worth keeping is found."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    on_params = {p for i, p in enumerate(placeholders) if i in static and _static_shape(meta(p))}
    out = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    pro = []
    for n in gm.graph.nodes:
        if n.op != "call_function" or not _hoistable(n):
            continue
        ins = n.all_input_nodes
        if ins and all(i in on_params for i in ins):
            on_params.add(n)
            pro.append(n)
    # A result the graph returns stays in it, with what only it reads and what it is a view
    # of: the caller owns it and may write to it.
    returned = set(out.all_input_nodes)
    keep_in = {n for n in pro if n in returned}
    changed = True
    while changed:
        changed = False
        for n in reversed(pro):
            if n in keep_in:
                continue
            if (n.users and all(u in keep_in for u in n.users)) or any(
                    u in keep_in and _aliases(u) for u in n.users):
                keep_in.add(n)
                changed = True
    pro = [n for n in pro if n not in keep_in]
    # Views alone are not worth keeping (they cost nothing); a kept result needs one computing op.
    if all(_aliases(n) for n in pro):
        return None
    pro_set = set(pro)
    frontier = [n for n in pro if any(u not in pro_set for u in n.users)]
    reads = [p for p in placeholders if any(u in pro_set for u in p.users)]
    return pro, reads, frontier


class _Kept:
    """The prologue's results and the tensors (with their storage and version) they came from."""

    def __init__(self):
        self.lock = threading.Lock()
        self.sources: list | None = None
        self.results: list[torch.Tensor] = []


def _stamp(t: torch.Tensor):
    return (t, t.data_ptr(), t._version)


def hoist_parameter_work(gm: fx.GraphModule, example_inputs: list, static: set[int]):
    """Moves the parameter-only work out of ``gm`` (in place): returns ``(example inputs of the
    rewritten graph, wrap, names of the moved nodes)`` where ``wrap(compiled)`` gives the boxed
    callable that runs the prologue when its inputs changed and then ``compiled``; or None when
    there is nothing to move."""
    split = _split(gm, static)
    if split is None:
        return None
    pro, reads, frontier = split
    names = [n.name for n in pro]
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    read_idx = [placeholders.index(p) for p in reads]
    # The prologue as its own graph: the static placeholders it reads -> the frontier.
    pg = fx.Graph()
    env = {}
    for p in reads:
        env[p] = pg.placeholder(p.name)
        env[p].meta = dict(p.meta)
    for n in pro:
        env[n] = pg.node_copy(n, lambda a: env[a])
    pg.output(tuple(env[n] for n in frontier))
    prologue = fx.GraphModule(gm, pg)
    # The graph reads the frontier as new inputs, after its own.
    last = placeholders[-1]
    new_inputs = []
    for k, n in enumerate(frontier):
        with gm.graph.inserting_after(last):
            p = gm.graph.placeholder(f"kept_{k}")
        p.meta = dict(n.meta)
        last = p
        n.replace_all_uses_with(p)
        new_inputs.append(meta(n))
    for n in reversed(pro):
        gm.graph.erase_node(n)
    gm.graph.lint()
    gm.recompile()
    kept = _Kept()

    def refresh(args):
        sources = [args[i] for i in read_idx]
        with kept.lock:
            fresh = kept.sources is not None and all(
                s is t and s.data_ptr() == p and s._version == v
                for s, (t, p, v) in zip(sources, kept.sources))
            if not fresh:
                with torch.no_grad():
                    results = prologue(*sources)
                if kept.results:  # same addresses (CUDA graphs read kept results in place)
                    for old, new in zip(kept.results, results):
                        old.copy_(new)
                else:
                    kept.results = [r.clone(memory_format=torch.preserve_format)
                                    if r._base is not None else r for r in results]
                kept.sources = [_stamp(s) for s in sources]
            return list(kept.results)

    def wrap(compiled):
        def run(args):
            extra = refresh(args)
            full = list(args) + extra
            args.clear()
            return compiled(full)

        run._boxed_call = True
        return run

    return list(example_inputs) + new_inputs, wrap, names
