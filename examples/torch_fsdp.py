"""Fully-sharded training (FSDP2, ``torch.distributed.fsdp.fully_shard``) of the transformer
block built from dnngraph.torch modules (examples/torch_blocks.py): each process holds half of
every parameter, gathers them for its forward and backward, trains on its shard of the batch,
and the gradients are reduce-scattered (averaged) over the processes. The losses (averaged over
the processes) equal a single process's training of the plain block on the whole batch.

    python examples/torch_fsdp.py [--backend gloo|nccl] [--world 2] [--steps 3]
                                  [--precision fp32|bf16]

gloo runs on the CPU (the reference engine); nccl on one GPU per process (cuDNN). bf16 (the
default with nccl) computes in bfloat16 with float32 parameters and gradient reduction
(``MixedPrecisionPolicy``) and is compared with the float32 single process at bf16 tolerance.
On a GPU the block has one attention head of 64 (torch_ddp.config) and the reference is its
PyTorch twin (cuDNN's fused attention takes no float32).
"""

import argparse
import gc
import json
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_blocks  # noqa: E402
import torch_ddp  # noqa: E402

KIND = "transformer"


def single_process(device, steps, lr=0.05, twin=False):
    """The reference: the plain (unsharded) block of the same seed and sizes in float32, one
    process, the whole batch; twin: its PyTorch twin (torch's own ops), which a GPU needs for
    float32 attention."""
    ours, ref = torch_blocks.pair(KIND, device, **torch_ddp.config(KIND, device)[1])
    x, target = torch_blocks.batch(KIND, device)
    return torch_ddp.train(ref if twin else ours, x, target, steps, lr)


def shard(model, mesh, bf16):
    """One FSDP unit per sublayer with parameters (attention, each MLP linear), then the root
    (the two LayerNorms): the forward gathers each unit's parameters just before it runs."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if bf16 \
        else MixedPrecisionPolicy()
    for sub in (model.attn, model.fc1, model.fc2):
        fully_shard(sub, mesh=mesh, mp_policy=policy)
    fully_shard(model, mesh=mesh, mp_policy=policy)
    return model


def _train(model, xs, ts, steps, lr, world):
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    losses, devices = [], set()
    for _ in range(steps):
        opt.zero_grad()
        out = model(xs)
        devices.add(str(out.device))
        loss = torch.nn.functional.mse_loss(out.float(), ts)
        loss.backward()  # the gradients are reduce-scattered and averaged over the ranks
        opt.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean)  # equal shards: the mean of the shards' means is the batch's
        losses.append(mean.item() / world)
    return losses, sorted(devices), opt


def _worker(rank, world, backend, port, steps, result_path, lr, bf16):
    torch_ddp.join_group(rank, world, backend, port)
    model = opt = None
    try:
        import dnngraph.torch as dt  # the ops, in this process

        from torch.distributed.device_mesh import init_device_mesh

        device = f"cuda:{rank}" if backend == "nccl" else "cpu"
        mesh = init_device_mesh("cuda" if backend == "nccl" else "cpu", (world,))
        # Same seed and sizes as the reference: the same parameters on every rank.
        model, _ = torch_blocks.pair(KIND, device, **torch_ddp.config(KIND, device)[1])
        local = sum(p.to_local().numel() for p in shard(model, mesh, bf16).parameters())
        xs, ts = torch_ddp.rank_batch(KIND, device, rank, world)
        losses, devices, opt = _train(model, xs, ts, steps, lr, world)
        info = dict(rank=rank, device=device, output_devices=devices, local_params=local,
                    cached_graphs=dt.cache_info()["size"], fallbacks=dt.fallback_count())
        ranks = [None] * world
        dist.all_gather_object(ranks, info)
        if rank == 0:
            with open(result_path, "w") as f:
                json.dump(dict(losses=losses, ranks=ranks), f)
        dist.barrier()  # every rank done before any tears the group down
    finally:
        # Drop the model and optimizer (FSDP's state holds the process group) before destroying
        # the group, as examples/torch_ddp.py does for DDP.
        opt = model = None
        gc.collect()
        dist.destroy_process_group()


def fsdp_run(backend="gloo", world=2, steps=3, lr=0.05, bf16=False):
    """An FSDP2 training over `world` spawned processes: {"losses": [...], "ranks": [per-rank
    dict: device, the devices of the outputs, parameters held, graphs cached, fallbacks]}."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "fsdp.json")
        mp.spawn(_worker, args=(world, backend, torch_ddp.free_port(), steps, path, lr, bf16),
                 nprocs=world, join=True)
        with open(path) as f:
            return json.load(f)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", default="gloo", choices=["gloo", "nccl"])
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--precision", choices=["fp32", "bf16"],
                   help="the forward and backward's dtype (default: fp32 with gloo, bf16 with "
                   "nccl)")
    args = p.parse_args()
    bf16 = (args.precision or ("bf16" if args.backend == "nccl" else "fp32")) == "bf16"
    device = "cuda:0" if args.backend == "nccl" else "cpu"
    twin = args.backend == "nccl"
    ref = single_process(device, args.steps, twin=twin)
    run = fsdp_run(args.backend, args.world, args.steps, bf16=bf16)
    got = run["losses"]
    mode = "bf16 compute, fp32 parameters" if bf16 else "fp32"
    print(f"{KIND} FSDP2 {args.backend} x{args.world} ({mode}): losses {[f'{v:.6f}' for v in got]}")
    print(f"{KIND} single process, {'PyTorch twin' if twin else 'same block'} in fp32: losses "
          f"{[f'{v:.6f}' for v in ref]}")
    for r in run["ranks"]:
        print(f"  rank {r['rank']}: {r['device']}, outputs on {r['output_devices']}, "
              f"{r['local_params']} parameters held, {r['cached_graphs']} graphs cached, "
              f"{r['fallbacks']} fallbacks")
    why = torch_ddp.compare_losses(got, ref, args.backend, bf16)
    print("MATCH" if why is None else f"DIFFER: {why}")
    return 0 if why is None else 1


if __name__ == "__main__":
    sys.exit(main())
