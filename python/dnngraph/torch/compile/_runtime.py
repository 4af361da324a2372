"""What the backend calls at compile and run time: the partitioner, the generic graph op and
the handles.

``partition_graph`` is ``dnngraph.partition`` and ``run_graph_op()`` is
``torch.ops.dnngraph.run_graph``. Where the library in this process lacks them (a build of the
Python package without the C++ partitioner), the stand-ins below take their place with the same
interface: ``_StandinPartition`` claims a candidate graph whole when the engine builds it, and
``dnngraph_fx::run_graph`` executes a graph built through the Python API.
"""

from __future__ import annotations

import concurrent.futures
import functools
import json
import os
import threading

import torch

import dnngraph as dg

_TORCH_TO_DG = {
    torch.float32: dg.data_type.FLOAT,
    torch.float16: dg.data_type.HALF,
    torch.bfloat16: dg.data_type.BFLOAT16,
    torch.float64: dg.data_type.DOUBLE,
}
_DG_NAME_TO_TORCH = {
    "FLOAT": torch.float32,
    "HALF": torch.float16,
    "BFLOAT16": torch.bfloat16,
    "DOUBLE": torch.float64,
}


def dg_dtype(dtype: torch.dtype):
    """dnngraph's data type for a floating torch dtype, None for any other."""
    return _TORCH_TO_DG.get(dtype)


_handles: dict[str, object] = {}
_handles_lock = threading.Lock()


def handle_for(device: torch.device):
    """One handle per device (``cpu``, ``cuda:N``), created on first use."""
    key = _device_key(device)
    with _handles_lock:
        h = _handles.get(key)
        if h is None:
            h = dg.create_handle(device=key)
            _handles[key] = h
        return h


# ---- the partitioner -------------------------------------------------------------------------


class _StandinPartition:
    """``dnngraph.Partition``'s interface for a graph claimed or refused whole."""

    def __init__(self, graph, ops, supported, reason):
        self._graph = graph
        self.ops = ops
        self.op_indices = list(range(len(ops)))
        self.supported = supported
        self.built = supported
        self.reason = reason

    def subgraph_json(self) -> str:
        return self._graph.to_json()


def _standin_partition(graph, handle, anchors=None):
    ops = [n["name"] for n in json.loads(graph.to_json())["nodes"]]
    try:
        graph.build_operation_graph()
        graph.create_execution_plans([dg.heur_mode.A, dg.heur_mode.FALLBACK])
        graph.check_support()
    except Exception as e:  # the engine's reason is the message
        return [_StandinPartition(graph, ops, False, str(e))]
    return [_StandinPartition(graph, ops, True, "")]


def _partition(graph, handle, anchors=None):
    """``dnngraph.partition``; ``anchors`` (op names): only groups holding one are built."""
    return dg.partition(graph, handle, anchors=anchors)


partition_graph = _partition if hasattr(dg, "partition") else _standin_partition

# Partitioning a candidate builds the plans of its supported partitions, and cuDNN compiles a
# fused graph's kernels then (0.2-1.5 s each, on the host's CPU): the candidates of one FX graph
# are partitioned on worker threads, each with its own handles (cuDNN is thread-safe for
# threads that do not share a handle); the handles live as long as the threads, as the plans
# built with them do.
_WORKERS = max(1, min(8, os.cpu_count() or 1))
_pool: concurrent.futures.ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()
_worker = threading.local()


def _device_key(device: torch.device) -> str:
    return "cpu" if device.type == "cpu" else f"cuda:{device.index or 0}"


def _worker_handle(device: torch.device):
    handles = getattr(_worker, "handles", None)
    if handles is None:
        handles = _worker.handles = {}
    key = _device_key(device)
    if key not in handles:
        handles[key] = dg.create_handle(device=key)
    return handles[key]


