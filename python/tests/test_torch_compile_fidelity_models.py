"""torch.compile(backend="dnngraph") against eager on small versions of the models users run
(MLP, GPT and ViT blocks, a Llama block of stock modules, ResNet bottleneck with batch norm in eval
and train mode, MobileNet and UNet-style conv blocks, dropout, in-place ops, a mutated buffer,
no_grad inference, dynamic batch, graph breaks): outputs, input and parameter gradients and
buffers match, and the expected ops ran fused. GPU cases (cuDNN, bf16) skip without CUDA."""

import os
import sys

import pytest
from compile_fidelity import (  # noqa: F401  (fresh: the autouse fixture)
    assert_fused, close, fidelity, fresh, model_fidelity, randomize, rnd,
)
from torch_util import assert_no_worse_than_eager, torch  # noqa: F401  (skips without dnngraph.torch)

import torch.nn as nn
import torch.nn.functional as F

import dnngraph.torch as dt
from dnngraph.torch.compile import _backend

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples"))
import torch_blocks  # noqa: E402  (the stock blocks)


# ---- stock models --------------------------------------------------------------------------


class MLP(nn.Module):
    def __init__(self, d=16, hidden=32):
        super().__init__()
        self.ln, self.fc1, self.fc2 = nn.LayerNorm(d), nn.Linear(d, hidden), nn.Linear(hidden, d)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(self.ln(x))))


def GPTBlock():
    return torch_blocks.TorchGPTBlock(32, 4, 128)


def test_mlp_layer_norm_gelu():
    e = model_fidelity(randomize(MLP()), rnd(2, 5, 16, grad=True))
    assert_fused(e, ["addmm", "gelu"], ("forward",))
    assert_fused(e, ["native_layer_norm_backward", "gelu_backward"], ("backward",))


def test_gpt_block():
    e = model_fidelity(randomize(GPTBlock()), rnd(2, 8, 32, grad=True))
    assert_fused(e, ["native_layer_norm", "addmm", "gelu"], ("forward",))
    assert_fused(e, ["native_layer_norm_backward", "gelu_backward"], ("backward",))


def test_vit_block_stock_encoder_layer():
    layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, activation="gelu",
                                       batch_first=True, norm_first=True)
    e = model_fidelity(randomize(layer), rnd(2, 6, 32, grad=True))
    assert_fused(e, ["native_layer_norm"], ("forward",))


def test_llama_block():
    block = torch_blocks.TorchLlamaBlock(32, 4, 2, 64, max_seq_len=16)
    e = model_fidelity(randomize(block), rnd(2, 8, 32, grad=True))
    assert_fused(e, ["rms_norm_pattern", "mm"], ("forward",))
    assert_fused(e, ["silu_backward"], ("backward",))


class Bottleneck(nn.Module):
    def __init__(self, c=8, mid=4):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(c, mid, 1, bias=False), nn.BatchNorm2d(mid)
        self.c2, self.b2 = nn.Conv2d(mid, mid, 3, padding=1, bias=False), nn.BatchNorm2d(mid)
        self.c3, self.b3 = nn.Conv2d(mid, c, 1, bias=False), nn.BatchNorm2d(c)

    def forward(self, x):
        h = F.relu(self.b1(self.c1(x)))
        h = F.relu(self.b2(self.c2(h)))
        return F.relu(x + self.b3(self.c3(h)))


@pytest.mark.parametrize("train", [False, True])
def test_resnet_bottleneck_batch_norm(train):
    m = randomize(Bottleneck()).train(train)
    x = rnd(2, 8, 6, 6, grad=True)
    e = model_fidelity(m, x)
    assert_fused(e, ["convolution"], ("forward",))
    with torch.no_grad():
        torch._dynamo.reset()
        e = model_fidelity(m, x.detach())
    if not train:
        # Inference: each batch norm unfolds to x * scale + shift: the whole block is one graph.
        (p,) = e.partitions
        assert p[2].count("aten.convolution.default") == 3, str(e)


