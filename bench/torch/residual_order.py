"""A convolution with its bias, a residual add and a ReLU, written in both orders,
``relu(conv(x, w) + b + r)`` and ``relu(conv(x, w) + r + b)``, each as one fused graph through
``torch.compile(backend="dnngraph")`` with ``measure`` off and with the backend's rewrite that
moves the residual in front of the bias turned off, against Inductor's form of the first: the
GPU time per call (the profiler's kernel time over 20 calls) and the kernels that ran. Outputs
are checked against eager first.

    python bench/torch/residual_order.py               # ResNet-50's 1x1 shapes and the basic
                                                       # blocks' 3x3 ones, bf16 NHWC (GPU)
    python bench/torch/residual_order.py --cpu-smoke   # tiny sizes, fp32, on the CPU
"""

import argparse
import os
import sys

import torch
import torch.nn.functional as F

import dnngraph.torch  # noqa: F401
from dnngraph.torch.compile import _canonical, make_backend

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # _timing (PYTHONSAFEPATH too)
from _timing import gpu_us  # noqa: E402

# (batch, in channels, out channels, kernel, height): ResNet-50's last 1x1 convolutions of a
# bottleneck and the second 3x3 convolution of the basic blocks of bench/torch/blocks.py.
SHAPES = [(64, 64, 256, 1, 56), (64, 128, 512, 1, 28), (64, 256, 1024, 1, 14),
          (64, 512, 2048, 1, 7), (32, 64, 64, 3, 56), (64, 256, 256, 3, 14)]
SMOKE = [(2, 4, 8, 1, 5), (2, 8, 8, 3, 4)]


def bias_first(x, w, b, r):
    return F.relu(F.conv2d(x, w, None, 1, w.shape[-1] // 2) + b.view(1, -1, 1, 1) + r)


def residual_first(x, w, b, r):
    return F.relu(F.conv2d(x, w, None, 1, w.shape[-1] // 2) + r + b.view(1, -1, 1, 1))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cpu-smoke", action="store_true", help="tiny sizes, fp32, on the CPU")
    args = p.parse_args()
    if not args.cpu_smoke and not torch.cuda.is_available():
        sys.exit("bench/torch/residual_order.py: needs a CUDA GPU (or --cpu-smoke)")
    device, dtype = ("cpu", torch.float32) if args.cpu_smoke else ("cuda", torch.bfloat16)
    tol = 1e-5 if args.cpu_smoke else 2e-2
    rewrite = _canonical._residual_first
    _canonical._residual_first = lambda g, mode: None  # each order as written
    failed = []
    try:
        for n, c, k, ks, h in SMOKE if args.cpu_smoke else SHAPES:
            cl = torch.channels_last
            x = torch.randn(n, c, h, h, device=device).to(dtype, memory_format=cl)
            w = (torch.randn(k, c, ks, ks, device=device) / (c * ks * ks) ** 0.5).to(dtype, memory_format=cl)
            b = torch.randn(k, device=device, dtype=dtype)
            r = torch.randn(n, k, h, h, device=device).to(dtype, memory_format=cl)
            want = bias_first(x.double(), w.double(), b.double(), r.double())
            forms = {"conv+b+r": (bias_first, make_backend("eager", measure=False)),
                     "conv+r+b": (residual_first, make_backend("eager", measure=False))}
            if not args.cpu_smoke:
                forms["Inductor"] = (bias_first, "inductor")
            for name, (fn, backend) in forms.items():
                torch._dynamo.reset()
                compiled = torch.compile(fn, backend=backend)
                with torch.no_grad():
                    got = compiled(x, w, b, r)
                err = ((got.double() - want).norm() / want.norm()).item()
                status = "ok" if err <= tol else "MISMATCH"
                if err > tol:
                    failed.append(f"{name} {c}->{k} {ks}x{ks} {h}x{h}")
                line = f"{c}->{k} {ks}x{ks} {h}x{h} b{n} {name}: rel. error {err:.1e} {status}"
                if not args.cpu_smoke:
                    with torch.no_grad():
                        us, kernels = gpu_us(lambda: compiled(x, w, b, r))
                    line += f" | {us:.1f} us | {kernels}"
                print(line, flush=True)
    finally:
        _canonical._residual_first = rewrite
    if failed:
        sys.exit("FAILED: " + "; ".join(failed))


if __name__ == "__main__":
    main()
