"""Errors, the last-error string, handle and device functions of the frontend."""

from __future__ import annotations

import operator
from typing import Any

from .._dnngraph import DeviceProperties, Handle, NotSupportedError
from .._dnngraph import create_device_properties as _native_device_properties

cudnnGraphNotSupportedError = NotSupportedError


# ---- handle functions: a raw int where a Handle belongs is refused by name -----------------------
from .. import _dnngraph as _mod  # noqa: E402


def _need_handle(fn: str, handle: Any) -> None:
    if not isinstance(handle, Handle):
        raise TypeError(f"{fn}: handle must be a cudnn.Handle (dnngraph.Handle, made by "
                        f"create_handle()), got {type(handle).__name__}")


def set_stream(handle: Any, stream: int) -> None:
    """Sets the CUDA stream (an int, e.g. torch.cuda.Stream().cuda_stream) used by execute."""
    _need_handle("set_stream", handle)
    _mod.set_stream(handle, stream)


def get_stream(handle: Any) -> int:
    """The CUDA stream set on `handle` (0: the default stream)."""
    _need_handle("get_stream", handle)
    return _mod.get_stream(handle)


def destroy_handle(handle: Any) -> None:
    """Releases `handle` (graphs built with it keep what they need)."""
    _need_handle("destroy_handle", handle)
    _mod.destroy_handle(handle)


def _missing(what: str, hint: str = "") -> NotSupportedError:
    msg = f"{what} is not supported by dnngraph"
    return NotSupportedError(msg + (f": {hint}" if hint else "") +
                             " (see docs/compatibility.md for the differences from the frontend)")


_last_error = ""


def get_last_error_string() -> str:
    """The message of the last error raised by a pygraph op, build, build_plans or execute call
    ("" when none)."""
    return _last_error


def _remember(e: BaseException) -> None:
    global _last_error
    _last_error = str(e)


def _recording(fn: Any) -> Any:
    """Wraps a pygraph method so that get_last_error_string() sees its errors."""

    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Exception as e:
            _remember(e)
            raise

    call.__name__, call.__qualname__, call.__doc__ = fn.__name__, fn.__qualname__, fn.__doc__
    call.__module__, call.__wrapped__ = fn.__module__, fn  # help() shows fn's signature
    return call


def create_device_properties(device_id: Any = 0) -> DeviceProperties:
    """The properties of CUDA device ``device_id`` as cuDNN reads them (the frontend's
    ``cudnn.create_device_properties``): ``serialize()`` gives their JSON text, which
    ``DeviceProperties().deserialize(text)`` reads back on a machine without that GPU, to build
    for it with ``pygraph(device_property=props)`` (docs/cudnn-engine.md).

    As in the frontend, ``device_id`` may instead be that JSON text (``str``, ``bytes`` or a
    list of byte values): the properties are read from it, with no GPU needed (ValueError,
    naming the field, when it does not parse)."""
    if isinstance(device_id, str) and device_id.strip().lstrip("-").isdigit():
        device_id = int(device_id)
    if isinstance(device_id, (str, bytes, bytearray, list, tuple)):
        props = DeviceProperties()
        props.deserialize(bytes(device_id) if isinstance(device_id, bytearray) else device_id)
        return props
    try:
        index = operator.index(device_id)
    except TypeError:
        raise TypeError("create_device_properties: expected a CUDA device id (int) or the JSON "
                        "text DeviceProperties.serialize() gives (str, bytes or a list of byte "
                        f"values), got {type(device_id).__name__}") from None
    return _native_device_properties(index)


_LACKING_FUNCTIONS = [
    "causal_conv1d_forward", "causal_conv1d_backward", "causal_conv1d_nwh_forward",
    "causal_conv1d_nwh_backward", "b2b_causal_conv1d_forward", "b2b_causal_conv1d_backward",
    "gnn_agg_op", "gnn_agg_simple_forward", "gnn_agg_simple_backward", "gnn_activation_op",
    "gnn_mha_gat_forward", "gnn_mha_gat_backward", "gnn_mha_gat_v2_forward",
    "gnn_mha_gat_v2_backward",
]


def _lacking_function(name: str) -> Any:
    def fn(*args: Any, **kwargs: Any) -> Any:
        raise _missing(f"{name} (a fused kernel outside the graph API)")

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = "Not supported by dnngraph: raises NotSupportedError."
    return fn


LACKING_FUNCTIONS = {n: _lacking_function(n) for n in _LACKING_FUNCTIONS}


class DeviceInfo:
    """The device of a handle: ordinal (None for the CPU) and kind."""

    def __init__(self, device: str) -> None:
        self.kind = "cpu" if device == "cpu" else "cuda"
        self.ordinal = None if device == "cpu" else int(device.partition(":")[2] or 0)
