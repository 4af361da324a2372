"""The timing both block benchmarks use: on a host-bound machine one back-to-back run per
variant is at the mercy of the host's noise (the same eager block has measured 2x apart in two
runs), so the variants take turns for several rounds and each one's fastest round counts; and
the profiles' GPU time by kernel class."""

import re

import torch
from torch.utils.benchmark import Timer


def time_in_turn(variants, run, iters, rounds=3, warmup=3):
    """{name: mean ms of run(model) over `iters` back-to-back calls, synchronized at both ends
    (torch.utils.benchmark)}, the best of `rounds` rounds in which the variants take turns."""
    for model in variants.values():
        for _ in range(warmup):
            run(model)
    best = {v: float("inf") for v in variants}
    for _ in range(rounds):
        for v, model in variants.items():
            timer = Timer("run(model)", globals={"run": run, "model": model})
            best[v] = min(best[v], timer.timeit(iters).mean * 1e3)
    return best


# GPU kernels by what they do, from their names: attention (cuDNN's SDPA and its dO·O
# preprocessing, flash, fmha), matmul or convolution (cuBLAS, cuDNN's and CUTLASS's GEMM and
# implicit-GEMM kernels, their split-K reductions, cuDNN's runtime-fused matmul and convolution
# kernels with their epilogues), and the rest (Triton's fused kernels, ATen's elementwise and
# reductions, cuDNN's pointwise-only kernels, cuBLAS's bias-gradient reduction, copies).
# Inductor names a Triton kernel after the ops it fuses ("triton_red_fused_convolution_backward"
# is a bias gradient), so those are never matmul or attention, whatever the name holds; cuDNN
# names a generated kernel after its ops, the first one the main one
# ("cudnn_generated_fort_native_sm90_matMul_pointwise_...",
# "cudnn_generated_pointwise_..._cutlass").
_ATTENTION = ("sdpa", "flash", "fmha", "attention", "dot_do_o")
_MATMUL = ("gemm", "nvjet", "cutlass", "xmma", "cublas", "splitk", "conv", "wgrad", "dgrad",
           "fprop", "matmul")
_GENERATED = re.compile(r"^cudnn_generated_(?:fort_native_)?(?:sm\d+_)?")


def kernel_class(name):
    """'attention', 'matmul/conv' or 'other' for a GPU kernel's name."""
    n = name.lower()
    if n.startswith("triton_") or "at::native::" in n or "bgrad" in n:
        return "other"
    generated = _GENERATED.match(n)
    if generated:
        first = n[generated.end():]
        if first.startswith("sdpa"):
            return "attention"
        return "matmul/conv" if first.startswith(("matmul", "conv")) else "other"
    if any(k in n for k in _ATTENTION):
        return "attention"
    if any(k in n for k in _MATMUL):
        return "matmul/conv"
    return "other"


def gpu_time_by_class(prof, steps):
    """{class: GPU µs per step} of the CUDA kernels a torch.profiler run recorded over `steps`
    steps (kernel_class), with 'total'."""
    out = {"matmul/conv": 0.0, "attention": 0.0, "other": 0.0}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            out[kernel_class(e.name)] += e.time_range.elapsed_us() / steps
    out["total"] = sum(out.values())
    return out


def describe_classes(name, by_class):
    """One line: GPU µs per step by class, and how much faster the step could be at most if
    everything but the matmuls, convolutions and attention took no time."""
    t = by_class["total"]
    core = by_class["matmul/conv"] + by_class["attention"]
    bound = f"{t / core:.3f}x" if core > 0 else "n/a"
    return (f"---- {name}: GPU µs per step {t:.1f}: matmul/conv {by_class['matmul/conv']:.1f}, "
            f"attention {by_class['attention']:.1f}, other {by_class['other']:.1f} "
            f"(with the other work free: at most {bound} faster)")


def gpu_us(fn, calls=20):
    """(GPU µs per call, 'kernel µs; ...') from the profiler's kernel times over ``calls``."""
    from torch.profiler import ProfilerActivity, profile

    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    events = [e for e in prof.key_averages() if e.self_device_time_total > 0]
    total = sum(e.self_device_time_total for e in events) / calls
    names = "; ".join(f"{e.key[:60]} {e.self_device_time_total / calls:.1f}" for e in events)
    return total, names