def partition_all(jobs, partition=partition_graph):
    """``partition(graph, handle, anchors)`` (``partition_graph``) of each ``(graph, device,
    anchors)``, in order; with more than one, concurrently (``_WORKERS`` threads). An exception
    of any is raised, the first in order."""
    if len(jobs) < 2 or _WORKERS < 2:
        return [partition(g, handle_for(d), a) for g, d, a in jobs]
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = concurrent.futures.ThreadPoolExecutor(_WORKERS, "dnngraph-partition")
    futures = [_pool.submit(lambda g=g, d=d, a=a: partition(g, _worker_handle(d), a))
               for g, d, a in jobs]
    return [f.result() for f in futures]


# ---- the generic graph op --------------------------------------------------------------------


@functools.lru_cache(maxsize=4096)
def graph_io(graph_json: str):
    """(input uids, outputs as (uid, dims, strides, torch dtype)) of a graph's JSON: inputs are
    the non-virtual tensors no op produces (constants aside), outputs the non-virtual tensors an
    op produces, each in ascending uid order."""
    desc = json.loads(graph_json)
    tensors = desc["tensors"]
    produced = set()
    for node in desc["nodes"]:
        produced.update(node["outputs"].values())
    inputs, outputs = [], []
    for i, t in enumerate(tensors):
        if t.get("virtual") or t.get("pass_by_value"):
            continue
        if i in produced or t.get("name") in produced:
            outputs.append((t["uid"], tuple(t["dim"]), tuple(t["stride"]),
                            _DG_NAME_TO_TORCH[t["data_type"]]))
        else:
            inputs.append(t["uid"])
    return sorted(inputs), sorted(outputs)


_standin_graphs: dict[str, object] = {}
_standin_lock = threading.Lock()


def standin_register(graph_json: str, graph):
    """Registers the pygraph (on its device's handle) that the stand-in op runs for
    ``graph_json`` (the real op reads the JSON)."""
    with _standin_lock:
        _standin_graphs.setdefault(graph_json, {"graph": graph, "built": False})


def _standin_run(graph_json: str, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    entry = _standin_graphs.get(graph_json)
    if entry is None:
        raise RuntimeError("dnngraph_fx::run_graph: graph not registered in this process")
    device = inputs[0].device if inputs else torch.device("cpu")
    g = entry["graph"]
    with _standin_lock:
        if not entry["built"]:
            g.build([dg.heur_mode.A, dg.heur_mode.FALLBACK])
            entry["built"] = True
    in_uids, outs = graph_io(graph_json)
    pack = dict(zip(in_uids, inputs))
    results = []
    for uid, dims, strides, dtype in outs:
        t = torch.empty_strided(dims, strides, dtype=dtype, device=device)
        pack[uid] = t
        results.append(t)
    ws = g.get_workspace_size()
    workspace = torch.empty(ws, dtype=torch.uint8, device=device) if ws else None
    g.execute(pack, workspace)
    return results


def _standin_fake(graph_json: str, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    device = inputs[0].device if inputs else torch.device("cpu")
    return [
        torch.empty_strided(dims, strides, dtype=dtype, device=device)
        for _, dims, strides, dtype in graph_io(graph_json)[1]
    ]


_standin_op = None


def _standin():
    global _standin_op
    if _standin_op is None:
        lib = torch.library.Library("dnngraph_fx", "FRAGMENT")  # noqa: TOR901
        lib.define("run_graph(str graph_json, Tensor[] inputs) -> Tensor[]")
        lib.impl("run_graph", _standin_run, "CPU")
        lib.impl("run_graph", _standin_run, "CUDA")
        torch.library.register_fake("dnngraph_fx::run_graph", _standin_fake, lib=lib)
        _standin_op = (lib, torch.ops.dnngraph_fx.run_graph.default)
    return _standin_op[1]


def uses_standin() -> bool:
    """True when this process runs partitions through the stand-in op."""
    return not hasattr(torch.ops.dnngraph, "run_graph")


def run_graph_op():
    """The op each claimed partition becomes: ``torch.ops.dnngraph.run_graph``."""
    if uses_standin():
        return _standin()
    return torch.ops.dnngraph.run_graph.default
