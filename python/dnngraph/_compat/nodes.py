"""The graph's nodes and context as the frontend reports them."""

from __future__ import annotations

from typing import Any, List

from .._dnngraph import data_type
from .enums import _make_enum


class GraphContext:
    """A graph's data types and name (``pygraph.context``)."""

    def __init__(self, io_data_type: Any = None, intermediate_data_type: Any = None,
                 compute_data_type: Any = None, name: str = "") -> None:
        self.io_data_type = io_data_type
        self.intermediate_data_type = intermediate_data_type
        self.compute_data_type = compute_data_type
        self.name = name


NodeType = _make_enum("NodeType", [
    "POINTWISE", "MATMUL", "CONV_FPROP", "CONV_DGRAD", "CONV_WGRAD", "REDUCTION", "LAYERNORM",
    "LAYERNORM_BWD", "RMSNORM", "RMSNORM_BWD", "BATCHNORM", "BATCHNORM_INFERENCE",
    "BATCHNORM_BWD", "SOFTMAX", "SDPA", "SDPA_BWD", "SLICE", "OTHER"], "Kinds of graph nodes")


class Node:
    """A node of a graph (``pygraph.nodes``): name, node_type, compute_data_type, attributes and
    {port: tensor name} for inputs and outputs."""

    def __init__(self, doc: dict, tensor_names: List[str]) -> None:
        self.name = doc["name"]
        kind = str(doc.get("kind", "")).upper()
        aliases = {"LAYERNORM_BACKWARD": "LAYERNORM_BWD", "RMSNORM_BACKWARD": "RMSNORM_BWD",
                   "BATCHNORM_BACKWARD": "BATCHNORM_BWD", "SDPA_BACKWARD": "SDPA_BWD"}
        kind = aliases.get(kind, kind)
        self.node_type = NodeType.__members__.get(kind, NodeType.OTHER)
        self.kind = doc.get("kind")
        self.compute_data_type = getattr(data_type, doc.get("compute_data_type", "NOT_SET"),
                                         data_type.NOT_SET)
        self.params = dict(doc.get("attrs", {}))
        self.inputs = {k: tensor_names[v] for k, v in doc.get("inputs", {}).items()}
        self.outputs = {k: tensor_names[v] for k, v in doc.get("outputs", {}).items()}

    def __repr__(self) -> str:
        return f"<Node {self.name} {self.kind} inputs={self.inputs} outputs={self.outputs}>"


class _Shape:
    """The layout of a tensor's JSON description, read like a Tensor by _Ptr."""

    def __init__(self, t: dict) -> None:
        self._t = t

    def get_dim(self) -> List[int]:
        return self._t["dim"]

    def get_stride(self) -> List[int]:
        return self._t["stride"]

    def get_data_type(self) -> Any:
        return getattr(data_type, self._t["data_type"], data_type.UINT8)


def _numel(dim: List[int]) -> int:
    n = 1
    for d in dim:
        n *= int(d)
    return n


def _graph_address(g: Any) -> int:
    """A cudaGraph_t given as an int, or an object holding one (e.g. cuda-python's CUgraph)."""
    if isinstance(g, int):
        return g
    for attr in ("getPtr", "__int__"):
        f = getattr(g, attr, None)
        if f is not None:
            return int(f())
    raise TypeError(f"cuda_graph: expected a cudaGraph_t address (int), got {type(g).__name__}")


def _note_key(n: Any) -> str:
    """A note (enum member or string, with or without the CUDNN_*_NOTE_ prefix) as a name."""
    name = getattr(n, "name", None) or str(n)
    for prefix in ("CUDNN_BEHAVIOR_NOTE_", "CUDNN_NUMERICAL_NOTE_"):
        name = name.replace(prefix, "")
    return name.upper()


def _notes(names: Any, enum_type: type) -> List[Any]:
    out = []
    for n in names or []:
        key = str(n).upper().replace("CUDNN_BEHAVIOR_NOTE_", "").replace("CUDNN_NUMERICAL_NOTE_",
                                                                         "")
        out.append(enum_type.__members__.get(key, n))
    return out
