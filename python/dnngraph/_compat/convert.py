"""Argument conversion: arrays, dtypes and raw pointers as the frontend passes them."""

from __future__ import annotations

from typing import Any

from .._dnngraph import Tensor, data_type
from ..datatypes import _library_type, is_dtype_like


# ---- argument conversion ----------------------------------------------------------------------
def _is_array(v: Any) -> bool:
    if isinstance(v, (Tensor, int, float, bool, str, bytes, list, tuple, dict)) or v is None:
        return False
    return (hasattr(v, "__dlpack__") or hasattr(v, "__array_interface__") or
            hasattr(v, "__cuda_array_interface__"))


def _dtype(v: Any) -> Any:
    return _library_type(v) if is_dtype_like(v) else v


def _on_cpu(obj: Any) -> bool:
    dev = getattr(obj, "device", None)
    if dev is not None and getattr(dev, "type", None) is not None:
        return dev.type == "cpu"
    return hasattr(obj, "__array_interface__") and not hasattr(obj, "__cuda_array_interface__")


class _Ptr:
    """A raw device or host pointer seen by the native execute as an array of a tensor's
    layout (for _execute_with_ptrs)."""

    def __init__(self, ptr: int, t: Tensor, cuda: bool) -> None:
        span = 1 + sum((d - 1) * s for d, s in zip(t.get_dim(), t.get_stride()) if d > 0)
        if t.get_data_type() == data_type.FP4_E2M1:  # two elements per byte
            span = (span + 1) // 2
        elif t.get_data_type() == data_type.BOOLEAN:  # eight elements (bits) per byte
            span = (span + 7) // 8
        itemsize = _ITEMSIZE.get(t.get_data_type(), 1)
        iface = {"shape": (span,), "typestr": _TYPESTR.get(t.get_data_type(), f"<u{itemsize}"),
                 "data": (int(ptr), False),
                 "version": 3, "strides": None}
        if cuda:
            self.__cuda_array_interface__ = dict(iface, stream=None)
        else:
            self.__array_interface__ = iface


_TYPESTR = {
    data_type.HALF: "<f2", data_type.FLOAT: "<f4", data_type.DOUBLE: "<f8", data_type.INT8: "|i1",
    data_type.UINT8: "|u1", data_type.INT32: "<i4", data_type.INT64: "<i8",
    data_type.BOOLEAN: "|u1",  # bit-packed: the bytes
}
_ITEMSIZE = {
    data_type.HALF: 2, data_type.BFLOAT16: 2, data_type.FLOAT: 4, data_type.DOUBLE: 8,
    data_type.INT8: 1, data_type.UINT8: 1, data_type.INT32: 4, data_type.INT64: 8,
    data_type.BOOLEAN: 1, data_type.FP8_E4M3: 1, data_type.FP8_E5M2: 1, data_type.FP8_E8M0: 1,
    data_type.FP4_E2M1: 1,  # a byte holds two elements (BOOLEAN: eight): _Ptr counts bytes
}


def _sm_count(value: Any) -> int:
    """pygraph(sm_count=...) as the native int32 (-1: every SM, as in the frontend)."""
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError("pygraph(sm_count=...): expected an int (the most SMs the graph's GPU "
                        f"plans may use) or None, got {type(value).__name__}")
    n = value.__index__()
    if not -2**31 <= n < 2**31:
        raise ValueError(f"pygraph(sm_count={n}): expected a number of SMs (a 32-bit int) or "
                         "None for every SM")
    return n