def test_mobilenet_depthwise_separable():
    m = nn.Sequential(
        nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=False), nn.BatchNorm2d(8), nn.ReLU6(),
        nn.Conv2d(8, 16, 1, bias=False), nn.BatchNorm2d(16), nn.Hardswish(),
    )
    m = randomize(m).eval()
    e = model_fidelity(m, rnd(2, 8, 7, 7, grad=True))
    assert all(why for _, _, _, why in e.left_out)
    with torch.no_grad():
        torch._dynamo.reset()
        e = model_fidelity(m, rnd(2, 8, 7, 7))
    # The depthwise convolution, its unfolded batch norm and ReLU6, then the pointwise
    # convolution, its batch norm and hardswish, run as one graph.
    (p,) = e.partitions
    assert p[2].count("aten.convolution.default") == 2, str(e)
    assert "aten.hardtanh.default" in p[2] and "aten.hardswish.default" in p[2], str(e)


class UNetish(nn.Module):
    def __init__(self, c=4):
        super().__init__()
        self.down = nn.Conv2d(c, 2 * c, 3, stride=2, padding=1)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.fuse = nn.Conv2d(3 * c, c, 3, padding=1)

    def forward(self, x):
        h = F.silu(self.down(x))
        return F.relu(self.fuse(torch.cat([x, self.up(h)], dim=1)))


def test_unet_conv_upsample_cat():
    e = model_fidelity(randomize(UNetish()), rnd(2, 4, 8, 8, grad=True))
    assert_fused(e, ["convolution"], ("forward",))
    assert_fused(e, ["convolution_backward"], ("backward",))


def test_dropout_train_mode():
    m = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Dropout(0.3), nn.Linear(32, 16))
    x = rnd(4, 16, grad=True)
    # Same random stream for both runs: the dropout mask is drawn by ATen in both.
    torch.manual_seed(1)
    import copy

    ref = copy.deepcopy(m)
    out = ref(x)
    torch.manual_seed(1)
    got = torch.compile(m, backend="dnngraph", options={"inner": "eager"})(x)
    close(got, out, torch.float32, 4.0, "output")
    e = dt.explain(m, x)
    rows = [why for _, _, op, why in e.left_out if "dropout" in op or "bernoulli" in op]
    assert rows and all(rows), str(e)


