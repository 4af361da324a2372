"""The forward GEMMs of the GPT blocks (bench/torch/blocks.py) with their epilogues, four ways:
dnngraph's training forward as one graph (``linear_act_train``: matmul, bias, activation, and the
pre-activation the backward reads), the same graph autotuned (``torch.backends.cudnn.benchmark``),
dnngraph's matmul+bias graph followed by ATen's activation, and ATen alone (``F.linear``: cuBLAS
with its bias epilogue, then the activation). GPU µs per call (the profiler's kernel time over
20 calls) and the kernels that ran; every form is checked against fp64 first.

    python bench/torch/linear_epilogue.py               # bf16 on a GPU
    python bench/torch/linear_epilogue.py --cpu-smoke   # tiny sizes, fp32, on the CPU (checks only)
"""

import argparse
import os
import sys

import torch
import torch.nn.functional as F

import dnngraph.torch as dt

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # _timing (PYTHONSAFEPATH too)
from _timing import gpu_us  # noqa: E402

# (name, rows M = batch x sequence, in features K, out features N, activation): blocks.py's GPT
# blocks use the erf GELU, compile_backend.py's (stock modules) the tanh one.
SHAPES = [("GPT d1024 qkv", 8192, 1024, 3072, "none"),
          ("GPT d1024 proj", 8192, 1024, 1024, "none"),
          ("GPT d1024 fc1", 8192, 1024, 4096, "gelu_tanh"),
          ("GPT d1024 fc1 (erf GELU)", 8192, 1024, 4096, "gelu"),
          ("GPT d1024 fc2", 8192, 4096, 1024, "none"),
          ("GPT d768 qkv", 8192, 768, 2304, "none"),
          ("GPT d768 fc1", 8192, 768, 3072, "gelu_tanh")]
SMOKE = [("qkv", 6, 8, 24, "none"), ("fc1", 6, 8, 16, "gelu_tanh"), ("fc1 erf", 6, 8, 16, "gelu"),
         ("fc1 relu", 6, 8, 16, "relu")]
ACTS = {"none": lambda z: z, "relu": F.relu, "gelu": F.gelu,
        "gelu_tanh": lambda z: F.gelu(z, approximate="tanh")}


def forms(act):
    ops = torch.ops.dnngraph
    out = {"dnngraph": lambda x, w, b: ops.linear_act_train(x, w, b, act)[0]}
    if act != "none":
        out["dnngraph mm+bias, ATen act"] = lambda x, w, b: ACTS[act](
            ops.linear_act_train(x, w, b, "none")[0])
    out["ATen"] = lambda x, w, b: ACTS[act](F.linear(x, w, b))
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cpu-smoke", action="store_true", help="tiny sizes, fp32, on the CPU")
    args = p.parse_args()
    smoke = args.cpu_smoke
    if not smoke and not torch.cuda.is_available():
        sys.exit("bench/torch/linear_epilogue.py: needs a CUDA GPU (or --cpu-smoke)")
    device, dtype = ("cpu", torch.float32) if smoke else ("cuda", torch.bfloat16)
    tol = 1e-5 if smoke else 1e-2
    failed = []
    autotune = [False] if smoke else [False, True]
    for tuned in autotune:
        torch.backends.cudnn.benchmark = tuned
        dt.clear_cache()  # each graph built (and, tuned, autotuned) anew
        for name, m, k, n, act in SMOKE if smoke else SHAPES:
            g = torch.Generator().manual_seed(m * k + n)
            x = torch.randn(m, k, generator=g).to(device, dtype)
            w = (torch.randn(n, k, generator=g) / k ** 0.5).to(device, dtype)
            b = torch.randn(n, generator=g).to(device, dtype)
            want = ACTS[act](F.linear(x.double(), w.double(), b.double()))
            for form, fn in forms(act).items():
                if tuned and not form.startswith("dnngraph"):
                    continue
                label = form + (" (autotuned)" if tuned else "")
                y = fn(x, w, b)
                err = ((y.double() - want).norm() / want.norm()).item()
                ok = err <= tol
                if not ok:
                    failed.append(f"{name} {label}")
                line = f"{name} [{m}x{k}]x[{k}x{n}] {act} {label}: rel. error {err:.1e} " \
                       f"{'ok' if ok else 'MISMATCH'}"
                if not smoke:
                    us, kernels = gpu_us(lambda: fn(x, w, b))
                    line += f" | {us:.1f} us | {kernels}"
                print(line, flush=True)
    torch.backends.cudnn.benchmark = False
    if failed:
        sys.exit("FAILED: " + "; ".join(failed))


if __name__ == "__main__":
    main()
