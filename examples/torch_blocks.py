"""A small transformer block and a ResNet basic block built from dnngraph.torch ops, each next
to the same block in plain PyTorch (sharing one state dict). A few SGD steps on both give the
same losses; on a GPU, --bench times forward+backward against eager PyTorch and torch.compile.

    python examples/torch_blocks.py [--device cuda] [--bench]
"""

import argparse
import time

import torch
from torch import nn

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


class BasicBlock(nn.Module):
    """ResNet basic block without batch norm: relu(x + conv2(relu(conv1(x))))."""

    def __init__(self, channels=32, ours=True):
        super().__init__()
        self.ours = ours
        if ours:
            self.conv1 = dt.Conv2dBiasAct(channels, channels, 3, padding=1, activation="relu")
            self.conv2 = dt.Conv2dBiasAct(channels, channels, 3, padding=1)
        else:
            self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)
            self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x):
        h = self.conv1(x)
        if not self.ours:
            h = torch.relu(h)
        return torch.relu(x + self.conv2(h))


def pair(kind, device, dtype=torch.float32):
    """(ours, reference) with the same parameters."""
    torch.manual_seed(0)
    make = TransformerBlock if kind == "transformer" else BasicBlock
    ref = make(ours=False).to(device, dtype)
    ours = make(ours=True).to(device, dtype)
    ours.load_state_dict(ref.state_dict())
    return ours, ref


def batch(kind, device, dtype=torch.float32, size="small"):
    g = torch.Generator().manual_seed(1)
    if kind == "transformer":
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
    def step():
        model.zero_grad(set_to_none=True)
        model(x).float().square().mean().backward()

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(iters):
        start.record()
        step()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[len(times) // 2]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--bench", action="store_true", help="time forward+backward (GPU)")
    args = p.parse_args()
    for kind in ("transformer", "resnet"):
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
                f"{kind} bf16 {tuple(x.shape)} fwd+bwd median ms: dnngraph {t_ours:.3f}  eager "
                f"{t_eager:.3f}  torch.compile {t_comp:.3f}  (eager/dnngraph {t_eager / t_ours:.2f}x)"
            )


if __name__ == "__main__":
    main()
