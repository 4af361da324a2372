#!/usr/bin/env python3
"""Per-call cost of pygraph.execute() from Python vs Graph::execute from C++ on the same tiny
reference-engine graph (Y = relu(A + B), [1, 16] fp32). The difference is the binding's
overhead: walking the dict, reading array pointers, checking them, releasing the GIL.

    PYTHONPATH=build/release/python python3 bench/python/execute_overhead.py \
        [--cpp build/release/bench/bench_execute]
"""

import argparse
import json
import os
import subprocess
import sys
import time
import timeit

import numpy as np

import dnngraph


def tiny_graph():
    h = dnngraph.create_handle(device="cpu")
    g = dnngraph.pygraph(handle=h, name="tiny", io_data_type=dnngraph.data_type.FLOAT)
    A = g.tensor(name="A", dim=[1, 16], stride=[16, 1], data_type=dnngraph.data_type.FLOAT)
    B = g.tensor(name="B", dim=[1, 16], stride=[16, 1], data_type=dnngraph.data_type.FLOAT)
    Y = g.relu(input=g.add(a=A, b=B))
    Y.set_output(True)
    g.build()
    return g, A, B, Y


def per_call_us(fn, number, timer):
    # Best of several repeats: the least disturbed by other processes on the machine.
    return min(timeit.repeat(fn, number=number, repeat=7, timer=timer)) / number * 1e6


def cpp_numbers(binary):
    out = subprocess.run([binary, "--benchmark_format=json", "--benchmark_repetitions=5",
                          "--benchmark_report_aggregates_only=true"],
                         check=True, capture_output=True, text=True).stdout
    res = {}
    for b in json.loads(out)["benchmarks"]:
        if b.get("aggregate_name") == "median":
            scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3}[b["time_unit"]]
            res[b["run_name"]] = (b["real_time"] * scale, b["cpu_time"] * scale)
    return res


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    default_cpp = os.path.join(here, "..", "..", "build", "release", "bench", "bench_execute")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cpp", default=default_cpp, help="bench_execute binary")
    ap.add_argument("--number", type=int, default=20000)
    args = ap.parse_args()

    g, A, B, Y = tiny_graph()
    a = np.ones((1, 16), np.float32)
    b = np.full((1, 16), -0.5, np.float32)
    y = np.zeros((1, 16), np.float32)
    ws = np.empty(max(g.get_workspace_size(), 1), np.uint8)
    by_tensor = {A: a, B: b, Y: y}
    by_uid = {A.get_uid(): a, B.get_uid(): b, Y.get_uid(): y}
    g.execute(by_tensor, ws)
    assert np.allclose(y, 0.5)

    # Wall time and this thread's CPU time (the latter is less sensitive to a loaded machine).
    timers = {"wall": time.perf_counter, "cpu": time.thread_time}
    # (pack, workspace); None: the graph's own workspace (the plan has a virtual intermediate).
    cases = {"tensor keys": (by_tensor, ws), "uid keys": (by_uid, ws),
             "tensor keys, no ws": (by_tensor, None)}
    try:
        import torch

        ta, tb, ty = torch.ones(1, 16), torch.full((1, 16), -0.5), torch.zeros(1, 16)
        cases["torch cpu tensors"] = ({A: ta, B: tb, Y: ty}, ws)
    except ImportError:
        pass
    py = {k: tuple(per_call_us(lambda p=p, w=w: g.execute(p, w), args.number, t)
                   for t in timers.values()) for k, (p, w) in cases.items()}

    print(f"python {sys.version.split()[0]}, numpy {np.__version__}, dnngraph "
          f"{dnngraph.__version__}")
    for k, (wall, cpu) in py.items():
        print(f"  python execute ({k:<18s}): {wall:7.3f} us/call wall, {cpu:7.3f} us/call cpu")
    if not os.path.exists(args.cpp):
        print(f"  (C++ benchmark {args.cpp} not built: build target bench_execute)")
        return
    cpp = cpp_numbers(args.cpp)
    for k, (wall, cpu) in cpp.items():
        print(f"  C++ {k:<29s}: {wall:7.3f} us/call wall, {cpu:7.3f} us/call cpu")
    for base_name in ("BM_ExecutePrebuiltPack", "BM_ExecuteFreshPack"):
        bw, bc = cpp[base_name]
        for k, (wall, cpu) in py.items():
            print(f"  overhead of python ({k}) over {base_name}: {wall - bw:+.3f} us wall, "
                  f"{cpu - bc:+.3f} us cpu")


if __name__ == "__main__":
    main()
