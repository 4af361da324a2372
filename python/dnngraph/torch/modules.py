"""Drop-in modules: subclasses of their torch counterparts whose forward runs dnngraph ops.

They keep the parent's parameters and buffers, so ``load_state_dict`` takes the state dict of
the torch module (and ``Module.load_state_dict(torch_module.state_dict())`` works both ways).
"""

import math
from typing import Optional

import torch
from torch import nn

from . import functional as F

# The activations the fused ops take (linear_act, conv2d_bias_act).
_ACTIVATIONS = ("none", "relu", "gelu", "gelu_tanh", "silu", "tanh", "sigmoid")


def _check_activation(module, activation):
    if not isinstance(activation, str) or activation not in _ACTIVATIONS:
        raise ValueError(
            f"dnngraph {module}: activation={activation!r}; expected one of {_ACTIVATIONS}"
        )


def _check_batched(module, **tensors):
    for name, t in tensors.items():
        if t.dim() != 3:
            raise ValueError(
                f"dnngraph {module}: '{name}' has shape {list(t.shape)}; expected a batch "
                "[batch, seq, features] (unsqueeze(0) an unbatched input)"
            )


def _check_count(module, name, value, least=1):
    """An integer size argument: a Python int (not bool) >= least."""
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValueError(f"dnngraph {module}: {name}={value!r}; expected an integer >= {least}")

__all__ = [
    "LayerNorm",
    "RMSNorm",
    "Linear",
    "Conv2dBiasAct",
    "MultiheadAttention",
    "ResidualBlock",
    "SwiGLU",
    "LlamaAttention",
    "LlamaBlock",
]


class LayerNorm(nn.LayerNorm):
    """``torch.nn.LayerNorm`` on ``dnngraph.torch.functional.layer_norm``."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)


class RMSNorm(nn.RMSNorm):
    """``torch.nn.RMSNorm`` on ``dnngraph.torch.functional.rms_norm``."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(input, self.normalized_shape, self.weight, self.eps)


class Linear(nn.Linear):
    """``torch.nn.Linear`` followed by an activation, fused: ``activation(x @ W.T + b)``."""

    def __init__(self, in_features, out_features, bias=True, activation="none", device=None, dtype=None):
        _check_activation("Linear", activation)
        super().__init__(in_features, out_features, bias=bias, device=device, dtype=dtype)
        self.activation = activation

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return F.linear(input, self.weight, self.bias, self.activation)

    def extra_repr(self) -> str:
        return super().extra_repr() + f", activation={self.activation}"


class Conv2dBiasAct(nn.Conv2d):
    """``torch.nn.Conv2d`` (zeros padding, numeric padding) followed by an activation, fused."""

    def __init__(self, *args, activation: str = "none", **kwargs):
        _check_activation("Conv2dBiasAct", activation)
        super().__init__(*args, **kwargs)
        if self.padding_mode != "zeros" or isinstance(self.padding, str):
            raise ValueError(
                "dnngraph Conv2dBiasAct: only padding_mode='zeros' with numeric padding is "
                f"supported, got padding_mode={self.padding_mode!r}, padding={self.padding!r}"
            )
        self.activation = activation

    def forward(self, input: torch.Tensor, residual: Optional[torch.Tensor] = None) -> torch.Tensor:
        """``activation(conv(input) + bias [+ residual])``, one graph."""
        return F.conv2d_bias_act(
            input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups,
            self.activation, residual,
        )

    def extra_repr(self) -> str:
        return super().extra_repr() + f", activation={self.activation}"


class ResidualBlock(nn.Module):
    """The ResNet basic block without batch norm: ``relu(x + conv2(relu(conv1(x))))``, with
    ``conv1`` and ``conv2`` ``nn.Conv2d(channels, channels, kernel_size, padding=kernel_size //
    2)`` (the state dict of such a module), run as one op (``functional.residual_block``)."""

    def __init__(self, channels, kernel_size=3, bias=True, device=None, dtype=None):
        super().__init__()
        _check_count("ResidualBlock", "channels", channels)
        if isinstance(kernel_size, bool) or not isinstance(kernel_size, int) or kernel_size < 1 \
                or kernel_size % 2 == 0:
            raise ValueError(
                f"dnngraph ResidualBlock: kernel_size={kernel_size!r}; expected an odd int >= 1 "
                "(padding kernel_size // 2 keeps the input's shape for the residual add)"
            )
        kw = dict(device=device, dtype=dtype)
        pad = kernel_size // 2
        self.conv1 = nn.Conv2d(channels, channels, kernel_size, padding=pad, bias=bias, **kw)
        self.conv2 = nn.Conv2d(channels, channels, kernel_size, padding=pad, bias=bias, **kw)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        c1, c2 = self.conv1, self.conv2
        return F.residual_block(x, c1.weight, c1.bias, c2.weight, c2.bias)


