"""conv2d_bias_act against eager PyTorch and torch.compile, max-autotune included (issue 13's
target: >= 2x eager relu(conv2d(x, w, b)) and not slower than
torch.compile(mode="max-autotune")). Checks the result against eager first, then prints
mean times and the ratios (> 1: dnngraph faster).

    python bench/torch/bench_conv_autotune.py                 # GPU: the tutorial's conv,
                                                              #   N32 C128 56x56 K256 3x3 NHWC bf16
    python bench/torch/bench_conv_autotune.py --cpu --quick   # CPU smoke run of the same code
                                                              #   (tiny shape, fp32, few iterations)

max-autotune compiles and times many kernels: minutes on a GPU the first time (torch caches
them); --no-autotune leaves it out.
"""

import argparse

import torch
import torch.nn.functional as TF
from torch.utils.benchmark import Timer

import dnngraph.torch  # noqa: F401
from dnngraph.torch import functional as F


def mean_ms(fn, iters):
    """Mean ms of `fn` over `iters` back-to-back calls after 5 warm-up calls (torch.utils.benchmark
    synchronizes a GPU at both ends)."""
    for _ in range(5):
        fn()
    return Timer("fn()", globals={"fn": fn}).timeit(iters).mean * 1e3


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cpu", action="store_true", help="run on the CPU (reference engine)")
    p.add_argument("--quick", action="store_true", help="tiny shape, few iterations")
    p.add_argument("--no-autotune", action="store_true", help="skip torch.compile max-autotune")
    p.add_argument("--iters", type=int, default=None)
    args = p.parse_args()
    cuda = not args.cpu
    if cuda and not torch.cuda.is_available():
        print("bench_conv_autotune: no CUDA GPU; run with --cpu --quick for the CPU smoke run")
        return 0
    dev = "cuda" if cuda else "cpu"
    dtype = torch.bfloat16 if cuda else torch.float32
    if args.quick:
        n, c, hw, k = 2, 8, 8, 8
    else:
        n, c, hw, k = 32, 128, 56, 256
    iters = args.iters or (20 if args.quick else 50)
    g = torch.Generator(device=dev).manual_seed(0)
    x = torch.randn(n, c, hw, hw, device=dev, dtype=dtype, generator=g)
    x = x.contiguous(memory_format=torch.channels_last)
    w = torch.randn(k, c, 3, 3, device=dev, dtype=dtype, generator=g) * (1.0 / (c * 9) ** 0.5)
    w = w.contiguous(memory_format=torch.channels_last)
    b = torch.randn(k, device=dev, dtype=dtype, generator=g)

    def ours():
        return F.conv2d_bias_act(x, w, b, 1, 1, 1, 1, "relu")

    def eager():
        return torch.relu(TF.conv2d(x, w, b, 1, 1))

    tol = dict(atol=2e-2, rtol=2e-2) if dtype == torch.bfloat16 else dict(atol=1e-4, rtol=1e-4)
    with torch.no_grad():
        torch.testing.assert_close(ours(), eager(), **tol)
        rows = [("eager relu(conv2d)", mean_ms(eager, iters))]
        compiled = torch.compile(lambda x: torch.relu(TF.conv2d(x, w, b, 1, 1)))
        torch.testing.assert_close(compiled(x), eager(), **tol)
        rows.append(("torch.compile (default)", mean_ms(lambda: compiled(x), iters)))
        if not args.no_autotune:
            tuned = torch.compile(lambda x: torch.relu(TF.conv2d(x, w, b, 1, 1)),
                                  mode="max-autotune")
            torch.testing.assert_close(tuned(x), eager(), **tol)
            rows.append(("torch.compile max-autotune", mean_ms(lambda: tuned(x), iters)))
        t_ours = mean_ms(ours, iters)
    name = torch.cuda.get_device_name() if cuda else "CPU"
    print(f"conv2d_bias_act relu, N{n} C{c} {hw}x{hw} K{k} 3x3 pad 1 NHWC {dtype}, {name}, "
          f"torch {torch.__version__}, mean of {iters}")
    print(f"{'':30s} {'ms':>9s}  other/dnngraph")
    print(f"{'dnngraph conv2d_bias_act':30s} {t_ours:9.4f}")
    for what, t in rows:
        print(f"{what:30s} {t:9.4f}  {t / t_ours:6.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
