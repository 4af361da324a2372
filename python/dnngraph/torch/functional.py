"""dnngraph ops with ``torch.nn.functional`` signatures (plus an ``activation`` where the op
fuses one). Each is one call of a C++ op (``torch.ops.dnngraph.*``): autograd, Meta kernels
for ``torch.compile`` and the graph cache live in C++.

Activations: ``"none"``, ``"relu"``, ``"gelu"``, ``"gelu_tanh"``, ``"silu"``, ``"tanh"``,
``"sigmoid"``; ``linear`` also takes ``"swiglu"`` (a packed ``[2F, K]`` weight, see there).

The ops of modern decoder blocks: ``add_rms_norm`` (residual add fused with RMSNorm),
``swiglu`` (the gated unit of SwiGLU MLPs) and ``rope`` (rotary position embedding, with
``rope_cos_sin`` for its tables).
"""

from typing import List, Optional, Sequence, Tuple, Union

import torch

_ops = torch.ops.dnngraph
# The overloads themselves, looked up once: calling the packet (torch.ops.dnngraph.layer_norm)
# would pick among the op's overloads (the out= variants) on every call.
_layer_norm = _ops.layer_norm.default
_rms_norm = _ops.rms_norm.default
_linear_act = _ops.linear_act.default
_matmul_epilogue = _ops.matmul_epilogue.default
_conv2d_bias_act = _ops.conv2d_bias_act.default
_sdpa = _ops.sdpa.default
_add_rms_norm = _ops.add_rms_norm.default
_swiglu = _ops.swiglu.default
_swiglu_linear = _ops.swiglu_linear.default
_rope = _ops.rope.default
_residual_block = _ops.residual_block.default

# Direct entries of the same ops (torch/python/fast.cpp): the arguments go straight to C++ and
# the op is called unboxed, as torch's own bindings call ATen, instead of through torch.ops'
# boxed path. They answer NotImplemented for anything but plain tensors and values (tensor
# subclasses, torch function modes), and are not used while torch.compile traces: both then
# take the torch.ops path.
try:
    from . import _fast
except ImportError:  # built without it
    _fast = None
_compiling = torch.compiler.is_dynamo_compiling

__all__ = [
    "layer_norm",
    "rms_norm",
    "linear",
    "matmul_epilogue",
    "conv2d_bias_act",
    "scaled_dot_product_attention",
    "add_rms_norm",
    "swiglu",
    "rope",
    "rope_cos_sin",
    "residual_block",
    "run_graph",
]


def layer_norm(
    input: torch.Tensor,
    normalized_shape: Union[int, Sequence[int]],
    weight: Optional[torch.Tensor] = None,
    bias: Optional[torch.Tensor] = None,
    eps: float = 1e-5,
) -> torch.Tensor:
    """Like ``torch.nn.functional.layer_norm``."""
    if _fast is not None and not _compiling():
        y = _fast.layer_norm(input, normalized_shape, weight, bias, eps)
        if y is not NotImplemented:
            return y
    shape = [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)
    return _layer_norm(input, shape, weight, bias, eps)[0]


def rms_norm(
    input: torch.Tensor,
    normalized_shape: Union[int, Sequence[int]],
    weight: Optional[torch.Tensor] = None,
    eps: Optional[float] = None,
) -> torch.Tensor:
    """Like ``torch.nn.functional.rms_norm`` (eps None: ``torch.finfo(input.dtype).eps``)."""
    if _fast is not None and not _compiling():
        y = _fast.rms_norm(input, normalized_shape, weight, eps)
        if y is not NotImplemented:
            return y
    shape = [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)
    return _rms_norm(input, shape, weight, eps)[0]


def linear(
    input: torch.Tensor,
    weight: torch.Tensor,
    bias: Optional[torch.Tensor] = None,
    activation: str = "none",
) -> torch.Tensor:
    """``activation(input @ weight.T + bias)``, like ``torch.nn.functional.linear`` then the
    activation, fused into one graph.

    ``activation="swiglu"``: ``weight`` is the packed ``[2F, K]`` = ``[W1; W3]`` (and ``bias``
    ``[2F]``), the result ``silu(input @ W1.T + b1) * (input @ W3.T + b3)`` of shape ``[..., F]``
    (the matmul graph, then the gate's pointwise graph)."""
    if activation == "swiglu":
        return _swiglu_linear(input, weight, bias)
    if _fast is not None and not _compiling():
        y = _fast.linear_act(input, weight, bias, activation)
        if y is not NotImplemented:
            return y
    return _linear_act(input, weight, bias, activation)


def matmul_epilogue(
    a: torch.Tensor,
    b: torch.Tensor,
    bias: Optional[torch.Tensor] = None,
    alpha: float = 1.0,
    activation: str = "none",
    amax: bool = False,
) -> Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]:
    """``y = activation(alpha * (a @ b) + bias)`` for a ``[B,M,K]`` or ``[M,K]`` and b ``[B|1,K,N]``
    or ``[K,N]``, bias broadcastable to y. With ``amax=True`` returns ``(y, max(|y|))``, the
    FP8-recipe epilogue (amax is a 0-dim float32 tensor)."""
    if _fast is not None and not _compiling():
        r = _fast.matmul_epilogue(a, b, bias, alpha, activation, amax)
        if r is not NotImplemented:
            return r
    y, m = _matmul_epilogue(a, b, bias, alpha, activation, amax)
    return (y, m) if amax else y


def _pair(v: Union[int, Sequence[int]]) -> List[int]:
    return [v, v] if isinstance(v, int) else list(v)