class MultiheadAttention(nn.MultiheadAttention):
    """``torch.nn.MultiheadAttention`` (``batch_first=True``, no dropout, same embedding size
    for query, key and value) on dnngraph's linear and attention ops. ``forward`` returns
    ``(output, None)``: attention weights are never materialized."""

    def __init__(self, embed_dim, num_heads, bias=True, batch_first=True, device=None, dtype=None):
        if not batch_first:
            raise ValueError("dnngraph MultiheadAttention: only batch_first=True is supported")
        super().__init__(embed_dim, num_heads, bias=bias, batch_first=True, device=device, dtype=dtype)

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        key_padding_mask: Optional[torch.Tensor] = None,
        need_weights: bool = False,
        attn_mask: Optional[torch.Tensor] = None,
        average_attn_weights: bool = True,
        is_causal: bool = False,
    ):
        if need_weights or key_padding_mask is not None:
            raise ValueError(
                "dnngraph MultiheadAttention: need_weights and key_padding_mask are not "
                "supported (pass need_weights=False and fold padding into attn_mask)"
            )
        _check_batched("MultiheadAttention", query=query, key=key, value=value)
        b, s_q, e = query.shape
        if key.shape[0] != b or value.shape[0] != b or key.shape[1] != value.shape[1]:
            raise ValueError(
                f"dnngraph MultiheadAttention: 'query' {list(query.shape)}, 'key' "
                f"{list(key.shape)} and 'value' {list(value.shape)} disagree; expected one batch "
                "size, and key and value of one length"
            )
        h = self.num_heads
        def heads(y):
            return y.view(b, y.shape[1], h, e // h).transpose(1, 2)

        if query is key and key is value:
            # Self-attention: one projection with the packed weight (one GEMM, as torch's own
            # module), the head split as strided views of its output.
            qkv = F.linear(query, self.in_proj_weight, self.in_proj_bias)
            q, k, v = (heads(t) for t in qkv.chunk(3, -1))
        else:
            ws = self.in_proj_weight.chunk(3)
            bs = self.in_proj_bias.chunk(3) if self.in_proj_bias is not None else (None,) * 3
            q, k, v = (heads(F.linear(x, w, bias)) for x, w, bias in zip((query, key, value), ws, bs))
        if attn_mask is not None:
            if attn_mask.dtype == torch.bool:
                # nn.MultiheadAttention's boolean masks say True = "not allowed to attend";
                # scaled_dot_product_attention's say True = "attend".
                attn_mask = ~attn_mask
            if attn_mask.dim() == 2:
                attn_mask = attn_mask.view(1, 1, *attn_mask.shape)
            elif attn_mask.dim() == 3:  # [batch * num_heads, L, S], as nn.MultiheadAttention
                if attn_mask.shape[0] != b * h:
                    raise RuntimeError(
                        f"dnngraph MultiheadAttention: the 3-D attn_mask has shape "
                        f"{list(attn_mask.shape)}; expected [batch * num_heads = {b * h}, "
                        f"{s_q}, {key.shape[1]}] (as nn.MultiheadAttention)"
                    )
                attn_mask = attn_mask.reshape(b, h, *attn_mask.shape[1:])
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, is_causal=is_causal)
        o = o.transpose(1, 2).reshape(b, s_q, e)
        return F.linear(o, self.out_proj.weight, self.out_proj.bias), None


class SwiGLU(nn.Module):
    """The gated MLP of Llama-style blocks: ``w2(silu(x @ W1.T) * (x @ W3.T))``. ``w13`` holds
    ``[W1; W3]`` packed (``[2 * hidden, dim]``): one matmul graph and one gate graph, then
    ``w2``."""

    def __init__(self, dim, hidden, bias=False, device=None, dtype=None):
        super().__init__()
        _check_count("SwiGLU", "dim", dim, 0)
        _check_count("SwiGLU", "hidden", hidden, 0)
        kw = dict(device=device, dtype=dtype)
        self.w13 = nn.Linear(dim, 2 * hidden, bias=bias, **kw)
        self.w2 = nn.Linear(hidden, dim, bias=bias, **kw)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.linear(x, self.w13.weight, self.w13.bias, "swiglu")
        return F.linear(h, self.w2.weight, self.w2.bias)


