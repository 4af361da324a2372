"""Inputs that do not start on a 16-byte boundary (views such as x[..., 1:] in bf16): torch takes
them, and so does every dnngraph op, bound through an aligned copy (cuDNN's descriptors declare
16-byte alignment and execute refuses less), on the CPU and on a GPU alike."""

import pytest

from torch_util import DEVICES, assert_close, rand, ref_dtype, torch

import dnngraph.torch as dt  # noqa: F401
from dnngraph.torch import functional as F

TF = torch.nn.functional
ops = torch.ops.dnngraph


def shifted(*shape, dtype, device, grad=False):
    """A tensor of `shape` that starts one element into its storage (2 bytes for bf16)."""
    base = rand(*shape[:-1], shape[-1] + 1, dtype=dtype, device=device)
    t = base[..., 1:]
    assert t.data_ptr() % 16 != 0
    return t.detach().requires_grad_(grad) if grad else t


def detached(*ts, rt):
    return [t.detach().to(rt).requires_grad_() for t in ts]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_linear_and_layer_norm_of_misaligned_views(device, dtype):
    x = shifted(3, 5, 16, dtype=dtype, device=device)
    w, b = rand(8, 16, dtype=dtype, device=device), rand(8, dtype=dtype, device=device)
    rt = ref_dtype(dtype)
    assert_close(F.linear(x, w, b, "relu"), TF.relu(TF.linear(x.to(rt), w.to(rt), b.to(rt))), dtype, device)
    g, bb = rand(16, dtype=dtype, device=device), rand(16, dtype=dtype, device=device)
    assert_close(F.layer_norm(x, [16], g, bb), TF.layer_norm(x.to(rt), [16], g.to(rt), bb.to(rt)), dtype, device)


@pytest.mark.parametrize("device", DEVICES)
def test_training_through_misaligned_views(device):
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    rt = ref_dtype(dtype)
    x = shifted(2, 4, 16, dtype=dtype, device=device, grad=True)
    w = rand(16, 16, dtype=dtype, device=device, grad=True)
    y = F.linear(x, w, None, "gelu")
    dy = rand(*y.shape, dtype=dtype, device=device)
    y.backward(dy)
    xr, wr = detached(x, w, rt=rt)
    yr = TF.gelu(TF.linear(xr, wr))
    yr.backward(dy.to(rt))
    assert_close(y, yr, dtype, device)
    assert_close(x.grad, xr.grad, dtype, device, scale=4)
    assert_close(w.grad, wr.grad, dtype, device, scale=4)


@pytest.mark.parametrize("device", DEVICES)
def test_attention_and_convolution_of_misaligned_views(device):
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    rt = ref_dtype(dtype)
    q = shifted(1, 2, 8, 16, dtype=dtype, device=device)
    k, v = rand(1, 2, 8, 16, dtype=dtype, device=device), rand(1, 2, 8, 16, dtype=dtype, device=device)
    assert_close(F.scaled_dot_product_attention(q, k, v, is_causal=True),
                 TF.scaled_dot_product_attention(q.to(rt), k.to(rt), v.to(rt), is_causal=True), dtype, device)
    x = shifted(2, 8, 6, 6, dtype=dtype, device=device).contiguous(memory_format=torch.channels_last)
    x = x.as_strided(x.shape, x.stride(), x.storage_offset())  # still dense
    xs = torch.empty(x.numel() + 1, dtype=dtype, device=device)[1:].view_as(x.contiguous()).copy_(x)
    assert xs.data_ptr() % 16 != 0
    w, b = rand(8, 8, 3, 3, dtype=dtype, device=device, scale=0.2), rand(8, dtype=dtype, device=device)
    assert_close(F.conv2d_bias_act(xs, w, b, 1, 1, 1, 1, "relu"),
                 TF.relu(TF.conv2d(xs.to(rt), w.to(rt), b.to(rt), 1, 1)), dtype, device, scale=4)


@pytest.mark.parametrize("device", DEVICES)
def test_out_into_a_misaligned_view(device):
    """An out= tensor that starts off the boundary is written, and only where it lies."""
    x, w = rand(4, 16, device=device), rand(8, 16, device=device)
    store = torch.full((4 * 8 + 1,), 7.0, device=device)
    out = store[1:].view(4, 8)
    ops.linear_act.out(x, w, None, "none", out=out)
    assert_close(out, TF.linear(x, w), torch.float32, device)
    assert store[0].item() == 7.0


@pytest.mark.parametrize("device", DEVICES)
def test_a_misaligned_tensor_runs_the_graph_its_layout_built(device):
    """The graph cache keys on layout, not on where a tensor starts: a misaligned tensor of an
    aligned one's dims and strides (bound through an aligned copy) runs the graph already built."""
    x, w = rand(4, 16, device=device), rand(8, 16, device=device)
    F.linear(x, w, None, "relu")
    before = dt.cache_info()
    xs = torch.empty(4 * 16 + 1, device=device)[1:].view(4, 16).copy_(x)
    assert xs.data_ptr() % 16 != 0 and xs.stride() == x.stride()
    assert_close(F.linear(xs, w, None, "relu"), TF.relu(TF.linear(x, w)), torch.float32, device)
    after = dt.cache_info()
    assert after["size"] == before["size"] and after["misses"] == before["misses"]
    assert after["hits"] > before["hits"]