class InPlace(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        h = self.fc(x).relu_()
        y = h * 1.0
        y.add_(x, alpha=0.5)
        y.mul_(2.0)
        return y


def test_in_place_ops():
    e = model_fidelity(randomize(InPlace()), rnd(4, 16, grad=True))
    assert_fused(e, ["addmm", "relu"], ("forward",))


class Counter(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)
        self.register_buffer("ema", torch.zeros(16))

    def forward(self, x):
        h = F.gelu(self.fc(x))
        with torch.no_grad():
            self.ema.mul_(0.9).add_(h.mean(0), alpha=0.1)
        return h * 2.0 + self.ema


def test_mutated_buffer():
    m = randomize(Counter())
    e = model_fidelity(m, rnd(4, 16, grad=True))
    assert_fused(e, ["addmm", "gelu"], ("forward",))


def test_no_grad_inference():
    m = randomize(GPTBlock())
    x = rnd(2, 8, 32)
    with torch.no_grad():
        e = model_fidelity(m, x)
    assert [r for r in e.reports if r.graph.startswith("inference")]
    assert_fused(e, ["native_layer_norm", "addmm", "gelu"], ("inference",))


def test_dynamic_batch():
    m = randomize(MLP())
    compiled = torch.compile(m, backend="dnngraph", options={"inner": "eager"}, dynamic=True)
    for batch in (3, 5):
        x = rnd(batch, 16, grad=True)
        xr = x.detach().clone().requires_grad_(True)
        out, ref = compiled(x), m(xr)
        close(out, ref, torch.float32, 4.0, f"batch {batch}")
        out.sum().backward()
        ref.sum().backward()
        close(x.grad, xr.grad, torch.float32, 16.0, f"batch {batch} gradient")


def test_graph_breaks_print_and_item():
    lin = randomize(nn.Linear(16, 16))

    def fn(x):
        h = F.gelu(lin(x))
        print("graph break")
        s = h.sum().item()
        return torch.relu(lin(h)) * (1.0 + abs(s) * 1e-3)

    e = fidelity(fn, rnd(4, 16, grad=True), fused=["addmm", "gelu"], scale=4.0)
    assert len([r for r in e.reports if r.graph.startswith("forward")]) >= 2


# ---- GPU (cuDNN): skipped without CUDA; what the mapping added for the CPU, checked there ----

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def _gpu_fidelity(model, x, fused=None, blocks=True):
    """bf16 on the GPU (inner compiler: eager): outputs and gradients against eager; the ops
    in ``fused`` must have run in a fused graph (cuDNN's support check took them)."""
    import copy

    ref, exact = copy.deepcopy(model), copy.deepcopy(model).double()
    xr = x.detach().clone().requires_grad_(True)
    x64 = x.detach().double().requires_grad_(True)
    out = ref(xr)
    up = torch.rand_like(out) + 0.5
    (out.float() * up).sum().backward()
    out64 = exact(x64)
    (out64 * up.double()).sum().backward()
    compiled = torch.compile(model, backend="dnngraph", options={"inner": "eager", "blocks": blocks})
    with _backend.collect_reports() as reports:
        got = compiled(x)
        (got.float() * up).sum().backward()
    # bf16: both against float64 (a ReLU's mask flips on a few elements in either).
    assert_no_worse_than_eager(got, out, out64, "output")
    assert_no_worse_than_eager(x.grad, xr.grad, x64.grad, "input gradient")
    for (n, p), (_, pr), (_, p64) in zip(model.named_parameters(), ref.named_parameters(),
                                         exact.named_parameters()):
        assert p.grad.dtype == pr.grad.dtype, f"gradient of {n}: dtype {p.grad.dtype}"
        assert_no_worse_than_eager(p.grad, pr.grad, p64.grad, f"gradient of {n}")
    e = dt.compile.Explanation(list(reports))
    assert_fused(e, fused or [], ("forward",))
    return e


@needs_cuda
@pytest.mark.parametrize("groups", [1, 4, 32])
def test_gpu_grouped_and_depthwise_conv_bf16(groups):
    m = nn.Sequential(nn.Conv2d(32, 64, 3, padding=1, groups=groups), nn.ReLU())
    m = m.to("cuda", torch.bfloat16).to(memory_format=torch.channels_last)
    x = rnd(4, 32, 16, 16, dtype=torch.bfloat16).to("cuda")
    x = x.contiguous(memory_format=torch.channels_last).requires_grad_(True)
    e = _gpu_fidelity(m, x)
    print(e)  # whether cuDNN took the grouped convolution, and why not


@needs_cuda
def test_gpu_relu_backward_maximum_and_casts_bf16():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(64, 64), nn.Linear(64, 64)

        def forward(self, x):
            h = torch.relu(self.a(x))
            h = torch.maximum(h, self.b(x) * 0.5)
            return h.float().to(torch.bfloat16) * 2.0

    m = M().to("cuda", torch.bfloat16)
    e = _gpu_fidelity(m, rnd(32, 64, dtype=torch.bfloat16).to("cuda").requires_grad_(True),
                      fused=["addmm"])
    print(e)


@needs_cuda
def test_gpu_llama_block_bf16_still_fuses():
    block = torch_blocks.TorchLlamaBlock(128, 4, 2, 256, max_seq_len=64).to("cuda", torch.bfloat16)
    x = rnd(2, 64, 128, dtype=torch.bfloat16).to("cuda").requires_grad_(True)
    e = _gpu_fidelity(block, x)
    assert e.partitions, str(e)


class MHA(nn.Module):
    """Stock nn.MultiheadAttention returning its weights: the explicit bmm-softmax-bmm path."""

    def __init__(self, d=32, heads=4):
        super().__init__()
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)

    def forward(self, x):
        o, w = self.attn(x, x, x, need_weights=True)
        return o + w.sum(-1, keepdim=True)


def test_multihead_attention_with_weights():
    e = model_fidelity(randomize(MHA()), rnd(2, 6, 32, grad=True))
    assert_fused(e, ["_softmax"], ("forward",))
    assert_fused(e, ["_softmax_backward_data"], ("backward",))


@needs_cuda
def test_gpu_mobilenet_block_and_softmax_bf16():
    m = nn.Sequential(
        nn.Conv2d(32, 32, 3, padding=1, groups=32, bias=False), nn.BatchNorm2d(32), nn.ReLU6(),
        nn.Conv2d(32, 64, 1, bias=False), nn.BatchNorm2d(64), nn.Hardswish(),
    )
    m = randomize(m).eval().to("cuda", torch.bfloat16).to(memory_format=torch.channels_last)
    x = rnd(4, 32, 16, 16, dtype=torch.bfloat16).to("cuda")
    x = x.contiguous(memory_format=torch.channels_last).requires_grad_(True)
    print(_gpu_fidelity(m, x))

    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(64, 32)

        def forward(self, h):
            return torch.softmax(self.fc(h).clamp(-2.0, 2.0), dim=-1) * 2.0 - 1.0

    head = Head().to("cuda", torch.bfloat16)
    print(_gpu_fidelity(head, rnd(16, 64, dtype=torch.bfloat16).to("cuda").requires_grad_(True)))


