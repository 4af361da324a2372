"""``torch.compile(model, backend="dnngraph")``: the ATen graphs of an unmodified model, with
the subgraphs a dnngraph engine runs as one fused graph replaced by one op each.

* ``dnngraph_backend``: the backend (registered as ``"dnngraph"`` by ``import dnngraph.torch``
  and through the ``torch_dynamo_backends`` entry point); ``options={"inner": "inductor" |
  "eager"}`` picks the compiler of everything else (Inductor by default).
* ``make_backend(inner)``: the same as a callable to pass as ``backend=``.
* ``explain(model, *inputs)``: which ATen ops went into which fused graph and why the others
  stayed out, as a table (``dnngraph.torch.explain``).
"""

from ._backend import dnngraph_backend, make_backend, register
from ._explain import Explanation, explain

__all__ = ["dnngraph_backend", "make_backend", "register", "explain", "Explanation"]
