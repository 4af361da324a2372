"""Functional ops on torch tensors under the frontend's ``cudnn.experimental.ops`` names.

``rms_norm``, ``layer_norm`` and ``moe_grouped_matmul`` (mode "none") build (once per shape,
layout, dtype and device) a dnngraph graph and run it on the tensors' device: CUDA tensors on
cuDNN, CPU tensors on the reference engine. ``swiglu_mlp`` raises NotSupportedError.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

__all__ = ["rms_norm", "layer_norm", "moe_grouped_matmul", "swiglu_mlp"]

_graphs: Dict[tuple, Any] = {}
_handles: Dict[str, Any] = {}


def _handle(device: Any) -> Any:
    from . import create_handle

    key = str(device)
    if key not in _handles:
        _handles[key] = create_handle(device=key)
    return _handles[key]


def _norm(kind: str, x: Any, weight: Any, bias: Any, eps: float) -> Any:
    import torch

    from . import data_type, norm_forward_phase
    from ._compat import pygraph

    if x.ndim == 0:
        raise ValueError(f"{kind}: input must have at least one dimension")
    hidden = int(x.shape[-1])
    rows = x.numel() // hidden if hidden else 0
    if rows == 0 or hidden == 0:
        raise ValueError(f"{kind}: input {tuple(x.shape)} has no normalization row")
    x2 = x.reshape(rows, hidden, 1, 1).contiguous()
    w = weight.reshape(1, hidden, 1, 1).contiguous() if weight is not None else None
    b = bias.reshape(1, hidden, 1, 1).contiguous() if bias is not None else None
    key = (kind, rows, hidden, x.dtype, str(x.device), w is not None and w.dtype,
           b is not None and b.dtype, float(eps))
    entry = _graphs.get(key)
    if entry is None:
        g = pygraph(handle=_handle(x.device), io_data_type=x.dtype,
                    intermediate_data_type=data_type.FLOAT, compute_data_type=data_type.FLOAT)
        X = g.tensor_like(x2, name="X")
        W = g.tensor_like(w if w is not None else torch.ones((1, hidden, 1, 1), dtype=x.dtype),
                          name="scale")
        W.set_is_pass_by_value(False)
        B = None
        if b is not None or kind == "layer_norm":
            B = g.tensor_like(b if b is not None else
                              torch.zeros((1, hidden, 1, 1), dtype=x.dtype), name="bias")
            B.set_is_pass_by_value(False)
        E = g.tensor(dim=[1, 1, 1, 1], stride=[1, 1, 1, 1], data_type=data_type.FLOAT,
                     is_pass_by_value=True, name="epsilon")
        if kind == "rms_norm":
            Y, _ = g.rmsnorm(input=X, scale=W, bias=B, epsilon=E,
                             norm_forward_phase=norm_forward_phase.INFERENCE)
        else:
            Y, _, _ = g.layernorm(input=X, scale=W, bias=B, epsilon=E,
                                  norm_forward_phase=norm_forward_phase.INFERENCE)
        Y.set_output(True).set_data_type(x.dtype)
        g.build()
        entry = _graphs[key] = (g, X, W, B, E, Y)
    g, X, W, B, E, Y = entry
    y = torch.empty_like(x2)
    pack = {X: x2, W: w if w is not None else torch.ones_like(x2[:1]),
            E: torch.tensor([float(eps)], dtype=torch.float32), Y: y}
    if B is not None:
        pack[B] = b if b is not None else torch.zeros_like(x2[:1])
    ws = torch.empty(g.get_workspace_size(), dtype=torch.uint8, device=x.device)
    g.execute(pack, ws)
    return y.reshape(x.shape)


def rms_norm(input: Any, weight: Any, bias: Optional[Any] = None, eps: float = 1e-5) -> Any:
    """RMSNorm over the last dimension, optionally plus a bias (same shape as weight)."""
    if tuple(weight.shape) != (int(input.shape[-1]),):
        raise ValueError(f"rms_norm: weight must have shape ({int(input.shape[-1])},), got "
                         f"{tuple(weight.shape)}")
    return _norm("rms_norm", input, weight, bias, eps)


def layer_norm(input: Any, normalized_shape: Tuple[int, ...], weight: Optional[Any] = None,
               bias: Optional[Any] = None, eps: float = 1e-5) -> Any:
    """LayerNorm over the last dimension (normalized_shape must be that one dimension)."""
    shape = tuple(normalized_shape)
    if len(shape) != 1 or shape[0] != int(input.shape[-1]):
        raise ValueError(f"layer_norm: normalized_shape must be ({int(input.shape[-1])},), the "
                         f"input's last dimension; got {shape}")
    return _norm("layer_norm", input, weight, bias, eps)


def moe_grouped_matmul(token: Any, weight: Any, first_token_offset: Any,
                       token_index: Optional[Any] = None, token_ks: Optional[Any] = None,
                       mode: str = "none", top_k: int = 1) -> Any:
    """MoE grouped matmul, mode "none": token (1, S, K), weight (E, K, N) (any strides; cuDNN
    wants each expert's (K, N) column-major, strides (K*N, 1, K)), first_token_offset (G, 1, 1)
    INT32/INT64 with G = B*E, each group's first row (group g uses expert g % E, the last runs
    to S) -> (1, S, N) in token's dtype. Modes "gather" / "scatter" raise NotSupportedError
    (what cuDNN 9.19 did with them: dnngraph._compat._MOE_MODES_WHY)."""
    import torch

    from . import data_type
    from ._compat import _MOE_MODES_WHY, _missing, pygraph

    name = str(getattr(mode, "name", mode)).rsplit(".", 1)[-1].upper()
    if name != "NONE":
        raise _missing(f"experimental.ops.moe_grouped_matmul(mode={mode!r})",
                       _MOE_MODES_WHY.get(name, "the modes are none, gather and scatter"))
    del token_index, token_ks, top_k  # unused in mode "none", as in the frontend
    key = ("moe", tuple(token.shape), tuple(token.stride()), token.dtype,
           tuple(weight.shape), tuple(weight.stride()), weight.dtype,
           tuple(first_token_offset.shape), first_token_offset.dtype, str(token.device))
    entry = _graphs.get(key)
    if entry is None:
        g = pygraph(handle=_handle(token.device), intermediate_data_type=data_type.FLOAT,
                    compute_data_type=data_type.FLOAT)
        T = g.tensor_like(token, name="token")
        W = g.tensor_like(weight, name="weight")
        O = g.tensor_like(first_token_offset, name="first_token_offset")
        for t in (T, W, O):
            t.set_is_pass_by_value(False)
        Y = g.moe_grouped_matmul(T, W, O, name="moe_grouped_matmul")
        Y.set_output(True).set_data_type(token.dtype)
        g.build()
        entry = _graphs[key] = (g, T, W, O, Y)
    g, T, W, O, Y = entry
    y = torch.empty(Y.get_dim(), dtype=token.dtype, device=token.device)
    ws = torch.empty(g.get_workspace_size(), dtype=torch.uint8, device=token.device)
    g.execute({T: token, W: weight, O: first_token_offset, Y: y}, ws)
    return y


def swiglu_mlp(*args: Any, **kwargs: Any) -> Any:
    from ._compat import _missing

    raise _missing("experimental.ops.swiglu_mlp (a fused grouped-GEMM SwiGLU MLP)")
