"""``Graph``: the frontend's convenience wrapper around pygraph (``cudnn.Graph``).

Ops are called with framework tensors (torch, numpy, ...) or graph tensors; leaving the
``with`` block validates and builds the graph and allocates its workspace; calling the object
runs it, with a dict {name, uid, graph tensor or "node::arg": array} (missing outputs are
allocated and returned in the dict) or positionally after ``set_io_tuples``::

    with cudnn.Graph(handle=h, io_data_type=torch.float16) as g:
        y = g.conv_fprop(image=x, weight=w, padding=[1, 1], name="conv")
        y.set_output(True)
    g.set_io_tuples(["conv::image", "conv::weight"], ["conv::Y"])
    out = g(x, w)

Outputs are allocated on the handle's device (torch when it is imported, else numpy on a CPU
handle).
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from typing import Any, Dict, List, Optional

from ._dnngraph import Tensor, heur_mode

__all__ = ["Graph"]

_PASS_THROUGH = {"get_workspace_size", "get_workspace_size_plan_at_index", "serialize",
                 "deserialize", "query_tensor_attributes_of_uid"}
_BLOCKED = {
    "build", "build_operation_graph", "build_plan_at_index", "build_plans", "check_support",
    "create_execution_plan", "create_execution_plans", "deselect_behavior_notes",
    "deselect_engines", "deselect_numeric_notes", "deselect_workspace_greater_than", "execute",
    "execute_plan_at_index", "get_behavior_notes", "get_behavior_notes_for_plan_at_index",
    "get_engine_count", "get_execution_plan_count", "get_knobs_for_engine",
    "get_plan_name_at_index", "key", "populate_cuda_graph", "select_behavior_notes",
    "select_numeric_notes", "update_cuda_graph", "validate",
}


def _is_array(v: Any) -> bool:
    from ._compat import _is_array as is_array

    return is_array(v)


class Graph:
    """Wrapper that builds on leaving its ``with`` block and runs when called."""

    def __init__(self, *, handle: Any = None, inputs: Optional[List[Any]] = None,
                 outputs: Optional[List[Any]] = None, heuristics: Optional[List[Any]] = None,
                 workspace_alloc: bool = True, **kwargs: Any) -> None:
        for what, v in (("inputs", inputs), ("outputs", outputs), ("heuristics", heuristics)):
            if v and not isinstance(v, (list, tuple)):
                raise ValueError(f"{what} must be a list or tuple")
        self._kwargs = kwargs
        self._graph: Any = None
        self._handle = handle
        self._heuristics = list(heuristics or [heur_mode.A, heur_mode.FALLBACK])
        self.__workspace: Any = None if workspace_alloc else False
        self._arrays: Dict[int, Tensor] = {}  # id(array) -> graph tensor
        self._in: "OrderedDict[str, Tensor]" = OrderedDict()
        self._out: "OrderedDict[str, Tensor]" = OrderedDict()
        self._user_tensors: List[Tensor] = []
        self._node_count: Dict[str, int] = {}
        self._node_names: set = set()
        self._in_tuple: Optional[tuple] = None
        self._out_tuple: Optional[tuple] = None
        self._pending = (list(inputs or []), list(outputs or []))

    # ---- construction ----
    def __enter__(self) -> "Graph":
        from ._compat import pygraph

        if self._graph is not None:
            raise RuntimeError("Graph already created")
        kw = dict(self._kwargs)
        if self._handle not in (None, "auto"):
            kw["handle"] = self._handle
        self._graph = pygraph(**kw)
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        if exc_type is not None:
            self._graph = None
            return False
        g = self._graph
        g.validate()
        g.build_operation_graph()
        g.create_execution_plans(self._heuristics)
        g.check_support()
        g.build_plans()
        if self.__workspace is None:
            self.__workspace = self._empty([g.get_workspace_size()], [1], "uint8")
        ins, outs = self._pending
        if ins or outs:
            self.set_io_tuples(ins, outs)
        return False

    def _device(self) -> str:
        h = self._graph.handle
        return "cuda" if h is None else str(h.device)

    def _empty(self, dim: List[int], stride: List[int], dtype_name: str) -> Any:
        torch = sys.modules.get("torch")
        if torch is not None and hasattr(torch, "empty_strided"):
            return torch.empty_strided(dim, stride, dtype=getattr(torch, dtype_name),
                                       device=self._device())
        if self._device() != "cpu":
            raise RuntimeError("Graph: allocating outputs on a GPU needs torch")
        import numpy as np

        dt = np.dtype(dtype_name if dtype_name != "bfloat16" else "float32")
        if dtype_name == "bfloat16":
            import ml_dtypes

            dt = np.dtype(ml_dtypes.bfloat16)
        span = 1 + sum((d - 1) * s for d, s in zip(dim, stride)) if dim else 1
        base = np.empty(max(span, 0), dtype=dt)
        return np.lib.stride_tricks.as_strided(base, dim, [s * dt.itemsize for s in stride])

    def _like(self, t: Tensor) -> Any:
        name = str(t.get_data_type()).split(".")[-1]
        torch_names = {"HALF": "float16", "BFLOAT16": "bfloat16", "FLOAT": "float32",
                       "DOUBLE": "float64", "INT8": "int8", "UINT8": "uint8", "INT32": "int32",
                       "INT64": "int64", "FP8_E4M3": "float8_e4m3fn",
                       "FP8_E5M2": "float8_e5m2", "FP8_E8M0": "float8_e8m0fnu"}
        if name == "FP4_E2M1":  # bytes holding two elements along the unit-stride dim
            return self._empty_fp4(t.get_dim(), t.get_stride())
        if name == "BOOLEAN":  # bit-packed: element i in bit i % 8 of byte i // 8
            span = 1 + sum((d - 1) * s for d, s in zip(t.get_dim(), t.get_stride()))
            return self._empty([(span + 7) // 8], [1], "uint8")
        if name not in torch_names:
            raise TypeError(f"Graph: cannot allocate an output of data type {name}")
        return self._empty(t.get_dim(), t.get_stride(), torch_names[name])

    def _empty_fp4(self, dim: List[int], stride: List[int]) -> Any:
        """Memory for an FP4_E2M1 tensor: torch.float4_e2m1fn_x2 where torch has it, else
        uint8, with the unit-stride dim halved and the other strides halved (validate() made
        them even)."""
        axis = max((d for d, s in enumerate(stride) if s == 1), key=lambda d: (dim[d], d))
        bdim = [d // 2 if i == axis else d for i, d in enumerate(dim)]
        bstride = [1 if i == axis else s // 2 for i, s in enumerate(stride)]
        torch = sys.modules.get("torch")
        if torch is not None and hasattr(torch, "float4_e2m1fn_x2"):
            return torch.empty_strided(bdim, bstride, dtype=torch.float4_e2m1fn_x2,
                                       device=self._device())
        return self._empty(bdim, bstride, "uint8")

    def _graph_tensor(self, obj: Any) -> Tensor:
        key = id(obj)
        if key not in self._arrays:
            src = obj.detach() if getattr(obj, "requires_grad", False) else obj
            self._arrays[key] = self._graph.tensor_like(src)
        return self._arrays[key]

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if self.__dict__.get("_graph") is None:
            raise RuntimeError(f"Graph.{name}: enter the `with Graph(...)` block first")
        attr = getattr(self._graph, name)
        if name in _PASS_THROUGH or not callable(attr):
            return attr
        if name in _BLOCKED:
            raise RuntimeError(f"Calling {name} via wrapper is not allowed")
        if name in ("tensor", "tensor_like"):
            def make(*args: Any, **kwargs: Any) -> Any:
                t = attr(*args, **kwargs)
                self._user_tensors.append(t)
                return t
            return make

        def op(*args: Any, **kwargs: Any) -> Any:
            count = self._node_count.get(name, 0)
            self._node_count[name] = count + 1
            node = kwargs.get("name") or f"{name}.{count}"
            kwargs["name"] = node
            if node in self._node_names:
                raise ValueError(f"Node name {node} already used")
            self._node_names.add(node)

            def convert(label: str, v: Any) -> Any:
                if isinstance(v, tuple):
                    return tuple(convert(f"{label}::{j}", e) for j, e in enumerate(v))
                if _is_array(v):
                    v = self._graph_tensor(v)
                if isinstance(v, Tensor):
                    self._in[f"{node}::{label}"] = v
                return v

            args = tuple(convert(str(i), v) for i, v in enumerate(args))
            kwargs = {k: convert(k, v) for k, v in kwargs.items()}
            result = attr(*args, **kwargs)
            outs = [result] if isinstance(result, Tensor) else list(result or [])
            for i, t in enumerate(outs):
                if isinstance(t, Tensor):
                    self._out[t.get_name() or f"{node}::{i}"] = t
            return result

        return op

    # ---- execution ----
    def _exec_kwargs(self, kwargs: Dict[str, Any]) -> Dict[str, Any]:
        kwargs = dict(kwargs)
        if "handle" not in kwargs and self._handle not in (None, "auto"):
            kwargs["handle"] = self._handle
        if "workspace" not in kwargs:
            if self.__workspace is False:
                raise RuntimeError("Need to specify workspace to execute graph")
            kwargs["workspace"] = self.__workspace
        return kwargs

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._graph is None:
            raise RuntimeError("Graph not created")
        # (selected_plan_index, not get_execution_plan_count: that checks every remaining
        # candidate, which on cuDNN can compile kernels, on every call)
        if self._graph.selected_plan_index() < 0:
            raise RuntimeError("You should not invoke the graph before the context exits")
        if len(args) == 1 and isinstance(args[0], dict):
            return self._call_dict(args[0], **kwargs)
        if not self._in_tuple:
            raise ValueError("You should not invoke the graph with positional arguments before "
                             "running set_io_tuples()")
        if len(args) != len(self._in_tuple):
            raise ValueError(f"Number of arguments ({len(args)}) does not match number of "
                             f"inputs ({len(self._in_tuple)})")
        pack: Dict[Any, Any] = {t.get_uid(): a for t, a in zip(self._in_tuple, args)}
        outs = [self._like(t) for t in self._out_tuple or ()]
        pack.update({t.get_uid(): o for t, o in zip(self._out_tuple or (), outs)})
        self._graph.execute(pack, **self._exec_kwargs(kwargs))
        return outs[0] if len(outs) == 1 else outs

    def _call_dict(self, tensor_dict: Dict[Any, Any], **kwargs: Any) -> Dict[Any, Any]:
        pack: Dict[int, Any] = {}
        missing: Dict[int, tuple] = {}
        for label, t in list(self._in.items()) + list(self._out.items()):
            if t.get_is_virtual() or t.get_uid() in pack:
                continue
            found = _lookup(label, t, tensor_dict)
            if found is None:
                missing[t.get_uid()] = (label, t)
            else:
                pack[t.get_uid()] = found
        inputs_missing = []
        for uid, (label, t) in missing.items():
            if uid in pack:
                continue
            if label in self._out or t in self._out.values():
                pack[uid] = tensor_dict[label] = self._like(t)
            else:
                inputs_missing.append(label)
        if inputs_missing:
            raise RuntimeError(f"Non-virtual input tensors not found in variant pack: "
                               f"{inputs_missing}")
        self._graph.execute(pack, **self._exec_kwargs(kwargs))
        return tensor_dict

    def set_io_tuples(self, inputs: List[Any], outputs: List[Any]) -> None:
        """The order of the positional arguments and of the returned outputs of a call. Items are
        graph tensors, names ("node::arg" or a tensor's name), uids, or the arrays used to
        build."""
        if not isinstance(inputs, (list, tuple)):
            raise ValueError("inputs must be a list or tuple")
        if not isinstance(outputs, (list, tuple)):
            raise ValueError("outputs must be a list or tuple")
        if not self._graph.get_execution_plan_count():
            self._pending = (list(inputs), list(outputs))
            return
        seen: set = set()
        resolved = []
        for kind, items, table in (("Input", inputs, self._in), ("Output", outputs, self._out)):
            ts = []
            for i, item in enumerate(items):
                t = self._resolve(item, table)
                if t is None:
                    raise ValueError(f"{kind} at index {i} ({item!r}) not found in tensor map")
                if id(t) in seen:
                    raise ValueError(f"{kind} at index {i} ({item!r}) is a duplicate")
                if kind == "Input" and t.get_is_virtual():
                    raise ValueError(f"Input at index {i} is a virtual tensor")
                seen.add(id(t))
                ts.append(t)
            resolved.append(tuple(ts))
        for label, t in list(self._in.items()) + list(self._out.items()):
            if not t.get_is_virtual() and id(t) not in seen:
                raise ValueError(f"Node tensor {label} is a non-virtual tensor but not specified "
                                 "as input or output")
        self._in_tuple, self._out_tuple = resolved

    def _resolve(self, item: Any, table: Dict[str, Tensor]) -> Optional[Tensor]:
        if isinstance(item, Tensor):
            return item if (item in table.values() or item in self._user_tensors) else None
        if isinstance(item, str):
            if item in table:
                return table[item]
            return next((t for t in table.values() if t.get_name() == item), None)
        if isinstance(item, int):
            return next((t for t in table.values() if t.get_uid() == item), None)
        return self._arrays.get(id(item))


def _lookup(label: str, t: Tensor, d: Dict[Any, Any]) -> Any:
    if label in d:
        return d[label]
    for key in (t, t.get_name(), t.get_uid()):
        try:
            if key in d:
                return d[key]
        except TypeError:
            pass
    return None

