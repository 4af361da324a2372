"""Host cost per call of dnngraph.torch ops on tiny CPU tensors, next to the matching ATen op
in the same process (no grad). On the CPU both sides also compute, on tensors small enough
that the call's fixed cost dominates: the overhead of the shared hot path (Python wrapper,
dispatcher, cache key, cache lookup, variant pack, allocations) is what moves these numbers.

    PYTHONPATH=build/release/python python3 bench/torch/bench_torch_host.py [--iters N]

Prints one row per op: dnngraph us, ATen us, dnngraph/ATen (lower is better; the issue's
target on the GPU is <= 1.25).

    ... bench_torch_host.py --instructions

counts user-space instructions per call instead (`perf stat`, the difference between a run of
N calls and one of none, so that imports cancel): unlike times, the count does not move with
the load of a shared machine, which makes before/after comparisons of the hot path reliable.

Timing: the best of many short batches, the two sides interleaved, so that a shared machine's
load (other builds) mostly cancels; still, compare runs made minutes apart with care.
"""

import argparse
import os
import subprocess
import sys
import time

import torch
import torch.nn.functional as TF

import dnngraph.torch as dt
from dnngraph.torch import functional as F


def per_call_us(fns, iters, repeats=40):
    """Best per-call time of each function over `repeats` batches of `iters` calls, the
    functions' batches interleaved."""
    for fn in fns:
        for _ in range(200):
            fn()
    best = [float("inf")] * len(fns)
    for _ in range(repeats):
        for i, fn in enumerate(fns):
            t0 = time.perf_counter()
            for _ in range(iters):
                fn()
            best[i] = min(best[i], (time.perf_counter() - t0) / iters * 1e6)
    return best


def cases():
    t = torch.float32
    x = torch.randn(2, 8, dtype=t)
    w, b = torch.randn(8, dtype=t), torch.randn(8, dtype=t)
    W = torch.randn(4, 8, dtype=t)
    a3, b3 = torch.randn(1, 2, 8, dtype=t), torch.randn(1, 8, 4, dtype=t)
    xc = torch.randn(1, 2, 4, 4, dtype=t)
    wc, bc = torch.randn(2, 2, 3, 3, dtype=t), torch.randn(2, dtype=t)
    q = torch.randn(1, 1, 2, 8, dtype=t)
    ops = torch.ops.dnngraph
    aten_ln = torch.ops.aten.native_layer_norm.default
    return [
        ("layer_norm", lambda: F.layer_norm(x, [8], w, b), lambda: TF.layer_norm(x, [8], w, b)),
        ("layer_norm via torch.ops", lambda: ops.layer_norm.default(x, [8], w, b, 1e-5),
         lambda: torch.native_layer_norm(x, [8], w, b, 1e-5)),
        # Not dnngraph: what calling an ATen op through torch.ops (boxed arguments) costs
        # against its generated Python binding; every torch.ops.dnngraph call pays it.
        ("(ATen's own op via torch.ops)", lambda: aten_ln(x, [8], w, b, 1e-5),
         lambda: torch.native_layer_norm(x, [8], w, b, 1e-5)),
        ("(dnngraph.cache_info via torch.ops)", lambda: ops.cache_info.default(),
         lambda: torch.ops.aten.sym_size.int(x, 0)),
        ("rms_norm", lambda: F.rms_norm(x, [8], w, 1e-6), lambda: TF.rms_norm(x, [8], w, 1e-6)),
        ("linear_act(relu)", lambda: F.linear(x, W, None, "relu"), lambda: TF.relu(TF.linear(x, W))),
        ("matmul_epilogue", lambda: F.matmul_epilogue(a3, b3), lambda: torch.bmm(a3, b3)),
        ("conv2d_bias_act", lambda: F.conv2d_bias_act(xc, wc, bc, 1, 1), lambda: TF.conv2d(xc, wc, bc, 1, 1)),
        ("sdpa", lambda: F.scaled_dot_product_attention(q, q, q),
         lambda: TF.scaled_dot_product_attention(q, q, q)),
    ]


def instructions(case, side, calls):
    """User-space instructions of a process that makes `calls` calls of one case."""
    cmd = ["perf", "stat", "-x,", "-e", "instructions:u", sys.executable, __file__, "--run", case,
           side, str(calls)]
    r = subprocess.run(cmd, capture_output=True, text=True, env=os.environ)
    if r.returncode != 0:
        raise RuntimeError(f"perf stat failed: {r.stderr.strip()[-400:]}")
    for line in r.stderr.splitlines():
        if "instructions" in line:
            return int(line.split(",")[0])
    raise RuntimeError(f"no instruction count in: {r.stderr[-400:]}")


def run_case(case, side, calls):
    torch.set_num_threads(1)
    fns = {name: (ours, aten) for name, ours, aten in cases()}
    fn = fns[case][0 if side == "ours" else 1]
    with torch.no_grad():
        for _ in range(calls + 100):  # 100 calls in both runs: first-call work cancels
            fn()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--iters", type=int, default=200, help="calls per timed batch")
    p.add_argument("--instructions", action="store_true", help="count instructions (perf stat)")
    p.add_argument("--run", nargs=3, metavar=("CASE", "SIDE", "CALLS"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.run:
        return run_case(args.run[0], args.run[1], int(args.run[2]))
    if args.instructions:
        n = args.iters * 5
        print(f"torch {torch.__version__}, CPU, user-space instructions per call ({n} calls)")
        print(f"{'op':30s} {'dnngraph':>10s} {'ATen':>10s} {'ratio':>6s}")
        for name, _, _ in cases():
            per = []
            for side in ("ours", "aten"):
                base = instructions(name, side, 0)
                per.append((instructions(name, side, n) - base) / n)
            print(f"{name:30s} {per[0]:10.0f} {per[1]:10.0f} {per[0] / per[1]:6.2f}")
        return
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, CPU, 1 thread, {time.strftime('%Y-%m-%d %H:%M')}")
    print(f"{'op':30s} {'dnngraph us':>12s} {'ATen us':>9s} {'ratio':>6s}")
    with torch.no_grad():
        for name, ours, aten in cases():
            o, a = per_call_us([ours, aten], args.iters)
            print(f"{name:30s} {o:12.2f} {a:9.2f} {o / a:6.2f}")
    print("cache:", dt.cache_info())


if __name__ == "__main__":
    main()
