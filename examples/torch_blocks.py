"""A small GPT-style transformer block, a Llama-style block (RMSNorm, GQA attention with RoPE,
SwiGLU MLP) and a ResNet basic block built from dnngraph.torch ops, each next to the same block
in plain PyTorch (sharing one state dict). A few SGD steps on both give the same losses; on a
GPU, --bench times forward+backward against eager PyTorch and torch.compile (bench/torch/
blocks.py does so at model sizes).

    python examples/torch_blocks.py [--device cuda] [--bench]
"""

import argparse

import torch
from torch import nn
from torch.utils.benchmark import Timer

import dnngraph.torch as dt


class TransformerBlock(nn.Module):
    """Pre-norm block: x + attn(ln1(x)), then + mlp(ln2(x)); causal self-attention."""

    def __init__(self, dim=64, heads=4, hidden=256, ours=True):
        super().__init__()
        self.ours = ours
        mod = dt if ours else nn
        self.ln1 = mod.LayerNorm(dim)
        self.attn = dt.MultiheadAttention(dim, heads) if ours else nn.MultiheadAttention(dim, heads, batch_first=True)
        self.ln2 = mod.LayerNorm(dim)
        self.fc1 = dt.Linear(dim, hidden, activation="gelu") if ours else nn.Linear(dim, hidden)
        self.fc2 = mod.Linear(hidden, dim)

    def forward(self, x):
        h = self.ln1(x)
        if self.ours:
            a = self.attn(h, h, h, is_causal=True)[0]
        else:
            mask = nn.Transformer.generate_square_subsequent_mask(x.shape[1], device=x.device, dtype=x.dtype)
            a = self.attn(h, h, h, attn_mask=mask, is_causal=True, need_weights=False)[0]
        x = x + a
        h = self.fc1(self.ln2(x))
        if not self.ours:
            h = torch.nn.functional.gelu(h)
        return x + self.fc2(h)


def rotate_half(x, cos, sin):
    """Eager rotary embedding (rotate-half form), cos/sin [S, D/2]."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


class TorchGPTBlock(nn.Module):
    """Pre-norm GPT block of stock modules, as people write it: x + proj(sdpa(qkv(ln1(x)))),
    then + fc2(gelu_tanh(fc1(ln2(x)))). What torch.compile(backend="dnngraph") gets unmodified."""

    def __init__(self, dim, heads, hidden):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.fc1, self.fc2 = nn.Linear(dim, hidden), nn.Linear(hidden, dim)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (t.view(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        a = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, s, d))
        return x + self.fc2(nn.functional.gelu(self.fc1(self.ln2(x)), approximate="tanh"))


class TorchLlamaBlock(nn.Module):
    """dnngraph.torch.LlamaBlock in plain PyTorch, with the same parameter names."""

    def __init__(self, dim, heads, kv_heads, hidden, eps=1e-6, max_seq_len=4096, head_dim=None):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, head_dim or dim // heads
        self.attn_norm = nn.RMSNorm(dim, eps=eps)
        self.attn = nn.Module()
        self.attn.wqkv = nn.Linear(dim, (heads + 2 * kv_heads) * self.head_dim, bias=False)
        self.attn.wo = nn.Linear(heads * self.head_dim, dim, bias=False)
        cos, sin = dt.functional.rope_cos_sin(max_seq_len, self.head_dim)
        self.attn.register_buffer("rope_cos", cos, persistent=False)
        self.attn.register_buffer("rope_sin", sin, persistent=False)
        self.mlp_norm = nn.RMSNorm(dim, eps=eps)
        self.mlp = nn.Module()
        self.mlp.w13 = nn.Linear(dim, 2 * hidden, bias=False)
        self.mlp.w2 = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        b, s, _ = x.shape
        h, kv, d = self.heads, self.kv_heads, self.head_dim
        q, k, v = self.attn.wqkv(self.attn_norm(x)).split([h * d, kv * d, kv * d], dim=-1)
        q, k, v = (t.view(b, s, -1, d).transpose(1, 2) for t in (q, k, v))
        cos, sin = self.attn.rope_cos[:s], self.attn.rope_sin[:s]
        q, k = rotate_half(q, cos, sin), rotate_half(k, cos, sin)
        o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=kv != h)
        x = x + self.attn.wo(o.transpose(1, 2).reshape(b, s, h * d))
        g, u = self.mlp.w13(self.mlp_norm(x)).chunk(2, dim=-1)
        return x + self.mlp.w2(torch.nn.functional.silu(g) * u)


def llama_block(dim=64, heads=4, kv_heads=2, hidden=128, ours=True, max_seq_len=4096, head_dim=None):
    if ours:
        return dt.LlamaBlock(dim, heads, kv_heads, hidden, max_seq_len=max_seq_len, head_dim=head_dim)
    return TorchLlamaBlock(dim, heads, kv_heads, hidden, max_seq_len=max_seq_len, head_dim=head_dim)


class BasicBlock(nn.Module):
    """ResNet basic block without batch norm in stock PyTorch: relu(x + conv2(relu(conv1(x))))."""

    def __init__(self, channels=32, ours=False):
        super().__init__()
        if ours:
            raise ValueError("BasicBlock is the stock block; basic_block(channels) makes ours")
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x):
        return torch.relu(x + self.conv2(torch.relu(self.conv1(x))))


def basic_block(channels=32, ours=True):
    """Ours is dt.ResidualBlock (the same parameters as BasicBlock): one op whose backward fuses
    across the two convolutions."""
    return dt.ResidualBlock(channels) if ours else BasicBlock(channels)


MAKERS = {"transformer": TransformerBlock, "llama": llama_block, "resnet": basic_block}


def pair(kind, device, dtype=torch.float32, **sizes):
    """(ours, reference) with the same parameters; sizes: the block's constructor arguments."""
    torch.manual_seed(0)
    make = MAKERS[kind]
    ref = make(ours=False, **sizes).to(device, dtype)
    ours = make(ours=True, **sizes).to(device, dtype)
    ours.load_state_dict(ref.state_dict())
    return ours, ref


