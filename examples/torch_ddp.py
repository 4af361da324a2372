"""DistributedDataParallel training of a block built from dnngraph.torch ops
(examples/torch_blocks.py): each process trains on its shard of the batch, DDP averages the
gradients, and the losses (averaged over the processes) equal a single process's training on
the whole batch.

    python examples/torch_ddp.py [--kind transformer|resnet] [--backend gloo|nccl] [--world 2]
    python examples/torch_ddp.py --bench [--world 2] [--dim 1024 --heads 16 --hidden 4096
                                 --batch 16 --seq 1024] [--iters 30]

gloo runs on the CPU (the reference engine); nccl on one GPU per process (cuDNN), where the
transformer block trains in bf16 with one attention head of 64 (see config).
--bench (GPUs, NCCL) times a bf16 training step (forward, backward with DDP's gradient
all-reduce, SGD) of the transformer block at model size on each GPU, and the same step on one
GPU without DDP on the per-GPU share of the batch, and prints their ratio: the cost of data
parallelism per GPU (the target is at most 1.15).
"""

import argparse
import gc
import json
import os
import socket
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel
from torch.utils.benchmark import Timer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_blocks  # noqa: E402


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def config(kind, device):
    """(dtype, block sizes) of the training on `device`. On a GPU the transformer block computes
    in bf16 with one attention head of 64 (cuDNN's fused attention takes fp16/bf16, and its
    backward has no engine at the head dim of 16 of the CPU block); elsewhere float32 and the
    blocks' default sizes."""
    if kind == "transformer" and str(device).startswith("cuda"):
        return torch.bfloat16, dict(heads=1)
    return torch.float32, {}


def train(model, x, target, steps, lr, world=1):
    """SGD steps on the MSE loss (computed in float32); with world > 1, the loss of each step
    averaged over the processes (equal shards: the mean of the shards' means is the batch's)."""
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x).float(), target.float())
        loss.backward()  # under DDP: the gradients averaged over the ranks
        opt.step()
        mean = loss.detach().clone()
        if world > 1:
            dist.all_reduce(mean)
        losses.append(mean.item() / world)
    return losses


def single_process(kind, device, steps, lr=0.05, dtype=None):
    """The reference: one process, the whole batch (dtype: config's unless given)."""
    dtype = dtype or config(kind, device)[0]
    model, _ = torch_blocks.pair(kind, device, dtype, **config(kind, device)[1])
    x, target = torch_blocks.batch(kind, device, dtype)
    return train(model, x, target, steps, lr)


def join_group(rank, world, backend, port):
    """This process as rank `rank` of a `world`-process group on this machine."""
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    if backend == "nccl":
        torch.cuda.set_device(rank)  # before the group: NCCL binds each rank to its GPU
    dist.init_process_group(backend, rank=rank, world_size=world)


def rank_batch(kind, device, rank, world, dtype=torch.float32):
    """This rank's equal share of the reference batch: (inputs, targets)."""
    x, target = torch_blocks.batch(kind, device, dtype)
    assert x.shape[0] % world == 0, "the batch must split evenly over the processes"
    return x.chunk(world)[rank], target.chunk(world)[rank]


def _worker(rank, world, kind, backend, port, steps, result_path, lr, dtype):
    join_group(rank, world, backend, port)
    ddp = model = None
    try:
        import dnngraph.torch  # noqa: F401  (the ops, in this process)

        device = f"cuda:{rank}" if backend == "nccl" else "cpu"
        dtype = dtype or config(kind, device)[0]
        # Same seed: the same parameters on every rank.
        model, _ = torch_blocks.pair(kind, device, dtype, **config(kind, device)[1])
        ddp = DistributedDataParallel(model, device_ids=[rank] if backend == "nccl" else None)
        xs, ts = rank_batch(kind, device, rank, world, dtype)
        if kind == "resnet":
            xs = xs.contiguous(memory_format=torch.channels_last)
        losses = train(ddp, xs, ts, steps, lr, world)
        if rank == 0:
            with open(result_path, "w") as f:
                json.dump(losses, f)
        dist.barrier()  # every rank done before any tears the group down
    finally:
        # Drop DDP (its reducer holds the process group) before destroying the group. Left to
        # interpreter shutdown, gloo's process group can be destroyed with its threads still
        # running: SIGABRT, "terminate called without an active exception", in about 1 run of
        # 10 with torch 2.15 on CPU, also with a plain torch model; 0 of 140 runs after this.
        ddp = model = None
        gc.collect()
        dist.destroy_process_group()


