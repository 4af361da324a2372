"""``explain(model, *inputs)``: what the backend does with a model's ATen graphs."""

from __future__ import annotations

import torch

from ._backend import collect_reports, make_backend


class Explanation:
    """The backend's decisions for every ATen op of the graphs a call compiled.

    ``partitions``: one entry per fused graph, ``(graph, [node names], [ATen ops])``;
    ``left_out``: ``(graph, node, ATen op, reason)`` for every op that stayed in ATen (views
    included, with the reason ``view: stays in ATen``); ``reports``: the raw reports.
    ``str()`` is the table."""

    def __init__(self, reports):
        self.reports = reports
        self.partitions = []
        self.left_out = []
        for r in reports:
            ops = {d.node: d.op for d in r.decisions}
            for names in r.partitions:
                self.partitions.append((r.graph, names, [ops.get(n, "?") for n in names]))
            for d in r.decisions:
                if d.partition is None:
                    self.left_out.append((r.graph, d.node, d.op, d.reason))

    def _label(self, graph, k):
        index = 0
        for r in self.reports:
            if r.graph == graph:
                return f"P{index + k}"
            index += len(r.partitions)
        return f"P{k}"

    def table(self) -> str:
        rows = [("graph", "node", "ATen op", "partition", "why not fused")]
        for r in self.reports:
            for d in r.decisions:
                where = self._label(r.graph, d.partition) if d.partition is not None else "-"
                op = f"{d.op} ({d.piece})" if d.piece else d.op
                rows.append((r.graph, d.node, op, where, d.reason))
        widths = [max(len(row[i]) for row in rows) for i in range(4)]
        lines = []
        for row in rows:
            cells = [row[i].ljust(widths[i]) for i in range(4)] + [row[4]]
            lines.append("  ".join(cells).rstrip())
        summary = [f"{len(self.partitions)} fused graph(s):"]
        for i, (graph, names, ops) in enumerate(self.partitions):
            summary.append(f"  P{i} ({graph}): " + ", ".join(
                f"{n} [{o}]" for n, o in zip(names, ops)))
        aten_ops = [x for x in self.left_out if not x[3].startswith(("view", "a dnngraph op"))]
        summary.append(f"{len(aten_ops)} op(s) left in ATen (views aside)")
        return "\n".join(summary + [""] + lines)

    def __str__(self):
        return self.table()

    def __repr__(self):
        return (f"Explanation({len(self.partitions)} fused graphs, "
                f"{len(self.left_out)} ops left in ATen)")


def explain(model, *inputs, backward=None, **kwargs) -> Explanation:
    """Compiles ``model`` with the dnngraph backend (inner compiler: eager), runs it on
    ``inputs`` and returns the backend's decisions (``print(explain(...))`` shows the table).

    ``backward``: also run a backward (of the sum of the floating outputs) to see the backward
    graphs; by default when an output requires grad. Gradients the model's parameters and the
    inputs held before are restored afterwards."""
    if not callable(model):
        raise TypeError(
            f"dnngraph.torch.explain: model is a {type(model).__name__}; expected a module or "
            "function to call on the inputs"
        )
    if backward not in (None, True, False):
        raise ValueError(f"dnngraph.torch.explain: backward={backward!r}; expected None, True or False")
    compiled = torch.compile(model, backend=make_backend("eager"), fullgraph=False)
    with collect_reports() as reports:
        out = compiled(*inputs, **kwargs)
        outs = [t for t in _tensors(out) if t.is_floating_point()]
        if backward is None:
            backward = any(t.requires_grad for t in outs)
        if backward and not any(t.requires_grad for t in outs):
            raise ValueError(
                "dnngraph.torch.explain: backward=True, but no floating-point output of the "
                "model requires grad (give inputs or parameters that require grad, or leave "
                "backward unset)"
            )
        if backward:
            leaves = [t for t in _leaves(model, inputs) if t.requires_grad]
            saved = [t.grad for t in leaves]
            sum(t.float().sum() for t in outs if t.requires_grad).backward()
            for t, g in zip(leaves, saved):
                t.grad = g
    return Explanation(list(reports))


def _tensors(out):
    if isinstance(out, torch.Tensor):
        yield out
    elif isinstance(out, (list, tuple)):
        for o in out:
            yield from _tensors(o)
    elif isinstance(out, dict):
        for o in out.values():
            yield from _tensors(o)


def _leaves(model, inputs):
    if isinstance(model, torch.nn.Module):
        yield from model.parameters()
    for x in inputs:
        if isinstance(x, torch.Tensor) and x.is_leaf:
            yield x
