"""Reads the layout (dims, strides in elements, data type) of array objects for
pygraph.tensor_like: numpy arrays, torch tensors, and any object with __cuda_array_interface__,
__array_interface__ or __dlpack__."""

from __future__ import annotations

from typing import Any, List, Tuple

from ._dnngraph import data_type

# Names as str(dtype) gives them in numpy, torch (after "torch."), cupy, jax and ml_dtypes.
_BY_NAME = {
    "float16": data_type.HALF,
    "half": data_type.HALF,
    "bfloat16": data_type.BFLOAT16,
    "float32": data_type.FLOAT,
    "float": data_type.FLOAT,
    "float64": data_type.DOUBLE,
    "double": data_type.DOUBLE,
    "int8": data_type.INT8,
    "uint8": data_type.UINT8,
    "int32": data_type.INT32,
    "int": data_type.INT32,
    "int64": data_type.INT64,
    "long": data_type.INT64,
    "bool": data_type.BOOLEAN,
    "float8_e4m3fn": data_type.FP8_E4M3,
    "float8_e4m3": data_type.FP8_E4M3,
    "float8_e5m2": data_type.FP8_E5M2,
    "float8_e8m0fnu": data_type.FP8_E8M0,
    # torch (>= 2.8): one element holds two FP4 values, packed along the unit-stride dim.
    "float4_e2m1fn_x2": data_type.FP4_E2M1,
    # ml_dtypes: one FP4 value per byte. It names the type (data_type=ml_dtypes.float4_e2m1fn),
    # but its arrays are not FP4_E2M1 buffers (see describe()).
    "float4_e2m1fn": data_type.FP4_E2M1,
}

# Array-interface type strings without the byte-order character.
_BY_TYPESTR = {
    "f2": data_type.HALF,
    "f4": data_type.FLOAT,
    "f8": data_type.DOUBLE,
    "i1": data_type.INT8,
    "u1": data_type.UINT8,
    "i4": data_type.INT32,
    "i8": data_type.INT64,
    "b1": data_type.BOOLEAN,
}

# DLPack (type code, bits) pairs: 0 int, 1 uint, 2 float, 4 bfloat, 6 bool.
_BY_DLPACK = {
    (2, 16): data_type.HALF,
    (4, 16): data_type.BFLOAT16,
    (2, 32): data_type.FLOAT,
    (2, 64): data_type.DOUBLE,
    (0, 8): data_type.INT8,
    (1, 8): data_type.UINT8,
    (0, 32): data_type.INT32,
    (0, 64): data_type.INT64,
    (6, 8): data_type.BOOLEAN,
}


def _dtype_from_name(obj: Any, dtype: Any) -> data_type:
    name = str(dtype)
    if name.startswith("torch."):
        name = name[len("torch."):]
    if name not in _BY_NAME:
        raise ValueError(f"tensor_like: unsupported data type {dtype!r} of {type(obj).__name__}")
    return _BY_NAME[name]


def _packed(shape: List[int]) -> List[int]:
    strides = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = strides[i + 1] * max(int(shape[i + 1]), 1)
    return strides


def _from_interface(obj: Any, iface: dict) -> Tuple[List[int], List[int], data_type]:
    shape = [int(d) for d in iface["shape"]]
    typestr = iface["typestr"]
    itemsize = int(typestr[2:])
    if hasattr(obj, "dtype"):
        dt = _dtype_from_name(obj, obj.dtype)
    elif typestr[1:] in _BY_TYPESTR:
        dt = _BY_TYPESTR[typestr[1:]]
    else:
        raise ValueError(f"tensor_like: unsupported array type string {typestr!r}")
    strides = iface.get("strides")
    if strides is None:
        return shape, _packed(shape), dt
    return shape, [int(s) // itemsize for s in strides], dt


def _unpacked_fp4(dim: List[int], stride: List[int]) -> Tuple[List[int], List[int]]:
    """The FP4 elements' dims and strides of a float4_e2m1fn_x2 tensor's (two per element):
    its unit-stride dim (of those with stride 1, the one of largest extent, the last on a tie)
    doubles, and so do the other strides."""
    axis = None
    for d, s in enumerate(stride):
        if s == 1 and (axis is None or dim[d] >= dim[axis]):
            axis = d
    if axis is None:
        raise ValueError(f"tensor_like: a float4_e2m1fn_x2 tensor of shape {tuple(dim)} and "
                         f"strides {tuple(stride)} has no dim of stride 1, along which its FP4 "
                         "pairs pack; pass a contiguous tensor (.contiguous())")
    return ([d * 2 if i == axis else d for i, d in enumerate(dim)],
            [1 if i == axis else s * 2 for i, s in enumerate(stride)])


def describe(obj: Any) -> Tuple[List[int], List[int], data_type]:
    """(dims, strides in elements, data_type) of an array object."""
    dtype_name = str(getattr(obj, "dtype", ""))
    if dtype_name == "float4_e2m1fn":  # ml_dtypes: one FP4 value per byte
        raise ValueError(
            "tensor_like: an ml_dtypes.float4_e2m1fn array holds one FP4 value per byte, but "
            "FP4_E2M1 tensors pack two per byte along their unit-stride dim; pack it with "
            "dnngraph.pack_fp4(array) and make the tensor with tensor(dim=array.shape, "
            "data_type=data_type.FP4_E2M1), or pass a torch.float4_e2m1fn_x2 tensor")
    stride = getattr(obj, "stride", None)
    if callable(stride) and hasattr(obj, "data_ptr"):  # torch.Tensor: strides in elements
        dim, st = [int(d) for d in obj.shape], [int(s) for s in stride()]
        dt = _dtype_from_name(obj, obj.dtype)
        if dtype_name.endswith("float4_e2m1fn_x2"):
            dim, st = _unpacked_fp4(dim, st)
        return dim, st, dt
    for attr in ("__cuda_array_interface__", "__array_interface__"):
        iface = getattr(obj, attr, None)
        if iface is not None:
            return _from_interface(obj, iface)
    if hasattr(obj, "__dlpack__"):
        from ._dnngraph import _dlpack_layout

        shape, strides, code, bits = _dlpack_layout(obj)
        if (code, bits) not in _BY_DLPACK:
            raise ValueError(f"tensor_like: unsupported DLPack type (code {code}, {bits} bits)")
        return list(shape), list(strides), _BY_DLPACK[(code, bits)]
    raise TypeError(
        f"tensor_like: cannot read the layout of a {type(obj).__name__}: expected a numpy array, "
        "a torch tensor, or an object with __cuda_array_interface__, __array_interface__ or "
        "__dlpack__")
