#!/usr/bin/env python3
"""Host cost of pygraph.execute() from Python on the GPU vs the C++ Graph::execute, on the same
tiny graph as bench/gpu/bench_host_overhead.cpp (bf16 matmul [1,64,64] x [1,64,64]) with torch
tensors. Both are measured in this process on the same plan and pointers: the C++ figure loops
Graph::execute in C++ (pygraph._time_execute), the Python figure loops pygraph.execute; rounds
alternate and the minimum over rounds is compared. Target (issue 5): Python <= C++ + 2 us.
Also prints what the pieces of a Python call cost (torch attribute reads, an empty binding call)
so a regression can be placed.

    PYTHONPATH=build/gpu/python python3 bench/python/gpu_execute_overhead.py
"""
import argparse
import statistics
import sys
import timeit

import torch

import dnngraph as cudnn


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=3000, help="calls per round")
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("SKIP gpu_execute_overhead: no CUDA device")
        return 0
    h = cudnn.create_handle()
    cudnn.set_stream(handle=h, stream=torch.cuda.current_stream().cuda_stream)
    a = torch.randn(1, 64, 64, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(1, 64, 64, device="cuda", dtype=torch.bfloat16)
    c = torch.full((1, 64, 64), float("nan"), device="cuda", dtype=torch.bfloat16)
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
    ok = rel < 1e-2
    print(f"CHECK tiny bf16 matmul vs torch: rel err {rel:.2e} {'PASS' if ok else 'FAIL'}")

    def py_round(pack):
        def fn():
            t = timeit.timeit(lambda: g.execute(pack, ws), number=args.calls) / args.calls * 1e6
            torch.cuda.synchronize()
            return t
        return fn

    def cpp_round():
        t = g._time_execute(by_tensor, ws, args.calls)
        torch.cuda.synchronize()
        return t

    # Two sets of buffers in turn, as the layers of a model that share one plan bind it: each
    # call binds other pointers than the last (the prepared variant pack is filled again; the
    # device of each address is asked of the driver the first time only).
    packs = [by_tensor, {A: a.clone(), B: b.clone(), C: torch.empty_like(c)}]

    def alternating_round():
        def call(i):
            g.execute(packs[i & 1], ws)
        t = timeit.timeit("call(i); i += 1", setup="i = 0", number=args.calls,
                          globals={"call": call}) / args.calls * 1e6
        torch.cuda.synchronize()
        return t

    # An empty lambda round: what timeit's loop and the lambda call cost by themselves.
    def loop_round():
        return timeit.timeit(lambda: None, number=args.calls) / args.calls * 1e6

    runs = {"C++ Graph::execute (in process)": cpp_round,
            "python execute, keys = tensors": py_round(by_tensor),
            "python execute, keys = uids": py_round(by_uid),
            "python execute, two buffer sets": alternating_round,
            "python loop + lambda alone": loop_round}
    for fn in runs.values():  # warm-up
        fn()
    times = {k: [] for k in runs}
    names = list(runs)
    for r in range(args.rounds):
        for k in range(len(names)):
            name = names[(r + k) % len(names)]
            times[name].append(runs[name]())
    for name in names:
        v = times[name]
        print(f"RESULT {name:34s} min {min(v):6.2f} us  median {statistics.median(v):6.2f} us")

    def each(stmt):
        return min(timeit.repeat(stmt, number=20000, repeat=5)) / 20000 * 1e6
    print(f"PIECE a.data_ptr()        {each(lambda: a.data_ptr()):.3f} us")
    print(f"PIECE a.is_cuda           {each(lambda: a.is_cuda):.3f} us")
    print(f"PIECE a.itemsize          {each(lambda: a.itemsize):.3f} us")
    print(f"PIECE cudnn.backend_version() {each(cudnn.backend_version):.3f} us")

    cpp = min(times[names[0]])
    py = min(min(times[names[1]]), min(times[names[2]]))
    loop = min(times[names[-1]])
    d = py - cpp
    print(f"TARGET python <= C++ + 2 us: {'MET' if d <= 2.0 else 'MISSED'} ({d:+.2f} us; "
          f"{d - loop:+.2f} us without the Python loop itself)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
