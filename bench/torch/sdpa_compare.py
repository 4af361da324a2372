"""Attention on a GPU, dnngraph's op against torch's own cuDNN SDPA backend, kernel by kernel:
the CUDA kernels each launches for one forward and one backward (torch.profiler, names and
times), and with --log DIR each side's cuDNN backend log (CUDNN_LOGLEVEL_DBG=3) written to
DIR/torch.log and DIR/dnngraph.log from separate processes, to diff the descriptors
(engine, knobs, tensor strides) they hand to cuDNN. Then each side's backward alone, host
events by self CPU time.

    python bench/torch/sdpa_compare.py [--shape 4,16,16,1024,64] [--log DIR]
    (shape: batch, q heads, kv heads, sequence, head dim; causal, bf16)
"""

import argparse
import os
import subprocess
import sys

import torch
import torch.nn.functional as TF


def run(side, shape, iters=10, profile=True):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    import dnngraph.torch  # noqa: F401
    from dnngraph.torch import functional as F

    b, h, hk, s, d = shape
    g = torch.Generator(device="cuda").manual_seed(0)
    q = torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16, generator=g)
    k, v = (torch.randn(b, hk, s, d, device="cuda", dtype=torch.bfloat16, generator=g) for _ in "kv")
    do = torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16, generator=g)
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    gqa = h != hk

    def attn():
        if side == "torch":
            with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                return TF.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)

    for _ in range(3):
        torch.autograd.grad(attn(), (q, k, v), do)
    torch.cuda.synchronize()
    if not profile:
        return
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=acts) as prof:
        for _ in range(iters):
            torch.autograd.grad(attn(), (q, k, v), do)
        torch.cuda.synchronize()
    print(f"---- {side}: {shape}, {iters} forward+backward")
    print(prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=12,
                                    max_name_column_width=90))
    # The backward alone, host side: what one autograd call costs before the GPU is reached.
    o = attn()
    with torch.profiler.profile(activities=acts) as prof:
        for _ in range(iters):
            torch.autograd.grad(o, (q, k, v), do, retain_graph=True)
        torch.cuda.synchronize()
    print(f"---- {side}: {shape}, {iters} backward calls, host events by self CPU time")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=16,
                                    max_name_column_width=90))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shape", default="4,16,16,1024,64")
    p.add_argument("--log", help="folder for each side's cuDNN backend log")
    p.add_argument("--side", choices=["torch", "dnngraph"], help=argparse.SUPPRESS)
    a = p.parse_args()
    if not torch.cuda.is_available():
        sys.exit("bench/torch/sdpa_compare.py: needs a CUDA GPU")
    shape = tuple(int(x) for x in a.shape.split(","))
    if a.side:  # a child process that only logs
        run(a.side, shape, profile=False)
        return
    for side in ("torch", "dnngraph"):
        run(side, shape)
    if a.log:
        os.makedirs(a.log, exist_ok=True)
        for side in ("torch", "dnngraph"):
            env = dict(os.environ, CUDNN_LOGLEVEL_DBG="3",
                       CUDNN_LOGDEST_DBG=os.path.join(a.log, f"{side}.log"))
            subprocess.run([sys.executable, __file__, "--shape", a.shape, "--side", side],
                           env=env, check=False)


if __name__ == "__main__":
    main()
