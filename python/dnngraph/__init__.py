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