def conv2d_bias_act(
    input: torch.Tensor,
    weight: torch.Tensor,
    bias: Optional[torch.Tensor] = None,
    stride: Union[int, Sequence[int]] = 1,
    padding: Union[int, Sequence[int]] = 0,
    dilation: Union[int, Sequence[int]] = 1,
    groups: int = 1,
    activation: str = "none",
    residual: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """``activation(conv2d(input, weight, bias, ...) [+ residual])``, like
    ``torch.nn.functional.conv2d`` (numeric padding only), fused. NCHW and channels_last inputs;
    the output keeps the input's memory format. ``residual`` (the output's shape) is added
    before the activation, in the same graph (a ResNet block's ``relu(x + conv2(h))``)."""
    if isinstance(padding, str):
        raise ValueError(
            f"dnngraph conv2d_bias_act: padding='{padding}' is not supported; give the padding "
            "as an int or a pair of ints"
        )
    if residual is not None:
        return _ops.conv2d_bias_add_act.default(
            input, weight, bias, residual, _pair(stride), _pair(padding), _pair(dilation), groups,
            activation,
        )
    if _fast is not None and not _compiling():
        y = _fast.conv2d_bias_act(input, weight, bias, stride, padding, dilation, groups, activation)
        if y is not NotImplemented:
            return y
    return _conv2d_bias_act(
        input, weight, bias, _pair(stride), _pair(padding), _pair(dilation), groups, activation
    )


def residual_block(
    input: torch.Tensor,
    weight1: torch.Tensor,
    bias1: Optional[torch.Tensor],
    weight2: torch.Tensor,
    bias2: Optional[torch.Tensor],
) -> torch.Tensor:
    """The ResNet basic block without batch norm, ``relu(input + conv2(relu(conv1(input))))``
    with ``conv_i(t) = conv2d(t, weight_i, bias_i, padding=k // 2)``: weights ``[C, C, k, k]``
    (``k`` odd), biases ``[C]`` or ``None``. One op, so its backward fuses across the two
    convolutions (the inner relu's derivative into the outer convolution's data gradient, the
    residual's gradient into the inner one's). NCHW or channels_last; the output keeps the
    input's memory format."""
    return _residual_block(input, weight1, bias1, weight2, bias2)


def scaled_dot_product_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: Optional[torch.Tensor] = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: Optional[float] = None,
    enable_gqa: bool = False,
) -> torch.Tensor:
    """Like ``torch.nn.functional.scaled_dot_product_attention`` on ``[B, H, S, D]`` tensors.
    A boolean ``attn_mask`` (True = attend) becomes an additive bias; a float one is added.
    ``dropout_p`` must be 0 (dropout with torch's RNG is not offered yet)."""
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        attn_mask = torch.zeros(attn_mask.shape, dtype=query.dtype, device=query.device).masked_fill(
            ~attn_mask, float("-inf")
        )
    if _fast is not None and not _compiling():
        out = _fast.sdpa(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)
        if out is not NotImplemented:
            return out
    return _sdpa(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)[0]


def add_rms_norm(
    input: torch.Tensor,
    residual: torch.Tensor,
    normalized_shape: Union[int, Sequence[int]],
    weight: Optional[torch.Tensor] = None,
    eps: Optional[float] = None,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """``s = input + residual`` and ``rms_norm(s, normalized_shape, weight, eps)`` in one graph;
    returns ``(s, normed)`` (the pre-norm block's residual stream and the next sublayer's
    input). Both are differentiable."""
    if _fast is not None and not _compiling():
        r = _fast.add_rms_norm(input, residual, normalized_shape, weight, eps)
        if r is not NotImplemented:
            return r
    shape = [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)
    s, y, _ = _add_rms_norm(input, residual, shape, weight, eps)
    return s, y


def swiglu(input: torch.Tensor) -> torch.Tensor:
    """``silu(a) * b`` where ``a, b = input.chunk(2, dim=-1)``: the gate of a SwiGLU MLP."""
    if _fast is not None and not _compiling():
        y = _fast.swiglu(input)
        if y is not NotImplemented:
            return y
    return _swiglu(input)


def rope(input: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary position embedding (rotate-half form) of ``input`` ``[B, H, S, D]``:
    ``x * cos + rotate_half(x) * sin`` with ``cos``/``sin`` ``[S, D/2]`` (see
    ``rope_cos_sin``). ``input`` may be any strided view; the result is stored
    ``[B, S, H, D]`` when ``input`` is a head split of ``[B, S, H*D]`` (else contiguous), so
    attention keeps that layout and merging the heads back stays a view."""
    if _fast is not None and not _compiling():
        y = _fast.rope(input, cos, sin)
        if y is not NotImplemented:
            return y
    return _rope(input, cos, sin)


def rope_cos_sin(
    seq_len: int,
    head_dim: int,
    base: float = 10000.0,
    device: Optional[torch.device] = None,
    dtype: torch.dtype = torch.float32,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """The ``cos``/``sin`` tables ``[seq_len, head_dim/2]`` of ``rope`` (angle
    ``pos * base^(-2i/head_dim)``)."""
    inv = base ** (-torch.arange(0, head_dim, 2, device=device, dtype=torch.float64) / head_dim)
    ang = torch.arange(seq_len, device=device, dtype=torch.float64)[:, None] * inv[None, :]
    return ang.cos().to(dtype), ang.sin().to(dtype)


def run_graph(graph_json: str, inputs: Sequence[torch.Tensor]) -> List[torch.Tensor]:
    """Runs a graph given in dnngraph's JSON graph format (``torch.ops.dnngraph.run_graph``):
    ``inputs`` bind, in order, to its non-virtual tensors that no op produces (constants aside),
    by ascending uid; returns its non-virtual tensors that an op produces, by ascending uid,
    allocated with the dims, strides and dtypes the graph declares. No autograd."""
    return _ops.run_graph.default(graph_json, list(inputs))
