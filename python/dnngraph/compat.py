"""Running code written for the cuDNN frontend's Python module unchanged.

``install_as_cudnn()`` registers the module names such code imports (``cudnn``,
``cudnn.experimental``, ``cudnn.experimental.ops``, ``cudnn.datatypes``, ``cudnn.wrapper``) as
names of dnngraph's modules, so that ``import cudnn`` and ``from cudnn.experimental.ops import
...`` reach dnngraph. A real frontend that Python can import is never shadowed unless
``force=True``."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from types import ModuleType

__all__ = ["install_as_cudnn", "FRONTEND_MODULE_NAMES"]

# Frontend module name -> the dnngraph module that stands for it.
FRONTEND_MODULE_NAMES = {
    "cudnn": "dnngraph",
    "cudnn.experimental": "dnngraph.experimental",
    "cudnn.experimental.ops": "dnngraph.experimental.ops",
    "cudnn.datatypes": "dnngraph.datatypes",
    "cudnn.wrapper": "dnngraph.wrapper",
}


def _real_frontend() -> str | None:
    """Where an importable module named ``cudnn`` that is not dnngraph lives, else None."""
    loaded = sys.modules.get("cudnn")
    if loaded is not None:
        return None if getattr(loaded, "__name__", "") == "dnngraph" else repr(loaded)
    try:
        spec = importlib.util.find_spec("cudnn")
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    return spec.origin or ", ".join(spec.submodule_search_locations or []) or "a module"


def install_as_cudnn(force: bool = False) -> ModuleType:
    """Makes ``import cudnn`` (and the frontend's submodules, FRONTEND_MODULE_NAMES) give
    dnngraph's modules; returns the ``cudnn`` module (dnngraph). Calling it again is harmless.

    When a real frontend is importable (or already imported) it raises RuntimeError saying
    where that frontend is, and registers nothing; ``force=True`` registers the names anyway,
    replacing an imported frontend's entries in ``sys.modules`` (modules that already hold a
    reference to it keep it)."""
    real = _real_frontend()
    if real is not None and not force:
        raise RuntimeError(
            "install_as_cudnn: a cuDNN frontend module named 'cudnn' is importable (" + real +
            "); dnngraph does not shadow it. Import dnngraph directly (import dnngraph as "
            "cudnn), or call install_as_cudnn(force=True) to make 'cudnn' name dnngraph")
    for name, ours in FRONTEND_MODULE_NAMES.items():
        sys.modules[name] = importlib.import_module(ours)
    return sys.modules["cudnn"]
