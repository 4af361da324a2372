"""dnngraph.torch across processes and devices: a DistributedDataParallel training of the
example transformer block (examples/torch_ddp.py) over 2 processes whose losses equal the
single-process run, with gloo on the CPU (runs in CI) and with NCCL on 2 GPUs; and every op on
cuda:0 and cuda:1 in one process (a handle and a plan per device, never mixed up). The GPU
tests skip, with the reason, on machines with fewer than 2 GPUs."""

import os
import sys

import pytest

from torch_util import assert_close, needs_2gpus, rand, torch

import dnngraph.torch as dt
from dnngraph.torch import functional as F

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "examples"))

import torch_ddp  # noqa: E402

TF = torch.nn.functional
dist = torch.distributed


def _close(got, ref):
    torch.testing.assert_close(torch.tensor(got), torch.tensor(ref), atol=1e-5, rtol=1e-4)


@pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(),
                    reason="torch.distributed with gloo is not available")
def test_ddp_gloo_two_processes_match_single_process():
    ref = torch_ddp.single_process("transformer", "cpu", steps=3)
    got = torch_ddp.ddp_losses("transformer", "gloo", world=2, steps=3)
    assert len(got) == 3 and got[-1] < got[0]  # it learns
    _close(got, ref)


@needs_2gpus
@pytest.mark.skipif(not dist.is_available() or not dist.is_nccl_available(),
                    reason="torch.distributed with NCCL is not available")
@pytest.mark.parametrize("kind", ["transformer", "resnet"])
def test_ddp_nccl_two_gpus_match_single_gpu(kind):
    ref = torch_ddp.single_process(kind, "cuda:0", steps=3)
    got = torch_ddp.ddp_losses(kind, "nccl", world=2, steps=3)
    _close(got, ref)


@needs_2gpus
def test_every_op_on_two_devices_one_process():
    """Each op alternates between cuda:0 and cuda:1 (the second on a side stream): results on
    the inputs' device and equal to torch's, one cached graph per (op, device)."""
    dt.clear_cache()
    t = torch.float32

    def run(dev):
        x, w, b = rand(4, 8, device=dev), rand(8, device=dev), rand(8, device=dev)
        assert_close(F.layer_norm(x, [8], w, b), TF.layer_norm(x, [8], w, b), t, dev)
        assert_close(F.rms_norm(x, [8], w, 1e-6), TF.rms_norm(x, [8], w, 1e-6), t, dev)
        W = rand(6, 8, device=dev)
        assert_close(F.linear(x, W, None, "relu"), TF.relu(TF.linear(x, W)), t, dev)
        a3, b3 = rand(2, 4, 8, device=dev), rand(2, 8, 5, device=dev)
        assert_close(F.matmul_epilogue(a3, b3, None, 0.5, "gelu"), TF.gelu(0.5 * a3 @ b3), t, dev)
        xc, wc, bc = rand(1, 4, 6, 6, device=dev), rand(4, 4, 3, 3, device=dev), rand(4, device=dev)
        y = F.conv2d_bias_act(xc, wc, bc, 1, 1, 1, 1, "relu")
        assert y.device == torch.device(dev)
        assert_close(y, TF.relu(TF.conv2d(xc, wc, bc, 1, 1)), t, dev)
        q, k, v = (rand(1, 2, 16, 64, device=dev, dtype=torch.bfloat16) for _ in range(3))
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        ref = TF.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=True)
        assert_close(o, ref, torch.bfloat16, dev, scale=2)

    run("cuda:0")
    per_device = dt.cache_info()["size"]
    side = torch.cuda.Stream(device="cuda:1")
    with torch.cuda.stream(side):
        run("cuda:1")
    side.synchronize()
    assert dt.cache_info()["size"] == 2 * per_device  # no plan shared across devices
    run("cuda:0")  # back on cuda:0: its own graphs again (hits), its own handle
    assert dt.cache_info()["size"] == 2 * per_device
    torch.cuda.synchronize("cuda:0")
    torch.cuda.synchronize("cuda:1")
