"""dnngraph.torch across processes and devices: a DistributedDataParallel training of the
example blocks (examples/torch_ddp.py) and a fully-sharded (FSDP2) training of the transformer
block (examples/torch_fsdp.py) over 2 processes whose losses equal the single-process run, with
gloo on the CPU (runs in CI) and with NCCL on 2 GPUs; and every op on cuda:0 and cuda:1 in one
process (a handle and a plan per device, never mixed up). The GPU tests skip, with the reason,
on machines with fewer than 2 GPUs."""

import os
import sys

import pytest

from torch_util import assert_close, needs_2gpus, rand, torch

import dnngraph.torch as dt
from dnngraph.torch import functional as F

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "examples"))

import torch_blocks  # noqa: E402
import torch_ddp  # noqa: E402
import torch_fsdp  # noqa: E402

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
    """On a GPU the transformer block trains in bf16 with one head of 64 (torch_ddp.config: the
    shapes cuDNN's fused attention and its backward take), the ResNet block in fp32; the
    single GPU trains the same block in the same dtype."""
    dtype = torch_ddp.config(kind, "cuda:0")[0]
    ref = torch_ddp.single_process(kind, "cuda:0", steps=3)
    got = torch_ddp.ddp_losses(kind, "nccl", world=2, steps=3)
    print(f"\nDDP nccl x2 {kind} {dtype}: losses {got}, single GPU {ref}")  # two-gpu-check.sh
    # cuDNN may use TF32 and other summation orders: the GPU tolerance, and the decrease over
    # the steps equal to the single GPU's (a gradient not averaged over the ranks doubles it).
    why = torch_ddp.compare_losses(got, ref, "nccl", bf16=dtype == torch.bfloat16)
    assert why is None, why


def _fully_shard_available():
    try:
        from torch.distributed.fsdp import fully_shard  # noqa: F401
    except ImportError:
        return False
    return True


needs_fsdp2 = pytest.mark.skipif(not dist.is_available() or not _fully_shard_available(),
                                 reason="torch.distributed.fsdp.fully_shard is not available")


def _check_ranks(run, devices):
    """Each rank ran on its own device, held half of every parameter, computed with dnngraph
    (graphs in its own cache, no fallback)."""
    total = sum(p.numel() for p in torch_blocks.pair("transformer", "cpu")[0].parameters())
    assert [r["rank"] for r in run["ranks"]] == list(range(len(devices)))
    for r, dev in zip(run["ranks"], devices):
        assert r["device"] == dev and r["output_devices"] == [dev], r
        assert r["local_params"] * len(devices) == total, r
        assert r["cached_graphs"] > 0 and r["fallbacks"] == 0, r


@needs_fsdp2
@pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(),
                    reason="torch.distributed with gloo is not available")
@pytest.mark.parametrize("bf16", [False, True], ids=["fp32", "bf16"])
def test_fsdp2_gloo_two_processes_match_single_process(bf16):
    """fp32: equal to the float32 single process at fp32 tolerance; bf16 (bf16 compute, fp32
    parameters and reduction, as on the GPU) to it at bf16 tolerance."""
    ref = torch_fsdp.single_process("cpu", steps=3)
    run = torch_fsdp.fsdp_run("gloo", world=2, steps=3, bf16=bf16)
    got = run["losses"]
    assert len(got) == 3 and got[-1] < got[0]  # it learns
    if not bf16:
        _close(got, ref)
    assert torch_ddp.compare_losses(got, ref, "gloo", bf16) is None, (got, ref)
    _check_ranks(run, ["cpu", "cpu"])


def test_fsdp_reference_twin_equals_our_block_on_cpu():
    """The GPU test's reference (the PyTorch twin) trains as our block does."""
    _close(torch_fsdp.single_process("cpu", steps=3, twin=True),
           torch_fsdp.single_process("cpu", steps=3))


def test_compare_losses_catches_a_wrong_training():
    """The comparison the examples and the GPU tests use refuses a loss off by more than the
    tolerance and a training that learns twice as fast (a gradient not averaged)."""
    ref = [2.036288, 2.028149, 2.020124]
    assert torch_ddp.compare_losses(ref, ref, "gloo", False) is None
    assert "differ" in torch_ddp.compare_losses([2.036288, 2.028149, 2.019], ref, "gloo", False)
    twice = [ref[0], ref[0] - 2 * (ref[0] - ref[1]), ref[0] - 2 * (ref[0] - ref[2])]
    assert torch_ddp.compare_losses(twice, ref, "nccl", True) is not None


@needs_2gpus
@needs_fsdp2
@pytest.mark.skipif(not dist.is_available() or not dist.is_nccl_available(),
                    reason="torch.distributed with NCCL is not available")
def test_fsdp2_nccl_two_gpus_match_single_gpu():
    """bf16 compute with fp32 parameters and reduction (cuDNN's fused attention takes no fp32),
    the block with one head of 64; the reference: its PyTorch twin in fp32 on one GPU."""
    ref = torch_fsdp.single_process("cuda:0", steps=3, twin=True)
    run = torch_fsdp.fsdp_run("nccl", world=2, steps=3, bf16=True)
    print(f"\nFSDP2 nccl x2 bf16: losses {run['losses']}, single GPU fp32 {ref}, ranks "
          f"{run['ranks']}")  # scripts/two-gpu-check.sh shows it
    why = torch_ddp.compare_losses(run["losses"], ref, "nccl", bf16=True)
    assert why is None, f"{why}: fsdp {run['losses']} single {ref}"
    _check_ranks(run, ["cuda:0", "cuda:1"])


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