# ---- convolution_backward: one node per gradient, each fused where its neighbours allow -----


def _pieces(e):
    """{piece label: [partition index or None, ...]} over the backward graphs."""
    out = {}
    for r in e.reports:
        if not r.graph.startswith("backward"):
            continue
        for d in r.decisions:
            if d.piece:
                out.setdefault(d.piece, []).append(d.partition)
    return out


def _decisions(e, piece):
    return [d for r in e.reports for d in r.decisions if d.piece == piece]


def _assert_pieces(e, fused, absent=(), count=None):
    pieces = _pieces(e)
    for label in fused:
        got = pieces.get(f"convolution_backward.{label}")
        assert got and all(p is not None for p in got), f"{label}: {got}\n{e}"
        if count is not None:
            assert len(got) == count, f"{label}: {got}\n{e}"
    for label in absent:
        assert f"convolution_backward.{label}" not in pieces, f"{label}\n{e}"
    assert not any("splits the ops" in row[3] for row in e.left_out), str(e)


class ConvChain(nn.Module):
    """conv -> ReLU -> conv -> ReLU: each convolution's incoming gradient is a ReLU gradient
    (a mapped op), so dgrad, wgrad and the bias sum join it."""

    def __init__(self, bias=True, groups=1, stride=1, padding=1, dilation=1, c=4):
        super().__init__()
        self.c1 = nn.Conv2d(c, 2 * c, 3, padding=1, bias=bias, groups=groups)
        self.c2 = nn.Conv2d(2 * c, c, 3, stride=stride, padding=padding, dilation=dilation,
                            bias=bias, groups=groups)

    def forward(self, x):
        return F.relu(self.c2(F.relu(self.c1(x))))


@pytest.mark.parametrize("kw", [
    dict(), dict(bias=False), dict(groups=2), dict(groups=4, c=4),
    dict(stride=2, padding=2, dilation=2), dict(stride=(2, 1), padding=0),
], ids=["bias", "no_bias", "grouped", "depthwise", "strided_dilated", "unpadded"])
def test_conv_backward_pieces_fuse(kw):
    m = randomize(ConvChain(**kw))
    x = rnd(2, 4, 7, 7, grad=True)
    e = model_fidelity(m, x)
    bias = kw.get("bias", True)
    _assert_pieces(e, ["grad_input", "grad_weight"] + (["grad_bias"] if bias else []),
                   absent=[] if bias else ["grad_bias"], count=2)


def test_conv_backward_pieces_channels_last():
    m = randomize(ConvChain()).to(memory_format=torch.channels_last)
    x = rnd(2, 4, 6, 6).contiguous(memory_format=torch.channels_last).requires_grad_(True)
    e = model_fidelity(m, x)
    _assert_pieces(e, ["grad_input", "grad_weight", "grad_bias"], count=2)


def test_conv_backward_output_mask_variants():
    # The input needs no gradient and the second convolution's weight is frozen: the first
    # convolution makes no grad_input piece, the second no grad_weight piece.
    m = randomize(ConvChain())
    m.c2.weight.requires_grad_(False)
    x = rnd(2, 4, 6, 6)
    e = fidelity(m, x)
    pieces = _pieces(e)
    assert len(pieces["convolution_backward.grad_input"]) == 1, str(e)
    assert len(pieces["convolution_backward.grad_weight"]) == 1, str(e)
    assert len(pieces["convolution_backward.grad_bias"]) == 2, str(e)
    _assert_pieces(e, ["grad_input", "grad_weight", "grad_bias"])


class BasicBlock(nn.Module):
    def __init__(self, c=8):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        self.c2, self.b2 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)

    def forward(self, x):
        h = F.relu(self.b1(self.c1(x)))
        return F.relu(x + self.b2(self.c2(h)))