def ddp_losses(kind, backend="gloo", world=2, steps=3, lr=0.05, dtype=None):
    """Losses of a DDP training over `world` spawned processes (dtype: config's unless
    given)."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "losses.json")
        mp.spawn(_worker, args=(world, kind, backend, free_port(), steps, path, lr, dtype),
                 nprocs=world, join=True)
        with open(path) as f:
            return json.load(f)


def loss_tolerance(backend, bf16=False):
    """(atol, rtol) of the loss comparison: float32 on the CPU is tight; cuDNN may use TF32 and
    other summation orders; bf16 compute is held to bf16's."""
    if bf16:
        return 2e-2, 2e-2
    return (1e-5, 1e-4) if backend == "gloo" else (5e-3, 5e-3)


def compare_losses(got, ref, backend, bf16=False):
    """None when the losses match and the distributed run learns as much as the reference (the
    decrease over the steps within 30%: a gradient scaled by the world size would double it);
    else what differs."""
    atol, rtol = loss_tolerance(backend, bf16)
    bad = [(i, a, b) for i, (a, b) in enumerate(zip(got, ref)) if abs(a - b) > atol + rtol * abs(b)]
    if len(got) != len(ref) or bad:
        return f"losses differ (step, distributed, single): {bad} (atol {atol}, rtol {rtol})"
    drop, ref_drop = got[0] - got[-1], ref[0] - ref[-1]
    if len(got) > 1 and not (ref_drop > 0 and abs(drop - ref_drop) <= 0.3 * ref_drop):
        return f"the loss decrease {drop:.6f} differs from the single process's {ref_drop:.6f}"
    return None


# The step-time comparison: the GPT block of bench/torch/blocks.py (gpt_d1024), bf16.
BENCH_SIZES = dict(dim=1024, heads=16, hidden=4096, batch=16, seq=1024)
TARGET_RATIO = 1.15


def _bench_model(sizes, device):
    torch.manual_seed(0)
    block = torch_blocks.TransformerBlock(sizes["dim"], sizes["heads"], sizes["hidden"], ours=True)
    return block.to(device, torch.bfloat16)


def _bench_batch(sizes, world, device):
    """The per-GPU share of the batch (the batch split over `world` GPUs)."""
    assert sizes["batch"] % world == 0, "the batch must split evenly over the GPUs"
    g = torch.Generator().manual_seed(1)
    shape = (sizes["batch"] // world, sizes["seq"], sizes["dim"])
    x, t = (torch.randn(*shape, generator=g).to(device, torch.bfloat16) for _ in range(2))
    return x, t


def step_ms(model, x, target, iters, warmup=5):
    """Median time of a training step (zero_grad, forward, MSE loss, backward, SGD step) in ms,
    between CUDA events on the current stream, each step waited for; and how many dnngraph ops
    fell back to ATen meanwhile (with the fallback policy "warn"; "error" raises instead)."""
    import dnngraph.torch as dt

    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    fallbacks = dt.fallback_count()

    def step():
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.mse_loss(model(x), target).backward()
        opt.step()

    for _ in range(warmup):  # graphs built and cached, allocator and NCCL warm
        step()
    # A fixed count (every rank runs the same steps: each one all-reduces), synchronized at both
    # ends; the mean per step.
    ms = Timer("step()", globals={"step": step}).timeit(iters).mean * 1e3
    return ms, dt.fallback_count() - fallbacks


def single_gpu_step_ms(sizes, world, iters, device="cuda:0"):
    """The step on one GPU, no DDP, on the per-GPU share of the batch: (ms, fallbacks)."""
    x, t = _bench_batch(sizes, world, device)
    return step_ms(_bench_model(sizes, device), x, t, iters)


def _bench_worker(rank, world, port, sizes, iters, result_path):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world,
                            device_id=torch.device("cuda", rank))
    ddp = None
    try:
        device = f"cuda:{rank}"
        ddp = DistributedDataParallel(_bench_model(sizes, device), device_ids=[rank],
                                      gradient_as_bucket_view=True)
        x, t = _bench_batch(sizes, world, device)
        results = [None] * world
        dist.all_gather_object(results, step_ms(ddp, x, t, iters))
        if rank == 0:
            with open(result_path, "w") as f:
                json.dump(results, f)
        dist.barrier()
    finally:
        ddp = None
        gc.collect()
        dist.destroy_process_group()


