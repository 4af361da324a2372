"""dnngraph: describe deep-learning computations as graphs and run them.

The vocabulary follows cuDNN's frontend graph API, so code written for it runs after
``import dnngraph as cudnn``. Handles made with ``create_handle(device="cpu")`` run every graph
on the CPU reference engine with numpy arrays or CPU tensors. See docs/python.md.
"""

from ._dnngraph import (
    Graph,
    Handle,
    KernelCache,
    NotSupportedError,
    Tensor,
    backend_version,
    backend_version_string,
    build_plan_policy,
    create_handle,
    create_kernel_cache,
    data_type,
    destroy_handle,
    diagonal_alignment,
    get_log_level,
    get_stream,
    heur_mode,
    norm_forward_phase,
    pointwise_mode,
    pygraph,
    reduction_mode,
    set_log_level,
    set_stream,
    version,
)
from ._dnngraph import _route_logs_to_python

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

__all__ = [
    "Graph",
    "Handle",
    "KernelCache",
    "NotSupportedError",
    "Tensor",
    "backend_version",
    "backend_version_string",
    "build_plan_policy",
    "create_handle",
    "create_kernel_cache",
    "data_type",
    "destroy_handle",
    "diagonal_alignment",
    "get_log_level",
    "get_stream",
    "heur_mode",
    "norm_forward_phase",
    "pointwise_mode",
    "pygraph",
    "reduction_mode",
    "set_log_level",
    "set_stream",
    "version",
]