@pytest.mark.parametrize("block", ["basic", "bottleneck"])
def test_resnet_training_conv_backward_pieces(block):
    # Each convolution's incoming gradient comes from the batch-norm backward (left in ATen):
    # dgrad fuses with what reads it (the ReLU gradient before it, the residual add); wgrad,
    # with no mapped neighbour, stays in ATen as one kernel, with that reason.
    m = randomize(BasicBlock() if block == "basic" else Bottleneck()).train()
    e = model_fidelity(m, rnd(2, 8, 6, 6, grad=True))
    convs = 2 if block == "basic" else 3
    _assert_pieces(e, ["grad_input"], absent=["grad_bias"], count=convs)
    wgrad = _decisions(e, "convolution_backward.grad_weight")
    assert len(wgrad) == convs, str(e)
    assert all(d.partition is None and "single op" in d.reason for d in wgrad), str(e)
    assert "convolution_backward.grad_input" in str(e)


def test_resnet_block_without_batch_norm_fuses_every_piece():
    # A residual block of convolutions with bias (no batch norm: examples/torch_blocks.py's stock
    # basic block): dgrad, wgrad and the bias sums of both convolutions and the residual
    # gradient are one backward graph. (The ATen-level partitions: the block rewrite, which
    # makes this block one dnngraph op, is off here; test_torch_compile_blocks.py tests it.)
    block = torch_blocks.BasicBlock(8, ours=False)
    e = model_fidelity(randomize(block), rnd(2, 8, 6, 6, grad=True), blocks=False)
    _assert_pieces(e, ["grad_input", "grad_weight", "grad_bias"], count=2)
    (bw,) = [p for p in e.partitions if p[0].startswith("backward")]
    names = {d.node for d in _decisions(e, "convolution_backward.grad_input")
             + _decisions(e, "convolution_backward.grad_weight")
             + _decisions(e, "convolution_backward.grad_bias")}
    assert len(names) == 6 and names <= set(bw[1]), str(e)


@needs_cuda
@pytest.mark.parametrize("block", ["basic", "bottleneck", "no_batch_norm"])
def test_gpu_resnet_training_conv_backward_pieces_bf16(block):
    # cuDNN's support check decides which pieces fuse: at least one does, and every piece is
    # either in a fused graph or left out with a reason (printed). The engine takes one product
    # per chain, so the relu backward between the two convolutions' gradients may be split
    # from one of them (and stay in ATen).
    make = {"basic": lambda: BasicBlock(64), "bottleneck": lambda: Bottleneck(64, 16),
            "no_batch_norm": lambda: torch_blocks.BasicBlock(64, ours=False)}[block]
    m = randomize(make()).train().to("cuda", torch.bfloat16)
    m = m.to(memory_format=torch.channels_last)
    x = rnd(8, 64, 16, 16, dtype=torch.bfloat16).to("cuda")
    x = x.contiguous(memory_format=torch.channels_last).requires_grad_(True)
    e = _gpu_fidelity(m, x, blocks=False)  # the pieces: the block rewrite off
    print(e)
    pieces = [d for r in e.reports for d in r.decisions if d.piece]
    assert pieces, str(e)
    assert all(d.partition is not None or d.reason for d in pieces), str(e)
    assert any(d.partition is not None for d in pieces), str(e)


@pytest.mark.parametrize("dim", [1, 3])
def test_conv_backward_pieces_1d_3d_and_transposed(dim):
    # The bias piece sums every dim but the channels (1-D and 3-D too); a transposed
    # convolution (not mapped) is split as well, its dgrad and wgrad pieces staying in ATen.
    conv, convt = (nn.Conv1d, nn.ConvTranspose1d) if dim == 1 else (nn.Conv3d, nn.ConvTranspose3d)
    m = nn.Sequential(conv(3, 4, 3, padding=1), nn.ReLU(), convt(4, 3, 2, stride=2), nn.ReLU())
    x = rnd(2, 3, *([6] * dim), grad=True)
    e = model_fidelity(randomize(m), x)
    pieces = _pieces(e)
    assert len(pieces["convolution_backward.grad_bias"]) == 2, str(e)
    for piece in ("grad_input", "grad_weight"):
        ds = _decisions(e, f"convolution_backward.{piece}")
        assert len(ds) == 2, str(e)
        assert [d.reason for d in ds if d.partition is None] == ["transposed convolution"], str(e)
    assert not any("splits the ops" in row[3] for row in e.left_out), str(e)
