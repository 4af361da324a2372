"""PyTorch ops of dnngraph, registered in C++ (``torch.ops.dnngraph.*``).

``import dnngraph.torch`` loads ``libdnngraph_torch.so`` (built when torch was found at build
time) and registers the ops: CPU tensors run on the reference engine, CUDA tensors on cuDNN.

* ``dnngraph.torch.functional``: ``layer_norm``, ``rms_norm``, ``linear``,
  ``matmul_epilogue``, ``conv2d_bias_act``, ``scaled_dot_product_attention`` with
  ``torch.nn.functional`` signatures.
* modules ``LayerNorm``, ``RMSNorm``, ``Linear``, ``Conv2dBiasAct``, ``MultiheadAttention``:
  drop-in subclasses of their torch counterparts (same parameters, same state dicts);
  ``SwiGLU``, ``LlamaAttention``, ``LlamaBlock``: the parts of a Llama-style decoder block
  (``add_rms_norm``, ``swiglu`` and ``rope`` in ``functional``); ``ResidualBlock``: the ResNet
  basic block without batch norm as one op (``residual_block`` in ``functional``).
* ``torch.compile(model, backend="dnngraph")``: the backend (registered on import) that runs
  the subgraphs of an unmodified model's ATen graphs that an engine fuses as dnngraph graphs;
  ``explain(model, *inputs)`` shows which ops it fused and why the others stayed out
  (``dnngraph.torch.compile``, docs/torch.md).
* ``cache_info()`` / ``clear_cache()`` / ``set_cache_capacity(n)``: the graph cache.
* ``torch.backends.cudnn.benchmark = True``: on a GPU, each graph built from then on is
  autotuned once (its engine chosen by timing; the plan cache keeps the choice).
* ``set_cuda_graphs("off" | "repeated" | "always")`` / ``cuda_graphs()``: CUDA-graph replay of
  the ops' plans on a GPU.
* ``set_fallback_policy("warn" | "error")`` / ``fallback_policy()`` / ``fallback_count()``: what
  an op does when the engine has no plan for its inputs (run on ATen with a warning, or raise),
  and how many calls fell back.
"""

import os as _os

import torch as _torch

_here = _os.path.dirname(_os.path.abspath(__file__))
_lib_path = _os.path.join(_here, "libdnngraph_torch.so")
if not _os.path.exists(_lib_path):
    raise ImportError(
        f"dnngraph.torch: {_lib_path} is missing: dnngraph was built without torch. Install torch, "
        "then rebuild (`pip install --no-build-isolation .`, or CMake with "
        "-DDNNGRAPH_BUILD_TORCH=ON)"
    )
# libdnngraph_torch links libdnngraph, which `import dnngraph` has loaded (or RPATH finds).
import dnngraph as _dnngraph  # noqa: E402,F401

_torch.ops.load_library(_lib_path)

from . import compile, functional, modules  # noqa: E402
from .compile import explain  # noqa: E402
from .functional import run_graph  # noqa: E402,F401
from .modules import (  # noqa: E402
    Conv2dBiasAct,
    LayerNorm,
    Linear,
    LlamaAttention,
    LlamaBlock,
    MultiheadAttention,
    ResidualBlock,
    RMSNorm,
    SwiGLU,
)


def cache_info():
    """The graph cache shared by every op: dict(size, capacity, hits, misses, and, summed over
    the cached graphs' CUDA plans, cuda_graph_replayed / cuda_graph_recorded / cuda_graph_direct:
    executes served by replaying a recorded CUDA graph, graphs recorded, executes run directly;
    autotuned: cached graphs whose plan was chosen by timing (torch.backends.cudnn.benchmark))."""
    size, capacity, hits, misses, replayed, recorded, direct, autotuned = (
        _torch.ops.dnngraph.cache_info())
    return {"size": size, "capacity": capacity, "hits": hits, "misses": misses,
            "cuda_graph_replayed": replayed, "cuda_graph_recorded": recorded,
            "cuda_graph_direct": direct, "autotuned": autotuned}


def clear_cache():
    """Drops every cached graph (and resets the hit/miss counters)."""
    _torch.ops.dnngraph.clear_cache()


def set_cache_capacity(capacity: int):
    """Bounds the cache to `capacity` graphs (least recently used go first)."""
    _torch.ops.dnngraph.set_cache_capacity(capacity)


def set_fallback_policy(policy: str) -> str:
    """``"warn"`` (the default, or ``DNNGRAPH_TORCH_FALLBACK``): an op the engine has no plan for
    runs on ATen and warns once; ``"error"``: it raises a RuntimeError instead. Returns the
    previous policy."""
    return _torch.ops.dnngraph._set_fallback_policy(policy)


def fallback_policy() -> str:
    """The current fallback policy, ``"warn"`` or ``"error"``."""
    return _torch.ops.dnngraph._fallback_policy()


def set_cuda_graphs(mode: str) -> str:
    """How the ops' plans execute on a GPU: ``"repeated"`` (the default, or
    ``DNNGRAPH_TORCH_CUDA_GRAPHS``) records a plan's work into a CUDA graph once the same
    tensors' memory comes back (a training loop's steady state) and replays it; ``"off"`` calls
    cuDNN's execute each time; ``"always"`` records every new set at once. Applies to the
    cached graphs too. Returns the previous mode."""
    return _torch.ops.dnngraph._set_cuda_graphs(mode)


def cuda_graphs() -> str:
    """The current CUDA-graph mode: ``"off"``, ``"repeated"`` or ``"always"``."""
    return _torch.ops.dnngraph._cuda_graphs()


def fallback_count() -> int:
    """How many op calls reached the ATen fallback since the library was loaded."""
    return _torch.ops.dnngraph._fallback_count()


compile.register()

__all__ = [
    "compile",
    "explain",
    "functional",
    *modules.__all__,
    "cache_info",
    "clear_cache",
    "set_cache_capacity",
    "set_fallback_policy",
    "fallback_policy",
    "fallback_count",
    "set_cuda_graphs",
    "cuda_graphs",
    "run_graph",
]
