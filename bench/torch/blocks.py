"""Whole blocks, forward + backward: the dnngraph.torch modules of examples/torch_blocks.py
against the same block in eager PyTorch, torch.compile of the eager block, and torch.compile of
the dnngraph block, all in one process. Outputs and gradients (input and every parameter) are
checked before anything is timed (against eager in fp64: no further off than twice eager's own
error, or 2e-2); a fallback warning of any dnngraph op is
reported (--strict makes it an error).

  blocks (bf16, mean ms of fwd+bwd of mean(block(x)^2) over back-to-back steps):
    gpt_d1024    GPT block d1024 h16 ff4096, b8 s1024
    gpt_d768     GPT block d768 h12 ff3072, b16 s512
    llama_d2048  Llama-style block d2048, GQA 32/8 heads of 128, RoPE, SwiGLU ff5632, b4 s2048
    resnet_c64   ResNet basic block c64 56x56, b32, channels_last
    resnet_c256  ResNet basic block c256 14x14, b64, channels_last
  (the ResNet blocks, ours and eager alike, are moved to channels_last with the input, as
  PyTorch's channels_last guide does: model.to(memory_format=torch.channels_last))

    python bench/torch/blocks.py [--blocks gpt_d1024,resnet_c64] [--iters 20] [--profile]
                                 [--depth 4]   # 4 layers of each block in one model
    python bench/torch/blocks.py --cpu-smoke   # tiny sizes on the CPU (tests run this)
"""

import argparse
import copy
import os
import sys
import time
import warnings

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # _timing (PYTHONSAFEPATH too)
import torch_blocks  # noqa: E402
from _timing import describe_classes, gpu_time_by_class, time_in_turn  # noqa: E402

import dnngraph.torch  # noqa: E402,F401

BLOCKS = {
    "gpt_d1024": ("transformer", dict(dim=1024, heads=16, hidden=4096), (8, 1024, 1024)),
    "gpt_d768": ("transformer", dict(dim=768, heads=12, hidden=3072), (16, 512, 768)),
    "llama_d2048": (
        "llama",
        dict(dim=2048, heads=32, kv_heads=8, head_dim=128, hidden=5632, max_seq_len=2048),
        (4, 2048, 2048),
    ),
    "resnet_c64": ("resnet", dict(channels=64), (32, 64, 56, 56)),
    "resnet_c256": ("resnet", dict(channels=256), (64, 256, 14, 14)),
}
SMOKE = {
    "gpt_d1024": ("transformer", dict(dim=32, heads=2, hidden=64), (2, 8, 32)),
    "gpt_d768": ("transformer", dict(dim=24, heads=3, hidden=48), (2, 6, 24)),
    "llama_d2048": (
        "llama",
        dict(dim=32, heads=4, kv_heads=2, head_dim=16, hidden=48, max_seq_len=16),
        (2, 8, 32),
    ),
    "resnet_c64": ("resnet", dict(channels=8), (2, 8, 6, 6)),
    "resnet_c256": ("resnet", dict(channels=16), (2, 16, 4, 4)),
}


def make_input(kind, shape, device, dtype):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(*shape, generator=g).to(device, dtype)
    if kind == "resnet":
        x = x.contiguous(memory_format=torch.channels_last)
    return x


def step(model, x):
    """One forward + backward; returns (output, grad of x)."""
    model.zero_grad(set_to_none=True)
    xg = x.detach().requires_grad_()
    out = model(xg)
    out.float().square().mean().backward()
    return out, xg.grad


def rel_err(a, b):
    a, b = a.float(), b.float()
    return ((a - b).norm() / b.norm().clamp_min(1e-12)).item()


