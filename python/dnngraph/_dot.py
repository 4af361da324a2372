"""Pictures of a graph: ``g.to_dot()`` gives Graphviz DOT text, and Jupyter shows a graph as
SVG through ``_repr_svg_`` when Graphviz's ``dot`` program is installed (as its DOT text
otherwise). Tensors are ellipses (virtual ones dashed, outputs doubled) with their dims and
data type, as inferred once the graph was validated or built; ops are boxes; edges carry the
port's role."""

from __future__ import annotations

import json
import shutil
import subprocess


def _esc(text: str) -> str:
    return str(text).replace("\\", "\\\\").replace('"', '\\"')


def _quote(text: str) -> str:
    """A DOT string of already escaped text (its \\n are line breaks)."""
    return '"' + text + '"'


def to_dot(graph) -> str:
    """The graph in Graphviz DOT (``dot -Tsvg``), from its JSON description."""
    desc = json.loads(graph.to_json())
    lines = [f"digraph {_quote(_esc(desc.get('name') or 'graph'))} {{", "  rankdir=TB;",
             '  node [fontname="Helvetica", fontsize=10];',
             '  edge [fontname="Helvetica", fontsize=9];']
    for i, t in enumerate(desc["tensors"]):
        dims = ",".join(str(d) for d in t["dim"])
        style = "dashed" if t["virtual"] else "solid"
        extra = ", peripheries=2" if t["output"] else ""
        label = f"{_esc(t['name'])}\\n[{dims}] {t['data_type']}"
        lines.append(f"  t{i} [shape=ellipse, style={_quote(style)}{extra}, label={_quote(label)}];")
    for j, n in enumerate(desc["nodes"]):
        mode = n.get("attrs", {}).get("mode")
        label = f"{n['kind']} '{_esc(n['name'])}'" + (f"\\nmode={mode}" if mode else "")
        lines.append(f'  n{j} [shape=box, style="rounded,filled", fillcolor="lightblue", '
                     f"label={_quote(label)}];")
        for role, t in n.get("inputs", {}).items():
            lines.append(f"  t{t} -> n{j} [label={_quote(_esc(role))}];")
        for role, t in n.get("outputs", {}).items():
            lines.append(f"  n{j} -> t{t} [label={_quote(_esc(role))}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def to_svg(graph) -> str | None:
    """The graph drawn by Graphviz's ``dot`` as SVG text; None when ``dot`` is not installed."""
    dot = shutil.which("dot")
    if dot is None:
        return None
    r = subprocess.run([dot, "-Tsvg"], input=to_dot(graph), capture_output=True, text=True,
                       timeout=60)
    return r.stdout if r.returncode == 0 else None


def _repr_svg_(graph):
    return to_svg(graph)


def _repr_markdown_(graph):
    # Without Graphviz, notebooks show the DOT text (paste it into any Graphviz viewer).
    return None if shutil.which("dot") else "```dot\n" + to_dot(graph) + "```"


def attach(*classes) -> None:
    """Adds to_dot / _repr_svg_ / _repr_markdown_ to the graph classes."""
    for cls in classes:
        cls.to_dot = to_dot
        cls._repr_svg_ = _repr_svg_
        cls._repr_markdown_ = _repr_markdown_
