#!/usr/bin/env python3
"""Host cost of pygraph.execute() from Python on the GPU vs Graph::execute from C++, on the
same tiny graph as bench/gpu/bench_host_overhead.cpp (bf16 matmul [1,64,64] x [1,64,64]),
both measured in one run. Target (issue 5): Python <= C++ + 2 us.

    PYTHONPATH=build/gpu/python python3 bench/python/gpu_execute_overhead.py \
        --cpp build/gpu/bench/bench_host_overhead
"""
import argparse
import re
import subprocess
import sys
import timeit

import torch

import dnngraph as cudnn


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cpp", help="bench_host_overhead binary to run for the C++ figure")
    ap.add_argument("--calls", type=int, default=2000)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("SKIP gpu_execute_overhead: no CUDA device")
        return 0
    h = cudnn.create_handle()
    cudnn.set_stream(handle=h, stream=torch.cuda.current_stream().cuda_stream)
    a = torch.randn(1, 64, 64, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(1, 64, 64, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(1, 64, 64, device="cuda", dtype=torch.bfloat16)
    g = cudnn.pygraph(handle=h, name="tiny_mm", io_data_type=cudnn.data_type.BFLOAT16,
                      intermediate_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT)
    A, B = g.tensor_like(a), g.tensor_like(b)
    C = g.matmul(A=A, B=B, compute_data_type=cudnn.data_type.FLOAT)
    C.set_output(True).set_data_type(cudnn.data_type.BFLOAT16)
    g.build()
    ws = torch.empty(max(g.get_workspace_size(), 1), device="cuda", dtype=torch.uint8)
    by_tensor = {A: a, B: b, C: c}
    by_uid = {A.get_uid(): a, B.get_uid(): b, C.get_uid(): c}
    g.execute(by_tensor, ws)
    torch.cuda.synchronize()
    ref = torch.bmm(a.float(), b.float())
    rel = ((c.float() - ref).abs().max() / ref.abs().max()).item()
    print(f"CHECK tiny bf16 matmul vs torch: rel err {rel:.2e} {'PASS' if rel < 1e-2 else 'FAIL'}")

    def per_call(fn):
        best = min(timeit.repeat(fn, number=args.calls, repeat=7)) / args.calls * 1e6
        torch.cuda.synchronize()
        return best

    py_tensor = per_call(lambda: g.execute(by_tensor, ws))
    py_uid = per_call(lambda: g.execute(by_uid, ws, handle=h))
    print(f"RESULT python execute (pack keyed by tensor)  min {py_tensor:6.2f} us/call")
    print(f"RESULT python execute (pack keyed by uid)     min {py_uid:6.2f} us/call")
    if args.cpp:
        out = subprocess.run([args.cpp], capture_output=True, text=True).stdout
        m = re.search(r"dnngraph Graph::execute\s+median ([\d.]+) us, min ([\d.]+) us", out)
        if m:
            cpp_min = float(m.group(2))
            d = min(py_tensor, py_uid) - cpp_min
            print(f"RESULT C++ Graph::execute (same run)         min {cpp_min:6.2f} us/call")
            print(f"TARGET python <= C++ + 2 us: {'MET' if d <= 2.0 else 'MISSED'} ({d:+.2f} us)")
    return 0 if rel < 1e-2 else 1


if __name__ == "__main__":
    sys.exit(main())
