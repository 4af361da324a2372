"""Data-type conversions under the cuDNN frontend's names (``cudnn.datatypes``).

Every place that takes a ``data_type`` also takes a torch dtype (``torch.bfloat16``) or a numpy
dtype; they are recognised by name, so torch is never imported here unless the caller asks
``is_torch_available()``.
"""

from __future__ import annotations

from typing import Any, Optional

from ._dnngraph import data_type
from ._interop import _BY_NAME

__all__ = [
    "is_torch_available",
    "torch_to_cudnn_data_type",
    "is_dtype_like",
]

_torch_available: Optional[bool] = None


def is_torch_available() -> bool:
    """True when torch can be imported (imports it once to find out)."""
    global _torch_available
    if _torch_available is None:
        try:
            import torch

            _torch_available = hasattr(torch, "Tensor")  # not a directory named torch
        except ImportError:
            _torch_available = False
    return _torch_available


def _dtype_name(obj: Any) -> Optional[str]:
    """The element-type name of a torch dtype, numpy dtype or numpy scalar type, else None."""
    mod = type(obj).__module__ or ""
    if mod.startswith("torch") and type(obj).__name__ == "dtype":
        return str(obj)[len("torch."):]
    if mod.startswith("numpy") and type(obj).__name__.endswith("DType") or (
            mod.startswith("numpy") and type(obj).__name__ == "dtype"):
        return str(obj)
    if isinstance(obj, type) and (obj.__module__ or "").startswith(("numpy", "ml_dtypes")):
        return obj.__name__
    if mod.startswith("ml_dtypes"):
        return str(obj)
    return None


def is_dtype_like(obj: Any) -> bool:
    """True for a torch/numpy dtype that names one of our data types."""
    if type(obj) is data_type:
        return False
    name = _dtype_name(obj)
    return name is not None and name in _BY_NAME


def torch_to_cudnn_data_type(torch_data_type: Any) -> Optional[data_type]:
    """The data_type of a torch dtype (``torch.bfloat16`` -> ``BFLOAT16``), or None when it has
    no twin (or is not a torch dtype)."""
    name = _dtype_name(torch_data_type)
    return _BY_NAME.get(name) if name is not None else None


# The frontend's private spellings, read by user code and by its wrapper.
_torch_to_cudnn_data_type = torch_to_cudnn_data_type


def _cudnn_to_torch_data_type(cudnn_data_type: data_type) -> Any:
    """The torch dtype of a data_type, or None (also when torch is not installed)."""
    if not is_torch_available():
        return None
    import torch

    for name, dt in _BY_NAME.items():
        if dt == cudnn_data_type and hasattr(torch, name):
            return getattr(torch, name)
    return None


def _library_type(input_type: Any) -> data_type:
    """data_type from a data_type, a torch dtype or a numpy dtype; cudnnGraphNotSupportedError
    for anything else (the frontend's behaviour)."""
    if type(input_type) is data_type:
        return input_type
    out = torch_to_cudnn_data_type(input_type)
    if out is not None:
        return out
    from ._dnngraph import NotSupportedError

    raise NotSupportedError(
        f"data type {input_type!r} has no dnngraph data_type: pass a dnngraph.data_type, or a "
        f"torch/numpy dtype among {sorted(_BY_NAME)}")
