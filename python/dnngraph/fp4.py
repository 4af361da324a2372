"""FP4_E2M1 buffers on the host: packing float values into the bytes an FP4_E2M1 tensor uses,
and reading them back.

An FP4_E2M1 tensor stores two elements per byte along its unit-stride (innermost) dim: element
2k in the low nibble (bits 3-0) of byte k, element 2k+1 in the high nibble, as
``torch.float4_e2m1fn_x2`` does. Each nibble is an OCP MX E2M1 code: bit 3 the sign, codes 0-7
are 0, 0.5, 1, 1.5, 2, 3, 4, 6. ``ml_dtypes.float4_e2m1fn`` arrays hold one element per byte
and are not accepted as FP4_E2M1 buffers: pack them with :func:`pack_fp4` first.
"""

from __future__ import annotations

from typing import Any

__all__ = ["pack_fp4", "unpack_fp4", "FP4_E2M1_VALUES"]

# The value of each code 0-15 (numpy is imported when a function runs, not with the package).
FP4_E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
                   -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)
# Midpoints between neighbouring magnitudes; a value on midpoint c rounds to the even code
# (up when c is odd).
_MIDPOINTS = (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)


def _codes(values: Any) -> Any:
    """E2M1 codes (uint8, 0-15) of `values`: rounded to nearest even, saturated to +-6; NaN
    gives +0, as dnngraph stores it."""
    import numpy as np

    x = np.asarray(values, dtype=np.float64)
    a = np.abs(x)
    code = np.zeros(x.shape, dtype=np.uint8)
    for c, m in enumerate(_MIDPOINTS):
        up = (a > m) | ((a == m) & (c % 2 == 1))
        code += up.astype(np.uint8)
    code |= np.where(np.signbit(x), np.uint8(8), np.uint8(0)).astype(np.uint8)
    code[np.isnan(x)] = 0
    return code


def pack_fp4(values: Any) -> Any:
    """The bytes of an FP4_E2M1 tensor holding `values` (any float array, or an
    ml_dtypes.float4_e2m1fn array): a uint8 array whose last dim is half of `values`' last dim
    (which must be even). Pass it to ``execute`` for a tensor of `values`' dims with packed
    strides, or view it as ``torch.float4_e2m1fn_x2``."""
    import numpy as np

    x = np.asarray(values)
    if x.dtype.kind == "V" or str(x.dtype) == "float4_e2m1fn":
        x = x.astype(np.float32)
    if x.ndim == 0 or x.shape[-1] % 2:
        raise ValueError(f"pack_fp4: the last dim of an array of shape {x.shape} must be even "
                         "(FP4_E2M1 packs two elements per byte along it); pad it")
    c = _codes(x)
    return np.ascontiguousarray(c[..., 0::2] | (c[..., 1::2] << 4)).astype(np.uint8)


def unpack_fp4(packed: Any) -> Any:
    """The float32 values of FP4_E2M1 bytes (a uint8 array or a torch.float4_e2m1fn_x2
    tensor): the last dim doubles."""
    import numpy as np

    if hasattr(packed, "view") and "float4_e2m1fn_x2" in str(getattr(packed, "dtype", "")):
        import torch

        packed = packed.view(torch.uint8).cpu().numpy()
    b = np.asarray(packed)
    if b.dtype != np.uint8:
        raise TypeError(f"unpack_fp4: expected uint8 bytes, got {b.dtype}")
    out = np.empty(b.shape[:-1] + (b.shape[-1] * 2,), dtype=np.float32) if b.ndim else None
    if out is None:
        raise ValueError("unpack_fp4: expected an array of at least one dim")
    table = np.array(FP4_E2M1_VALUES, dtype=np.float32)
    out[..., 0::2] = table[b & 0x0F]
    out[..., 1::2] = table[b >> 4]
    return out
