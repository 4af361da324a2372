#!/usr/bin/env python3
"""Graph description to first result, in fresh processes, for the cuDNN frontend (`import
cudnn`) and dnngraph (`import dnngraph as cudnn`) side by side (issue 12).

Each case runs in a new Python process per library: a warm-up graph (the first in the process:
library loading, first JIT), then graphs of new shapes, each timed from the first pygraph call
to the synchronized end of its first execute. Every process runs twice and the second is
reported (CUDA's own JIT cache on disk is then warm for both libraries). Results are checked
against torch (bf16 tolerances). `--persist` adds dnngraph's kernel cache kept in a file: one
process builds and saves it, a new one loads it before its first dynamic-shape build.

    PYTHONPATH=build/gpu/python:/tmp/fe python3 bench/python/build_latency.py [--json out.json]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

CASES = {
    # name: (description, warm-up shape, later shapes)
    "conv": ("conv 3x3 bf16 NHWC, new batch sizes", 8, [16, 24, 40, 64]),
    "conv_dyn": ("same conv, dynamic shapes + shared kernel cache", 8, [16, 24, 40, 64]),
    "mm_gelu": ("matmul->bias->GELU bf16, new shapes", 128, [256, 512]),
    "int8_mm": ("int8 x bf16 matmul (identity cast, then matmul)", 128, [256, 512]),
    "sdpa": ("causal SDPA bf16, new sequence lengths", 256, [512, 1024]),
}


# ---------------------------------------------------------------- child side
def child(lib, case, shapes, kc_load, kc_save):
    import torch

    if lib == "frontend":
        import cudnn
    else:
        import dnngraph as cudnn
    dt = cudnn.data_type
    torch.manual_seed(0)
    handle = cudnn.create_handle()
    stream = torch.cuda.current_stream().cuda_stream
    cudnn.set_stream(handle=handle, stream=stream)
    kc = None
    if case == "conv_dyn":
        if kc_load and os.path.exists(kc_load):
            kc = cudnn.KernelCache.load(kc_load)
        else:
            kc = cudnn.create_kernel_cache()
    bf = torch.bfloat16

    def graph(**kw):
        return cudnn.pygraph(handle=handle, io_data_type=dt.BFLOAT16,
                             intermediate_data_type=dt.FLOAT, compute_data_type=dt.FLOAT, **kw)

    def run(n):
        t0 = time.perf_counter()
        if case in ("conv", "conv_dyn"):
            x = torch.randn(n, 64, 56, 56, device="cuda", dtype=bf).to(memory_format=torch.channels_last)
            w = torch.randn(64, 64, 3, 3, device="cuda", dtype=bf).to(memory_format=torch.channels_last)
            g = graph(kernel_cache=kc, is_dynamic_shape_enabled=True) if case == "conv_dyn" else graph()
            X, W = g.tensor_like(x), g.tensor_like(w)
            Y = g.conv_fprop(image=X, weight=W, padding=[1, 1], stride=[1, 1], dilation=[1, 1])
            Y.set_output(True)
            inputs = {X: x, W: w}
            ref = lambda: torch.nn.functional.conv2d(x.float(), w.float(), padding=1)
        elif case == "mm_gelu":
            a = torch.randn(4, n, 256, device="cuda", dtype=bf)
            b = torch.randn(4, 256, n, device="cuda", dtype=bf) * 0.1
            bias = torch.randn(1, 1, n, device="cuda", dtype=bf)
            g = graph()
            A, B, BI = g.tensor_like(a), g.tensor_like(b), g.tensor_like(bias)
            Y = g.gelu(input=g.bias(input=g.matmul(A=A, B=B), bias=BI))
            Y.set_output(True).set_data_type(dt.BFLOAT16)
            inputs = {A: a, B: b, BI: bias}
            ref = lambda: torch.nn.functional.gelu(torch.bmm(a.float(), b.float()) + bias.float())
        elif case == "int8_mm":
            a = torch.randint(-8, 8, (4, n, 256), device="cuda", dtype=torch.int8)
            b = torch.randn(4, 256, n, device="cuda", dtype=bf) * 0.1
            g = graph()
            A, B = g.tensor_like(a), g.tensor_like(b)
            Ac = g.identity(input=A, compute_data_type=dt.FLOAT)
            Ac.set_data_type(dt.BFLOAT16)
            Y = g.matmul(A=Ac, B=B, compute_data_type=dt.FLOAT)
            Y.set_output(True).set_data_type(dt.BFLOAT16)
            inputs = {A: a, B: b}
            ref = lambda: torch.bmm(a.float(), b.float())
        else:  # sdpa
            q, k, v = (torch.randn(2, 8, n, 64, device="cuda", dtype=bf) for _ in range(3))
            g = graph()
            Q, K, V = g.tensor_like(q), g.tensor_like(k), g.tensor_like(v)
            Y, _ = g.sdpa(q=Q, k=K, v=V, is_inference=True, attn_scale=0.125, use_causal_mask=True)
            Y.set_output(True).set_dim(list(q.shape)).set_stride(list(q.stride()))
            inputs = {Q: q, K: k, V: v}
            ref = lambda: torch.nn.functional.scaled_dot_product_attention(
                q.float(), k.float(), v.float(), is_causal=True, scale=0.125)
        g.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
        y = torch.empty_strided(Y.get_dim(), Y.get_stride(), device="cuda", dtype=bf)
        y.fill_(float("nan"))
        ws = torch.empty(max(g.get_workspace_size(), 1), device="cuda", dtype=torch.uint8)
        g.execute({**inputs, Y: y}, ws, handle=handle)
        torch.cuda.synchronize()
        ms = (time.perf_counter() - t0) * 1e3
        r = ref()
        err = ((y.float() - r).abs().max() / r.abs().max().clamp_min(1e-6)).item()
        return ms, err

    out = []
    for n in shapes:
        ms, err = run(n)
        out.append({"n": n, "ms": ms, "rel_err": err})
    if kc is not None and kc_save:
        kc.save(kc_save)
    print("RESULT " + json.dumps(out))


# ---------------------------------------------------------------- parent side
def run_child(lib, case, shapes, env, kc_load="", kc_save=""):
    cmd = [sys.executable, __file__, "--child", lib, case, ",".join(map(str, shapes)),
           kc_load or "-", kc_save or "-"]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:]), ""
    return None, (p.stderr.strip().splitlines() or ["rc=%d" % p.returncode])[-1][:200]


def fmt(rows, first):
    if rows is None:
        return "failed"
    sel = rows[:1] if first else rows[1:]
    bad = [r for r in rows if not (r["rel_err"] < 0.05)]
    s = "/".join("%.0f" % r["ms"] if r["ms"] >= 10 else "%.1f" % r["ms"] for r in sel)
    return s + (" (WRONG rel %.2g)" % bad[0]["rel_err"] if bad else "")


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        lib, case, shapes, kl, ks = sys.argv[2:7]
        child(lib, case, [int(s) for s in shapes.split(",")], "" if kl == "-" else kl,
              "" if ks == "-" else ks)
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default="", help="write all results here")
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--libs", default="frontend,dnngraph")
    ap.add_argument("--persist", action="store_true", help="also the persisted kernel cache case")
    ap.add_argument("--warm", action="store_true", help="also the plan cache, cold vs warm disk")
    args = ap.parse_args()
    env = dict(os.environ)
    env["DNNGRAPH_CACHE"] = "0"  # builds are measured here, not the plan cache (see --warm)
    results = {}
    print("| graph | frontend first / later (ms) | dnngraph first / later (ms) |")
    print("| --- | --- | --- |")
    for case in args.cases.split(","):
        desc, warm, later = CASES[case]
        shapes = [warm] + later
        cells = []
        for lib in args.libs.split(","):
            rows, err = None, ""
            for _ in range(2):  # the second fresh process is reported
                rows, err = run_child(lib, case, shapes, env)
            results[f"{case}/{lib}"] = rows if rows is not None else err
            cells.append(f"{fmt(rows, True)} / {fmt(rows, False)}" if rows else "failed: " + err)
        print(f"| {desc} (n={'/'.join(map(str, later))}) | " + " | ".join(cells) + " |", flush=True)
    if args.warm:
        # The conv graph in a cold process (empty plan cache) and in the next one (warm disk).
        with tempfile.TemporaryDirectory() as d:
            wenv = dict(os.environ, DNNGRAPH_CACHE_DIR=d)
            wenv.pop("DNNGRAPH_CACHE", None)
            cold, e1 = run_child("dnngraph", "conv", [8, 16], wenv)
            warm, e2 = run_child("dnngraph", "conv", [8, 16], wenv)
            fcold, e3 = run_child("frontend", "conv", [8, 16], env)
            results["conv_plan_cache/dnngraph"] = {"cold": cold or e1, "warm": warm or e2}
            if cold and warm:
                print(f"| conv n8 then n16 in a new process: plan cache cold vs warm | "
                      f"{fmt(fcold, True)} / {fmt(fcold, False)} (no cache) | "
                      f"cold {fmt(cold, True)} / {fmt(cold, False)}, warm {fmt(warm, True)} / "
                      f"{fmt(warm, False)} |")
            else:
                print(f"| plan cache cold vs warm | | failed: {e1} {e2} |")
    if args.persist:
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "kc.bin")
            _, err1 = run_child("dnngraph", "conv_dyn", [8, 16], env, kc_save=path)
            rows, err2 = run_child("dnngraph", "conv_dyn", [24, 40], env, kc_load=path)
            results["conv_dyn_persisted/dnngraph"] = rows if rows is not None else err1 + err2
            size = os.path.getsize(path) if os.path.exists(path) else 0
            print(f"| dynamic conv, kernel cache loaded from a file ({size} bytes) | n/a | "
                  f"{fmt(rows, True)} / {fmt(rows, False)} |" if rows else f"| persisted | n/a | failed: {err1} {err2} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
