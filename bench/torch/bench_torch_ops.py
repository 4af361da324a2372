"""dnngraph.torch ops on a GPU: host cost per call and GPU time, against their comparators
measured in the same run. Prints a short table (ratios > 1 mean dnngraph is faster).

  host cost (tiny tensors, no grad): each op vs the matching ATen op, and vs the custom-op
    guide's Python pattern written on dnngraph's Python API (examples/guide_custom_op.py);
  GPU time (each side's best mean of back-to-back calls over 5 alternating rounds): conv2d_bias_act vs relu(conv2d) eager and
    torch.compile(mode="max-autotune"); matmul_epilogue with AMAX vs baddbmm -> gelu -> amax;
    sdpa forward/backward vs F.scaled_dot_product_attention on its cuDNN backend.

    python bench/torch/bench_torch_ops.py [--quick]
"""

import argparse
import os
import sys
import time

import torch
import torch.nn.functional as TF
from torch.utils.benchmark import Timer

import dnngraph.torch as dt
from dnngraph.torch import functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
import guide_custom_op  # noqa: E402

rows = []


def host_us(fn, iters):
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(5):  # best of 5 batches: host cost without scheduler noise
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        best = min(best, (time.perf_counter() - t0) / iters * 1e6)
        torch.cuda.synchronize()
    return best


def gpu_ms(fn, iters):
    """Mean ms of `fn` over `iters` back-to-back calls after 5 warm-up calls (torch.utils.benchmark
    synchronizes the GPU at both ends)."""
    for _ in range(5):
        fn()
    return Timer("fn()", globals={"fn": fn}).timeit(iters).mean * 1e3


def gpu_pair(ours, other, iters, rounds=5):
    """(ours, other): each one's best mean over `rounds` rounds that alternate the two, so that a
    clock or a neighbour's drift during the run falls on both sides."""
    best = [float("inf"), float("inf")]
    for _ in range(rounds):
        for i, fn in enumerate((ours, other)):
            best[i] = min(best[i], gpu_ms(fn, iters))
    return best


def row(what, ours, other, unit, other_name):
    rows.append((what, ours, other, unit, other_name, other / ours))


def host_costs(iters):
    d, t = "cuda", torch.bfloat16
    x = torch.randn(8, 64, device=d, dtype=t)
    w, b = torch.randn(64, device=d, dtype=t), torch.randn(64, device=d, dtype=t)
    W = torch.randn(32, 64, device=d, dtype=t)
    q = torch.randn(1, 2, 8, 64, device=d, dtype=t)
    xc = torch.randn(1, 8, 8, 8, device=d, dtype=t).contiguous(memory_format=torch.channels_last)
    wc = torch.randn(8, 8, 3, 3, device=d, dtype=t).contiguous(memory_format=torch.channels_last)
    bc = torch.randn(8, device=d, dtype=t)
    a3, b3 = torch.randn(1, 8, 64, device=d, dtype=t), torch.randn(1, 64, 32, device=d, dtype=t)
    with torch.no_grad():
        cases = [
            ("layer_norm", lambda: F.layer_norm(x, [64], w, b), lambda: TF.layer_norm(x, [64], w, b)),
            ("rms_norm", lambda: F.rms_norm(x, [64], w, 1e-6), lambda: TF.rms_norm(x, [64], w, 1e-6)),
            ("linear_act(relu)", lambda: F.linear(x, W, None, "relu"), lambda: TF.relu(TF.linear(x, W))),
            ("matmul_epilogue", lambda: F.matmul_epilogue(a3, b3), lambda: torch.bmm(a3, b3)),
            ("conv2d_bias_act", lambda: F.conv2d_bias_act(xc, wc, bc, 1, 1), lambda: TF.conv2d(xc, wc, bc, 1, 1)),
            ("sdpa", lambda: F.scaled_dot_product_attention(q, q, q), lambda: TF.scaled_dot_product_attention(q, q, q)),
        ]
        for name, ours, aten in cases:
            row(f"host {name}", host_us(ours, iters), host_us(aten, iters), "us", "ATen")
        xf, wf, bf = x.float(), w.float(), b.float()
        row(
            "host layer_norm vs guide",
            host_us(lambda: F.layer_norm(xf, [64], wf, bf), iters),
            host_us(lambda: guide_custom_op.layer_norm(xf, wf, bf), iters),
            "us",
            "guide pattern (Python)",
        )


