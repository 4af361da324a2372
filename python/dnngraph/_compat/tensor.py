"""Tensor: the frontend's setters and getters."""

from __future__ import annotations

from typing import Any

from .._dnngraph import KernelCache, Tensor
from ..datatypes import _library_type
from .enums import tensor_reordering
from .errors import _missing


# ---- Tensor: the frontend's setters and getters ------------------------------------------------
_native_set_data_type = Tensor.set_data_type


def _set_data_type(self: Tensor, data_type: Any = None) -> Tensor:
    return _native_set_data_type(self, _library_type(data_type))


def _set_reordering_type(self: Tensor, reordering_type: Any) -> Tensor:
    if getattr(reordering_type, "name", "NONE") != "NONE":
        raise _missing(f"Tensor.set_reordering_type({reordering_type!r})")
    return self


_native_set_ragged_offset = Tensor.set_ragged_offset


def _index_tensor_4d(t: Any) -> Any:
    """A 1-D index tensor (b+1,) as the frontend promotes it: (b+1, 1, 1, 1)."""
    if isinstance(t, Tensor) and len(t.get_dim()) == 1:
        stride = t.get_stride()
        t.set_dim([t.get_dim()[0], 1, 1, 1]).set_stride([stride[0] if stride else 1, 1, 1, 1])
    return t


def _set_ragged_offset(self: Tensor, ragged_offset: Any) -> Tensor:
    return _native_set_ragged_offset(self, _index_tensor_4d(ragged_offset))


def _kernel_cache_counter(name: str) -> Any:
    def fn(self: Any) -> int:
        raise _missing(f"KernelCache.{name}()", "the kernel cache's revision and entry counters "
                       "arrived in cuDNN 9.27; dnngraph's cuDNN engine is built against 9.19's "
                       "API")

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = "Not supported by dnngraph (cuDNN 9.27): raises NotSupportedError."
    return fn


KernelCache.revision = _kernel_cache_counter("revision")
KernelCache.size = _kernel_cache_counter("size")


Tensor.set_data_type = _set_data_type
Tensor.set_ragged_offset = _set_ragged_offset
Tensor.set_reordering_type = _set_reordering_type
Tensor.get_reordering_type = lambda self: tensor_reordering.NONE


# The frontend's Tensor is a dataclass whose fields are read and assigned as attributes
# (`t.dim`, `t.name = "x"`); here each attribute is its getter and setter.
def _attribute(getter: str, setter: str, doc: str, convert: Any = None) -> property:
    def fset(self: Tensor, value: Any) -> None:
        getattr(self, setter)(convert(value) if convert else value)

    return property(lambda self: getattr(self, getter)(), fset, doc=doc)


for _attr, _conv, _doc in (
        ("dim", list, "The dims (set_dim / get_dim)."),
        ("stride", list, "The strides in elements (set_stride / get_stride)."),
        ("data_type", None, "The data type, a cudnn.data_type (torch and numpy dtypes are taken)."),
        ("name", str, "The name (set_name / get_name)."),
        ("uid", int, "The uid (set_uid / get_uid; assigned by validate when not set)."),
        ("is_virtual", bool, "An intermediate no buffer is bound to (set_is_virtual)."),
        ("is_pass_by_value", bool, "A scalar passed by value at execute (set_is_pass_by_value)."),
        ("ragged_offset", None, "The ragged (THD) offsets tensor, or None (set_ragged_offset)."),
        ("ragged_offset_multiplier", int, "Elements per unit of the ragged offsets."),
        ("reordering_type", None, "The layout reordering (NONE only in dnngraph)."),
):
    setattr(Tensor, _attr, _attribute(f"get_{_attr}", f"set_{_attr}", _doc, _conv))
