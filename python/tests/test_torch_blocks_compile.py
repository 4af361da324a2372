"""torch.compile of the blocks built from dnngraph.torch ops (examples/torch_blocks.py): no
graph break (torch._dynamo.explain), fullgraph forward+backward equal to eager, sdpa's Meta
layout equal to the real one (no layout conversion around it), and on a GPU
mode="reduce-overhead" capturing the ops in CUDA graphs."""

import os
import sys

import pytest

from torch_util import assert_close, assert_module_close, needs_cuda, torch

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "examples"))
import torch_blocks  # noqa: E402

from dnngraph.torch import functional as F  # noqa: E402

KINDS = ["transformer", "llama", "resnet"]


@pytest.mark.parametrize("kind", KINDS)
def test_blocks_have_no_graph_break(kind):
    ours, _ = torch_blocks.pair(kind, "cpu")
    x, _ = torch_blocks.batch(kind, "cpu")
    torch._dynamo.reset()
    explanation = torch._dynamo.explain(ours)(x)
    assert explanation.graph_break_count == 0, explanation.break_reasons
    assert explanation.graph_count == 1


@pytest.mark.parametrize("kind", KINDS)
def test_blocks_compile_fullgraph_forward_backward(kind):
    ours, ref = torch_blocks.pair(kind, "cpu")
    x, _ = torch_blocks.batch(kind, "cpu")
    compiled = torch.compile(ours, fullgraph=True, backend="aot_eager")
    assert_module_close(compiled, ref, x)
    for (n, p), (_, pr) in zip(ours.named_parameters(), ref.named_parameters()):
        assert_close(p.grad, pr.grad, torch.float32, scale=20), n


def test_sdpa_meta_layout_matches_the_kernel():
    b, s, h, d = 2, 5, 3, 4
    qkv = torch.randn(b, s, 3 * h * d)
    q, k, v = (t.view(b, s, h, d).transpose(1, 2) for t in qkv.chunk(3, dim=-1))
    real = torch.ops.dnngraph.sdpa(q, k, v)
    fake = torch.ops.dnngraph.sdpa(*(t.to("meta") for t in (q, k, v)))
    for r, f in zip(real, fake):
        assert r.shape == f.shape and r.stride() == f.stride()
    # out is stored [B, S, H, D]: merging the heads back is a view.
    o = F.scaled_dot_product_attention(q, k, v)
    merged = o.transpose(1, 2).reshape(b, s, h * d)
    assert merged.data_ptr() == o.data_ptr() and merged.is_contiguous()


@needs_cuda
@pytest.mark.parametrize("kind", KINDS)
def test_reduce_overhead_captures_the_ops(kind, allow_aten_fallback):
    from torch._dynamo.utils import counters

    if kind != "resnet":  # the blocks are fp32: ATen runs their attention, captured too
        allow_aten_fallback("cuDNN has no fp32 attention: ATen's runs it")
    ours, ref = torch_blocks.pair(kind, "cuda")
    x, _ = torch_blocks.batch(kind, "cuda")
    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(ours, mode="reduce-overhead", fullgraph=True)
    for _ in range(3):  # a training loop as CUDA graph trees take it: fresh gradients each step
        ours.zero_grad(set_to_none=True)
        out = compiled(x)
        out.square().mean().backward()
    grads = {n: p.grad.clone() for n, p in ours.named_parameters()}
    assert not counters["inductor"]["cudagraph_skips"], dict(counters["inductor"])
    ref.zero_grad(set_to_none=True)
    ref(x).square().mean().backward()
    for n, p in ref.named_parameters():
        assert_close(grads[n], p.grad, torch.float32, "cuda", scale=20)
    with torch.no_grad():
        assert_close(compiled(x), ref(x), torch.float32, "cuda", scale=4)


@pytest.mark.parametrize("kind", KINDS)
def test_blocks_compile_dynamic_shapes(kind):
    """dynamic=True: the Meta kernels (the training ops' and the layout rules') take symbolic
    sizes; two sequence lengths / batch sizes run through one compiled graph."""
    ours, ref = torch_blocks.pair(kind, "cpu")
    torch._dynamo.reset()
    f = torch.compile(ours, dynamic=True, backend="aot_eager", fullgraph=True)
    for n in (3, 5):
        x = torch.randn(2, n, 64) if kind != "resnet" else torch.randn(n, 32, 6, 6).to(memory_format=torch.channels_last)
        xo, xr = x.clone().requires_grad_(), x.clone().requires_grad_()
        y, yr = f(xo), ref(xr)
        y.square().sum().backward()
        yr.square().sum().backward()
        assert_close(y, yr, torch.float32, scale=10)
        assert_close(xo.grad, xr.grad, torch.float32, scale=100)