class LlamaAttention(nn.Module):
    """Causal grouped-query self-attention with rotary position embedding: ``wqkv`` packs the
    query, key and value projections (``[(heads + 2 * kv_heads) * head_dim, dim]``), the head
    split is a view (``rope`` and attention take strided tensors), ``wo`` projects back.
    ``max_seq_len`` sizes the rotary tables (non-persistent buffers); ``head_dim`` defaults to
    ``dim // heads``."""

    def __init__(self, dim, heads, kv_heads=None, max_seq_len=4096, rope_base=10000.0,
                 head_dim=None, device=None, dtype=None):
        super().__init__()
        name = "LlamaAttention"
        _check_count(name, "dim", dim)
        _check_count(name, "heads", heads)
        kv_heads = heads if kv_heads is None else kv_heads
        _check_count(name, "kv_heads", kv_heads)
        _check_count(name, "max_seq_len", max_seq_len, 0)
        if head_dim is not None:
            _check_count(name, "head_dim", head_dim)
        if (head_dim is None and dim % heads) or heads % kv_heads:
            raise ValueError(
                f"dnngraph LlamaAttention: dim={dim} must be a multiple of heads={heads} (or give "
                f"head_dim), and heads a multiple of kv_heads={kv_heads}"
            )
        head_dim = dim // heads if head_dim is None else head_dim
        if head_dim % 2:
            raise ValueError(
                f"dnngraph LlamaAttention: the head dim is {head_dim}; rotary embedding rotates "
                "pairs of features, so it must be even (choose dim, heads or head_dim so)"
            )
        if isinstance(rope_base, bool) or not isinstance(rope_base, (int, float)) or not (
            math.isfinite(rope_base) and rope_base > 0
        ):
            raise ValueError(
                f"dnngraph LlamaAttention: rope_base={rope_base!r}; expected a finite number > 0 "
                "(the angles are pos * rope_base^(-2i/head_dim))"
            )
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, head_dim
        kw = dict(device=device, dtype=dtype)
        self.wqkv = nn.Linear(dim, (heads + 2 * kv_heads) * self.head_dim, bias=False, **kw)
        self.wo = nn.Linear(heads * self.head_dim, dim, bias=False, **kw)
        cos, sin = F.rope_cos_sin(max_seq_len, self.head_dim, rope_base, device=device)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_batched("LlamaAttention", x=x)
        b, s, _ = x.shape
        h, kv, d = self.heads, self.kv_heads, self.head_dim
        if s > self.rope_cos.shape[0]:
            raise ValueError(
                f"dnngraph LlamaAttention: sequence length {s} exceeds max_seq_len "
                f"{self.rope_cos.shape[0]}; build the module with a larger max_seq_len"
            )
        # split (not slicing): autograd assembles the three gradients with one concatenation.
        q, k, v = F.linear(x, self.wqkv.weight).split([h * d, kv * d, kv * d], dim=-1)
        # Head counts given, not -1: a view of an empty sequence must not infer them.
        q, k, v = (t.view(b, s, t.shape[-1] // d, d).transpose(1, 2) for t in (q, k, v))
        cos, sin = self.rope_cos[:s], self.rope_sin[:s]
        q, k = F.rope(q, cos, sin), F.rope(k, cos, sin)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=kv != h)
        return F.linear(o.transpose(1, 2).reshape(b, s, h * d), self.wo.weight)


class LlamaBlock(nn.Module):
    """A Llama-style pre-norm decoder block: ``h = x + attn(rms_norm(x))``, then
    ``h + mlp(rms_norm(h))`` with the second residual add fused into the second RMSNorm
    (``add_rms_norm``), GQA attention with RoPE (``LlamaAttention``) and a SwiGLU MLP."""

    def __init__(self, dim, heads, kv_heads=None, hidden=None, eps=1e-6, max_seq_len=4096,
                 rope_base=10000.0, head_dim=None, device=None, dtype=None):
        super().__init__()
        if hidden is not None:
            _check_count("LlamaBlock", "hidden", hidden)
        kw = dict(device=device, dtype=dtype)
        self.attn_norm = RMSNorm(dim, eps=eps, **kw)
        self.attn = LlamaAttention(dim, heads, kv_heads, max_seq_len, rope_base, head_dim, **kw)
        self.mlp_norm = RMSNorm(dim, eps=eps, **kw)
        self.mlp = SwiGLU(dim, 4 * dim if hidden is None else hidden, **kw)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.attn(self.attn_norm(x))
        h, n = F.add_rms_norm(a, x, self.mlp_norm.normalized_shape, self.mlp_norm.weight,
                              self.mlp_norm.eps)
        return h + self.mlp(n)