def check(name, model, ref, exact, x, tol):
    """Output, input gradient and parameter gradients of model (from its third step: with
    CUDA-graph replay on, the default, the first step runs directly, the second records and the
    third replays, which is what the timed steps run) and of ref (eager, the same dtype) against
    exact (eager in fp64): model may be off by up to twice eager's error, or tol (relative
    norm), whichever is larger. Over a few layers in bf16 eager itself is off by more than tol."""
    for _ in range(3):
        out, gx = step(model, x)
    grads = {n.replace("_orig_mod.", ""): p.grad.detach().clone() for n, p in model.named_parameters()}
    out_r, gx_r = step(ref, x)
    out_e, gx_e = step(exact, x.double())
    errs = {"out": (rel_err(out, out_e), rel_err(out_r, out_e)),
            "dx": (rel_err(gx, gx_e), rel_err(gx_r, gx_e))}
    for (n, p), q in zip(ref.named_parameters(), exact.parameters()):
        key = n.replace("_orig_mod.", "")
        errs["d" + key] = (rel_err(grads[key], q.grad), rel_err(p.grad, q.grad))
    worst = max(errs, key=lambda k: errs[k][0] / max(tol, 2 * errs[k][1]))
    mine, eager = errs[worst]
    ok = mine <= max(tol, 2 * eager)
    print(f"  check {name}: worst rel. error against fp64 {mine:.2e} ({worst}; eager's "
          f"{eager:.2e}) {'ok' if ok else 'MISMATCH'}")
    return ok


def profile(name, model, x, device, rows=20):
    """The top kernels of 5 steps, then where the host time goes: the top host-side events by
    self CPU time (CUDA runtime calls included: a synchronizing call there serializes host and
    GPU), and per step the wall time against the GPU's busy time."""
    acts = [torch.profiler.ProfilerActivity.CPU]
    if device != "cpu":
        acts.append(torch.profiler.ProfilerActivity.CUDA)
    steps = 5
    with torch.profiler.profile(activities=acts) as prof:
        if device != "cpu":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(steps):
            step(model, x)
        if device != "cpu":
            torch.cuda.synchronize()
        wall = (time.perf_counter() - t0) * 1e3 / steps
    events = prof.key_averages()
    if device != "cpu":
        print(f"---- top kernels of {name} ({steps} steps)")
        print(events.table(sort_by="self_cuda_time_total", row_limit=rows, max_name_column_width=70))
    print(f"---- top host events of {name} ({steps} steps)")
    print(events.table(sort_by="self_cpu_time_total", row_limit=rows, max_name_column_width=70))
    if device != "cpu":
        kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        by_class = gpu_time_by_class(prof, steps)
        busy = by_class["total"] / 1e3
        syncs = {e.key: e.count for e in events if any(
            k in e.key for k in ("Synchronize", "cudaMemcpy", "cudaMalloc", "cudaFree", "cudaHostAlloc"))}
        print(f"---- {name}: {wall:.3f} ms per step (under the profiler), GPU busy {busy:.3f} ms, "
              f"{len(kernels) / steps:.0f} kernels per step; synchronizing or allocating calls: "
              f"{syncs or 'none'}")
        print(describe_classes(name, by_class))


def stacked_pair(kind, device, dtype, depth, sizes):
    """(ours, eager) of `depth` blocks in sequence, each layer with its own weights (the same
    in both): a model whose layers share every graph's plan, as a real network's do."""
    if depth == 1:
        return torch_blocks.pair(kind, device, dtype, **sizes)
    layers = []
    for i in range(depth):
        torch.manual_seed(i)
        ours, ref = torch_blocks.pair(kind, device, dtype, **sizes)
        with torch.no_grad():  # pair() seeds itself: give each layer other weights
            for p, q in zip(ours.parameters(), ref.parameters()):
                p.add_(torch.randn_like(p), alpha=0.01 * i)
                q.copy_(p)
        layers.append((ours, ref))
    return tuple(torch.nn.Sequential(*m) for m in zip(*layers))