def batch(kind, device, dtype=torch.float32, size="small"):
    g = torch.Generator().manual_seed(1)
    if kind in ("transformer", "llama"):
        b, s = (4, 16) if size == "small" else (16, 512)
        shape = (b, s, 64)
    else:
        shape = (4, 32, 8, 8) if size == "small" else (32, 32, 56, 56)
    x = torch.randn(*shape, generator=g).to(device, dtype)
    target = torch.randn(*shape, generator=g).to(device, dtype)
    if kind == "resnet":
        x = x.contiguous(memory_format=torch.channels_last)
    return x, target


def train(model, x, target, steps=3, lr=0.05):
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), target)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def time_fwd_bwd(model, x, iters=20):
    """Mean ms of forward+backward over `iters` back-to-back steps (torch.utils.benchmark)."""
    def step():
        model.zero_grad(set_to_none=True)
        model(x).float().square().mean().backward()

    for _ in range(3):
        step()
    return Timer("step()", globals={"step": step}).timeit(iters).mean * 1e3


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--bench", action="store_true", help="time forward+backward (GPU)")
    args = p.parse_args()
    for kind in ("transformer", "llama", "resnet"):
        ours, ref = pair(kind, args.device)
        x, target = batch(kind, args.device)
        a, b = train(ours, x, target), train(ref, x, target)
        print(f"{kind}: dnngraph losses {[f'{v:.6f}' for v in a]}  torch {[f'{v:.6f}' for v in b]}")
        if args.bench and args.device.startswith("cuda"):
            dtype = torch.bfloat16
            ours, ref = pair(kind, args.device, dtype)
            x, _ = batch(kind, args.device, dtype, size="large")
            t_ours = time_fwd_bwd(ours, x)
            t_eager = time_fwd_bwd(ref, x)
            t_comp = time_fwd_bwd(torch.compile(ref), x)
            print(
                f"{kind} bf16 {tuple(x.shape)} fwd+bwd mean ms: dnngraph {t_ours:.3f}  eager "
                f"{t_eager:.3f}  torch.compile {t_comp:.3f}  (eager/dnngraph {t_eager / t_ours:.2f}x)"
            )


if __name__ == "__main__":
    main()
