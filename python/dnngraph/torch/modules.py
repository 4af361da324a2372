"""Drop-in modules: subclasses of their torch counterparts whose forward runs dnngraph ops.

They keep the parent's parameters and buffers, so ``load_state_dict`` takes the state dict of
the torch module (and ``Module.load_state_dict(torch_module.state_dict())`` works both ways).
"""

from typing import Optional

import torch
from torch import nn

from . import functional as F

__all__ = ["LayerNorm", "RMSNorm", "Linear", "Conv2dBiasAct", "MultiheadAttention"]


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
        super().__init__(in_features, out_features, bias=bias, device=device, dtype=dtype)
        self.activation = activation

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return F.linear(input, self.weight, self.bias, self.activation)

    def extra_repr(self) -> str:
        return super().extra_repr() + f", activation={self.activation}"


class Conv2dBiasAct(nn.Conv2d):
    """``torch.nn.Conv2d`` (zeros padding, numeric padding) followed by an activation, fused."""

    def __init__(self, *args, activation: str = "none", **kwargs):
        super().__init__(*args, **kwargs)
        if self.padding_mode != "zeros" or isinstance(self.padding, str):
            raise ValueError(
                "dnngraph Conv2dBiasAct: only padding_mode='zeros' with numeric padding is "
                f"supported, got padding_mode={self.padding_mode!r}, padding={self.padding!r}"
            )
        self.activation = activation

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return F.conv2d_bias_act(
            input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups,
            self.activation,
        )

    def extra_repr(self) -> str:
        return super().extra_repr() + f", activation={self.activation}"


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
        b, s_q, e = query.shape
        h = self.num_heads
        w_q, w_k, w_v = self.in_proj_weight.chunk(3)
        b_q, b_k, b_v = self.in_proj_bias.chunk(3) if self.in_proj_bias is not None else (None,) * 3

        def heads(x, w, bias):
            y = F.linear(x, w, bias)
            return y.view(b, x.shape[1], h, e // h).transpose(1, 2)

        q, k, v = heads(query, w_q, b_q), heads(key, w_k, b_k), heads(value, w_v, b_v)
        if attn_mask is not None:
            if attn_mask.dtype == torch.bool:
                # nn.MultiheadAttention's boolean masks say True = "not allowed to attend";
                # scaled_dot_product_attention's say True = "attend".
                attn_mask = ~attn_mask
            if attn_mask.dim() == 2:
                attn_mask = attn_mask.view(1, 1, *attn_mask.shape)
            elif attn_mask.dim() == 3:  # [batch * num_heads, L, S], as nn.MultiheadAttention
                attn_mask = attn_mask.reshape(b, h, *attn_mask.shape[1:])
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, is_causal=is_causal)
        o = o.transpose(1, 2).reshape(b, s_q, e)
        return F.linear(o, self.out_proj.weight, self.out_proj.bias), None