def run_block(args, kind, sizes, shape, device, dtype, tol, iters, backend, name, failures):
    ours, ref = stacked_pair(kind, device, dtype, args.depth, sizes)
    if kind == "resnet":
        ours, ref = (m.to(memory_format=torch.channels_last) for m in (ours, ref))
    x = make_input(kind, shape, device, dtype)
    variants = {"dnngraph": ours, "eager": ref}
    if not args.no_compile:
        variants["compile"] = torch.compile(ref, backend=backend, mode=args.mode)
        variants["compile(ours)"] = torch.compile(ours, backend=backend, mode=args.mode)
    exact = copy.deepcopy(ref).double()
    for vname in ("dnngraph", "compile(ours)"):
        if vname in variants and not check(vname, variants[vname], ref, exact, x, tol):
            failures.append(f"{name}: {vname} differs from eager")
    del exact
    ms = time_in_turn(variants, lambda model: step(model, x), iters, args.rounds)
    if args.profile:
        profile(f"{name} dnngraph", ours, x, device)
        profile(f"{name} eager", ref, x, device)
        for vname in ("compile", "compile(ours)"):
            if vname in variants:
                profile(f"{name} {vname}", variants[vname], x, device)
    return ms


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--blocks", default=",".join(BLOCKS), help="comma-separated: " + ", ".join(BLOCKS))
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--rounds", type=int, default=3,
                   help="rounds in which the variants take turns; each one's fastest counts")
    p.add_argument("--profile", action="store_true", help="print the top kernels and host events "
                   "of each column, and its GPU time by kernel class")
    p.add_argument("--cpu-smoke", action="store_true", help="tiny sizes, fp32, on the CPU")
    p.add_argument("--backend", default=None, help="torch.compile backend (default inductor; "
                   "aot_eager with --cpu-smoke)")
    p.add_argument("--no-compile", action="store_true", help="skip the torch.compile columns")
    p.add_argument("--mode", default=None, choices=["reduce-overhead", "max-autotune"],
                   help="torch.compile's mode for both compile columns (default: its default)")
    p.add_argument("--depth", type=int, default=1,
                   help="layers of each block in sequence (one model; default 1)")
    p.add_argument("--strict", action="store_true", help="a fallback warning is an error")
    p.add_argument("--cudnn-benchmark", action="store_true",
                   help="torch.backends.cudnn.benchmark = True for every column (eager's "
                   "convolutions and our graphs are autotuned)")
    args = p.parse_args()
    torch.backends.cudnn.benchmark = args.cudnn_benchmark
    smoke = args.cpu_smoke
    if not smoke and not torch.cuda.is_available():
        sys.exit("bench/torch/blocks.py: needs a CUDA GPU (or --cpu-smoke)")
    device = "cpu" if smoke else "cuda"
    dtype = torch.float32 if smoke else torch.bfloat16
    tol = 1e-4 if smoke else 2e-2
    iters = 2 if smoke else args.iters
    backend = args.backend or ("aot_eager" if smoke else "inductor")
    table = smoke and SMOKE or BLOCKS
    failures = []
    rows = []
    cols = ["dnngraph", "eager"] + ([] if args.no_compile else ["compile", "compile(ours)"])
    for name in args.blocks.split(","):
        kind, sizes, shape = table[name]
        print(f"{name}: {kind} {sizes} x{tuple(shape)} {dtype} on {device}", flush=True)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                ms = run_block(args, kind, sizes, shape, device, dtype, tol, iters, backend, name, failures)
            except Exception as e:  # one block's failure must not hide the others' rows
                failures.append(f"{name}: {type(e).__name__}: {str(e)[:300]}")
                print(f"  FAILED: {type(e).__name__}: {e}", flush=True)
                continue
        fallbacks = sorted({str(w.message) for w in caught if "dnngraph::" in str(w.message)})
        for f in fallbacks:
            print(f"  fallback warning: {f}")
        if fallbacks and args.strict:
            failures.append(f"{name}: {len(fallbacks)} fallback warning(s)")
        rows.append((name, ms))
        print("  " + ", ".join(f"{c} {ms[c]:.3f} ms" for c in cols), flush=True)
    print()
    print("| block | " + " | ".join(cols) + " | eager/ours |" + ("" if args.no_compile else " compile/ours |"))
    print("| --- " * (len(cols) + (2 if not args.no_compile else 1) + 1) + "|")
    for name, ms in rows:
        cells = " | ".join(f"{ms[c]:.3f}" for c in cols)
        ratio = f" {ms['eager'] / ms['dnngraph']:.2f}x |"
        if not args.no_compile:
            ratio += f" {ms['compile'] / ms['dnngraph']:.2f}x |"
        print(f"| {name} | {cells} |{ratio}")
    print(f"(mean ms of forward+backward over {iters} back-to-back steps, best of {args.rounds} "
          f"rounds taken in turn, {dtype}, {device}; "
          f"compile backend {backend}, mode {args.mode or 'default'}; {args.depth} layer(s) per block; "
          f"cudnn.benchmark {args.cudnn_benchmark})")
    if failures:
        print("FAILED: " + "; ".join(failures))
        sys.exit(1)


if __name__ == "__main__":
    main()