def gpu_times(iters, autotune=True):
    d, t = "cuda", torch.bfloat16
    # The tutorial's conv: N32 C128 56x56, K256 3x3, pad 1, NHWC, bf16.
    x = torch.randn(32, 128, 56, 56, device=d, dtype=t).contiguous(memory_format=torch.channels_last)
    w = (torch.randn(256, 128, 3, 3, device=d, dtype=t) * 0.05).contiguous(memory_format=torch.channels_last)
    b = torch.randn(256, device=d, dtype=t)
    with torch.no_grad():
        ours, other = gpu_pair(lambda: F.conv2d_bias_act(x, w, b, 1, 1, 1, 1, "relu"),
                               lambda: torch.relu(TF.conv2d(x, w, b, 1, 1)), iters)
        row("conv2d_bias_act 32x128x56x56 k256", ours, other, "ms", "eager relu(conv2d)")
        if autotune:
            comp = torch.compile(lambda x: torch.relu(TF.conv2d(x, w, b, 1, 1)), mode="max-autotune")
            row("conv2d_bias_act 32x128x56x56 k256", ours, gpu_ms(lambda: comp(x), iters), "ms",
                "compile max-autotune")
        A = torch.randn(16, 1024, 1024, device=d, dtype=t)
        B = torch.randn(16, 1024, 1024, device=d, dtype=t) * 0.03
        bias = torch.randn(1, 1, 1024, device=d, dtype=t)

        def eager():
            y = TF.gelu(torch.baddbmm(bias, A, B, alpha=0.5))
            return y, y.abs().amax()

        ours, other = gpu_pair(lambda: F.matmul_epilogue(A, B, bias, 0.5, "gelu", amax=True),
                               eager, iters)
        row("matmul_epilogue+amax 16x1024^3", ours, other, "ms", "eager baddbmm-gelu-amax")
    from torch.nn.attention import SDPBackend, sdpa_kernel

    # (batch, q heads, kv heads, seq, head dim); the GQA case with enable_gqa.
    for b_, h, hk, s, dh in ((4, 16, 16, 1024, 64), (2, 16, 16, 8192, 128), (1, 32, 8, 4096, 128)):
        q = torch.randn(b_, h, s, dh, device=d, dtype=t, requires_grad=True)
        k, v = (torch.randn(b_, hk, s, dh, device=d, dtype=t, requires_grad=True) for _ in range(2))
        do = torch.randn(b_, h, s, dh, device=d, dtype=t)
        gqa = h != hk
        name = f"b{b_} h{h}" + (f"/{hk}" if gqa else "") + f" s{s} d{dh} causal"

        def torch_fwd():
            with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                return TF.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)

        try:
            o_ref = torch_fwd()
        except RuntimeError as e:  # torch's cuDNN backend may not take this case
            print(f"sdpa {name}: torch's cuDNN backend refused ({str(e).splitlines()[0][:120]})")
            continue
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)
        ours_f, ref_f = gpu_pair(
            lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa),
            torch_fwd, iters)
        ours_b, ref_b = gpu_pair(
            lambda: torch.autograd.grad(o, (q, k, v), do, retain_graph=True),
            lambda: torch.autograd.grad(o_ref, (q, k, v), do, retain_graph=True), iters)
        row(f"sdpa fwd {name}", ours_f, ref_f, "ms", "F.sdpa cuDNN")
        row(f"sdpa bwd {name}", ours_b, ref_b, "ms", "F.sdpa cuDNN")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true", help="fewer iterations")
    p.add_argument("--host-only", action="store_true")
    p.add_argument("--no-autotune", action="store_true", help="skip torch.compile max-autotune (minutes)")
    args = p.parse_args()
    if not torch.cuda.is_available():
        print("bench_torch_ops: skipped, no CUDA GPU")
        return
    host_costs(200 if args.quick else 2000)
    if not args.host_only:
        gpu_times(10 if args.quick else 30, autotune=not args.no_autotune)
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, {time.strftime('%Y-%m-%d')}")
    print(f"{'case':44s} {'dnngraph':>10s} {'other':>10s}  unit  {'other/dnngraph':>14s}  other")
    for what, ours, other, unit, name, ratio in rows:
        print(f"{what:44s} {ours:10.3f} {other:10.3f}  {unit:4s}  {ratio:14.2f}  {name}")
    print("cache:", dt.cache_info())


if __name__ == "__main__":
    main()
