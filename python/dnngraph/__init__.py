"""dnngraph: describe deep-learning computations as graphs and run them.

The vocabulary follows cuDNN's frontend graph API, so code written for it runs after
``import dnngraph as cudnn`` (docs/compatibility.md lists what differs). Handles made with
``create_handle(device="cpu")`` run every graph on the CPU reference engine with numpy arrays or
CPU tensors. See docs/python.md.
"""

from ._dnngraph import (
    DeviceProperties,
    Handle,
    KernelCache,
    NotSupportedError,
    Partition,
    Tensor,
    backend_version,
    backend_version_string,
    build_plan_policy,
    create_deviceless_handle,
    create_handle,
    create_kernel_cache,
    data_type,
    diagonal_alignment,
    get_log_level,
    heur_mode,
    norm_forward_phase,
    partition,
    pointwise_mode,
    reduction_mode,
    set_log_level,
    version,
)
from ._dnngraph import _route_logs_to_python
from ._compat import (
    FRONTEND_KNOB_TYPE_BASE,
    LACKING_FUNCTIONS as _LACKING_FUNCTIONS,
    DeviceInfo,
    GraphContext,
    Node,
    NodeType,
    attention_implementation,
    behavior_note,
    create_device_properties,
    cuda_graph_retention,
    cudnnGraphNotSupportedError,
    destroy_handle,
    get_last_error_string,
    get_stream,
    is_frontend_knob_type,
    knob,
    knob_type,
    moe_grouped_matmul_mode,
    numerical_note,
    pygraph,
    reshape_mode,
    scalar_type,
    set_stream,
    tensor_reordering,
)
from . import compat, datatypes, experimental
from .fp4 import pack_fp4, unpack_fp4
from .graph_api import graph, graph_cache, jit
from .wrapper import Graph
from . import wrapper

# The frontend's fused kernels outside the graph API: each raises NotSupportedError.
globals().update(_LACKING_FUNCTIONS)

# dnngraph's graph class without the compatibility layer (what `Graph` named before `Graph`
# became the frontend's wrapper class): the same methods under dnngraph's own keywords, and the
# cheapest execute().
from ._dnngraph import pygraph as NativeGraph  # noqa: E402
from . import _dot  # noqa: E402

_dot.attach(NativeGraph)  # g.to_dot(), and an SVG picture of the graph in Jupyter

# The frontend's name for the graph-tensor class.
tensor = Tensor

__version__: str = version()


def _setup_logging() -> None:
    # DNNGRAPH_LOG's lines go to logging.getLogger("dnngraph") (DNNGRAPH_LOG_FILE, when set,
    # keeps them in that file). With DNNGRAPH_LOG set and logging not configured, they are
    # printed to stderr as the C++ library prints them.
    import atexit
    import logging
    import os

    if os.environ.get("DNNGRAPH_LOG_FILE"):
        return
    logger = logging.getLogger("dnngraph")
    if os.environ.get("DNNGRAPH_LOG") and not logger.hasHandlers():
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("[dnngraph %(levelname)s] %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(1)
    _route_logs_to_python(True)
    atexit.register(_route_logs_to_python, False)


_setup_logging()


def _quiet_leak_report_under_torch():
    # torch never releases kernels registered with torch.library, so a Python op that keeps its
    # graphs in a module-level cache (the custom-op guide's pattern) still holds them when the
    # interpreter exits, and nanobind would list each as leaked. With torch loaded, that report
    # is noise; without torch it stays on (it finds real reference leaks).
    import sys

    if "torch" in sys.modules:
        from ._dnngraph import _set_leak_warnings

        _set_leak_warnings(False)


import atexit as _atexit  # noqa: E402

_atexit.register(_quiet_leak_report_under_torch)

def sdpa_capabilities() -> frozenset:
    """Names of optional SDPA binding capabilities (the frontend's packed/THD contracts); dnngraph
    provides none of them."""
    return frozenset()


__all__ = [
    "DeviceInfo",
    "DeviceProperties",
    "GraphContext",
    "Node",
    "NodeType",
    "FRONTEND_KNOB_TYPE_BASE",
    "Graph",
    "Handle",
    "KernelCache",
    "NativeGraph",
    "NotSupportedError",
    "pack_fp4",
    "Partition",
    "partition",
    "unpack_fp4",
    "Tensor",
    "attention_implementation",
    "backend_version",
    "backend_version_string",
    "behavior_note",
    "build_plan_policy",
    "create_device_properties",
    "create_deviceless_handle",
    "create_handle",
    "create_kernel_cache",
    "cuda_graph_retention",
    "cudnnGraphNotSupportedError",
    "data_type",
    "datatypes",
    "destroy_handle",
    "diagonal_alignment",
    "get_log_level",
    "experimental",
    "get_last_error_string",
    "get_stream",
    "graph",
    "graph_cache",
    "heur_mode",
    "is_frontend_knob_type",
    "jit",
    "knob",
    "knob_type",
    "moe_grouped_matmul_mode",
    "norm_forward_phase",
    "numerical_note",
    "pointwise_mode",
    "pygraph",
    "reduction_mode",
    "set_log_level",
    "reshape_mode",
    "scalar_type",
    "sdpa_capabilities",
    "set_stream",
    "tensor",
    "tensor_reordering",
    "version",
    "wrapper",
]
