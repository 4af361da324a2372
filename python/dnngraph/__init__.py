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
    get_stream,
    heur_mode,
    norm_forward_phase,
    pointwise_mode,
    pygraph,
    reduction_mode,
    set_stream,
    version,
)

__version__: str = version()

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
    "get_stream",
    "heur_mode",
    "norm_forward_phase",
    "pointwise_mode",
    "pygraph",
    "reduction_mode",
    "set_stream",
    "version",
]