def ddp_step_ms(sizes, world, iters):
    """Each rank's (mean step time in ms, fallbacks) of the DDP training over `world` GPUs."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "times.json")
        mp.spawn(_bench_worker, args=(world, free_port(), sizes, iters, path), nprocs=world,
                 join=True)
        with open(path) as f:
            return [tuple(r) for r in json.load(f)]


def bench(sizes, world, iters):
    """Prints both step times and their ratio; 0 when the ratio meets the target."""
    single, single_fallbacks = single_gpu_step_ms(sizes, world, iters)
    per_rank = ddp_step_ms(sizes, world, iters)
    ratio = max(t for t, _ in per_rank) / single
    share = f"{sizes['batch'] // world}x{sizes['seq']}"
    print(f"transformer block d{sizes['dim']} h{sizes['heads']} ff{sizes['hidden']} bf16, batch "
          f"{sizes['batch']}x{sizes['seq']} over {world} GPUs ({share} per GPU), mean of {iters} "
          "steps (forward, backward, SGD):")
    print(f"  single GPU, batch {share}, no DDP: {single:.3f} ms")
    print(f"  DDP over {world} GPUs (NCCL), per GPU: " +
          ", ".join(f"rank {r} {t:.3f} ms" for r, (t, _) in enumerate(per_rank)))
    fallbacks = single_fallbacks + sum(f for _, f in per_rank)
    if fallbacks:
        print(f"  {fallbacks} op calls fell back to ATen (single GPU {single_fallbacks}, ranks "
              f"{[f for _, f in per_rank]}): those steps are not all dnngraph's")
    verdict = "within" if ratio <= TARGET_RATIO else "OVER"
    print(f"  ratio (slowest rank / single GPU): {ratio:.3f} ({verdict} the target {TARGET_RATIO})")
    return 0 if ratio <= TARGET_RATIO else 1


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kind", default="transformer", choices=["transformer", "resnet"])
    p.add_argument("--backend", default="gloo", choices=["gloo", "nccl"])
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--bench", action="store_true", help="time the DDP step on GPUs (NCCL)")
    for k, v in BENCH_SIZES.items():
        p.add_argument(f"--{k}", type=int, default=v, help=f"--bench: {k} (default {v})")
    p.add_argument("--iters", type=int, default=30, help="--bench: timed steps")
    args = p.parse_args()
    if args.bench:
        if torch.cuda.device_count() < args.world:
            p.error(f"--bench needs {args.world} GPUs; this machine has "
                    f"{torch.cuda.device_count()}")
        return bench({k: getattr(args, k) for k in BENCH_SIZES}, args.world, args.iters)
    device = "cuda:0" if args.backend == "nccl" else "cpu"
    dtype, sizes = config(args.kind, device)
    ref = single_process(args.kind, device, args.steps)
    got = ddp_losses(args.kind, args.backend, args.world, args.steps)
    what = f"{args.kind} {str(dtype).replace('torch.', '')}{' ' + str(sizes) if sizes else ''}"
    print(f"{what} {args.backend} x{args.world}: DDP losses {[f'{v:.6f}' for v in got]}")
    print(f"{what} single process:   losses {[f'{v:.6f}' for v in ref]}")
    why = compare_losses(got, ref, args.backend, bf16=dtype == torch.bfloat16)
    print("MATCH" if why is None else f"DIFFER: {why}")
    return 0 if why is None else 1


if __name__ == "__main__":
    sys.exit(main())
