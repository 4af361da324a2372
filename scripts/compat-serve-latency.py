#!/usr/bin/env python3
"""Build latency of serving attention on a GPU machine, the cuDNN frontend (`import cudnn`)
beside dnngraph (`import dnngraph as cudnn`), each case in fresh processes:

- static: a warm-up SDPA graph (library loading, the handle, the first JIT), then SDPA graphs
  of new shapes built with the frontend's five steps, each timed from the first `pygraph` call
  to the synchronized end of its first execute. Run twice with one plan cache directory
  (DNNGRAPH_CACHE_DIR): the first process starts cold, the second finds what the first built
  on disk (the frontend has no disk cache: its second process builds again).
- dynamic: one SDPA description for 21 (batch, sequence) shapes with dynamic shapes and one
  kernel cache (tests/compat/compat_programs/serve_dynamic_shapes.py's shapes): the first
  shape's time and the total of the 20 others.

Every output is checked against torch's scaled_dot_product_attention (max relative error).

    python3 scripts/compat-serve-latency.py [--build build/gpu] [--wheel PATH] [--markdown FILE]

SERVE_LATENCY_DEVICE=cpu runs dnngraph alone on its CPU engine (a dry run of the script on a
machine without a GPU; its times say nothing about the GPU).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COMPAT = os.path.join(ROOT, "tests", "compat")
STATIC = [(2, 256), (4, 512), (1, 1024), (8, 128)]  # (batch, sequence)
HEADS, D = 8, 128
DEVICE = os.environ.get("SERVE_LATENCY_DEVICE", "cuda")


def sync(torch):
    if DEVICE != "cpu":
        torch.cuda.synchronize()


def sdpa_once(cudnn, torch, handle, b, s, cache=None):
    """One causal bf16 SDPA graph built (five steps) and run: (ms, max relative error)."""
    q, k, v = (torch.randn(b, HEADS, s, D, device=DEVICE, dtype=torch.bfloat16)
               for _ in range(3))
    sync(torch)
    t0 = time.perf_counter()
    kw = dict(kernel_cache=cache, is_dynamic_shape_enabled=True) if cache is not None else {}
    g = cudnn.pygraph(handle=handle, io_data_type=cudnn.data_type.BFLOAT16,
                      intermediate_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT, **kw)
    Q, K, V = g.tensor_like(q), g.tensor_like(k), g.tensor_like(v)
    O, _ = g.sdpa(name="sdpa", q=Q, k=K, v=V, generate_stats=False,
                  attn_scale=1.0 / math.sqrt(D), use_causal_mask=True)
    O.set_output(True).set_dim([b, HEADS, s, D]).set_stride([HEADS * s * D, s * D, D, 1])
    O.set_data_type(cudnn.data_type.BFLOAT16)
    g.validate()
    g.build_operation_graph()
    g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    g.check_support()
    g.build_plans(cudnn.build_plan_policy.HEURISTICS_CHOICE)
    o = torch.full((b, HEADS, s, D), float("nan"), device=DEVICE, dtype=torch.bfloat16)
    ws = torch.empty(max(g.get_workspace_size(), 1), device=DEVICE, dtype=torch.uint8)
    g.execute({Q: q, K: k, V: v, O: o}, ws)
    sync(torch)
    ms = (time.perf_counter() - t0) * 1e3
    ref = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(),
                                                           is_causal=True)
    err = float((o.float() - ref).abs().max() / ref.abs().max())
    return ms, err


def child(impl: str, mode: str, out: str) -> None:
    t0 = time.perf_counter()
    import torch

    if impl == "frontend":
        import cudnn
    else:
        import dnngraph as cudnn
    facts = {"import_ms": (time.perf_counter() - t0) * 1e3}
    t0 = time.perf_counter()
    handle = cudnn.create_handle() if DEVICE != "cpu" else cudnn.create_handle(device="cpu")
    facts["handle_ms"] = (time.perf_counter() - t0) * 1e3
    facts["warmup_ms"], _ = sdpa_once(cudnn, torch, handle, 1, 64)
    runs = []
    if mode == "static":
        for b, s in STATIC:
            ms, err = sdpa_once(cudnn, torch, handle, b, s)
            runs.append({"shape": f"b{b} s{s}", "ms": ms, "err": err})
    else:
        sys.path.insert(0, COMPAT)
        from compat_programs.serve_dynamic_shapes import SHAPES

        cache = cudnn.create_kernel_cache()
        for b, s in SHAPES:
            ms, err = sdpa_once(cudnn, torch, handle, b, s, cache)
            runs.append({"shape": f"b{b} s{s}", "ms": ms, "err": err})
    facts["runs"] = runs
    with open(out, "w") as f:
        json.dump(facts, f)


def run_child(impl: str, mode: str, env: dict, tmp: str, tag: str) -> dict:
    out = os.path.join(tmp, f"{impl}-{mode}-{tag}.json")
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", impl, mode, out],
                       env=env, capture_output=True, text=True, timeout=300)
    if p.returncode or not os.path.exists(out):
        tail = (p.stderr or p.stdout).strip().splitlines()[-1:] or ["no output"]
        return {"error": f"exit {p.returncode}: {tail[0][:200]}"}
    with open(out) as f:
        return json.load(f)


def frontend_path(wheel: str | None) -> str | None:
    spec = importlib.util.spec_from_file_location(
        "compat_compare", os.path.join(ROOT, "scripts", "compat-compare.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.frontend_path(wheel)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build", "gpu"))
    ap.add_argument("--wheel")
    ap.add_argument("--markdown")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(*a.child)
        return
    fe = frontend_path(a.wheel) if DEVICE != "cpu" else None
    base = dict(os.environ)
    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        cache_dir = os.path.join(tmp, "plan-cache")
        env = {
            "frontend": dict(base, PYTHONPATH=os.pathsep.join(
                filter(None, [fe, base.get("PYTHONPATH")]))),
            "dnngraph": dict(base, DNNGRAPH_CACHE="1", DNNGRAPH_CACHE_DIR=cache_dir,
                             PYTHONPATH=os.pathsep.join(filter(None, [
                                 os.path.join(a.build, "python"), base.get("PYTHONPATH")]))),
        }
        res = {}
        impls = ("frontend", "dnngraph") if DEVICE != "cpu" else ("dnngraph",)
        for impl in ("frontend", "dnngraph"):
            if impl not in impls:
                res[impl, "cold"] = res[impl, "warm"] = res[impl, "dynamic"] = {"error": "not run"}
                continue
            res[impl, "cold"] = run_child(impl, "static", env[impl], tmp, "cold")
            res[impl, "warm"] = run_child(impl, "static", env[impl], tmp, "warm")
            res[impl, "dynamic"] = run_child(impl, "dynamic", env[impl], tmp, "dyn")
        for key, r in res.items():
            if "error" in r:
                lines.append(f"- {key[0]} {key[1]}: {r['error']}")

        def ms(impl, tag, i):
            r = res[impl, tag]
            return r["runs"][i]["ms"] if "runs" in r else float("nan")

        def err(impl, tag, i):
            r = res[impl, tag]
            return r["runs"][i]["err"] if "runs" in r else float("nan")

        lines += ["| shape (static, 5 steps) | frontend 1st / 2nd process (ms) | "
                  "dnngraph cold / warm disk cache (ms) | dnngraph warm / frontend 2nd | "
                  "max rel err (fe, dg) |", "| --- | --- | --- | --- | --- |"]
        for i, (b, s) in enumerate(STATIC):
            f1, f2 = ms("frontend", "cold", i), ms("frontend", "warm", i)
            d1, d2 = ms("dnngraph", "cold", i), ms("dnngraph", "warm", i)
            lines.append(f"| b{b} s{s} | {f1:.1f} / {f2:.1f} | {d1:.1f} / {d2:.1f} | "
                         f"{d2 / f2 if f2 == f2 else float('nan'):.2f}x | "
                         f"{err('frontend', 'warm', i):.1e}, "
                         f"{err('dnngraph', 'warm', i):.1e} |")
        lines.append("")
        for impl in ("frontend", "dnngraph"):
            r = res[impl, "cold"]
            if "runs" in r:
                lines.append(f"- {impl}: import {r['import_ms']:.0f} ms, handle "
                             f"{r['handle_ms']:.0f} ms, warm-up graph {r['warmup_ms']:.0f} ms "
                             f"(first process)")
        lines.append("")
        lines.append("| dynamic shapes, one kernel cache | first shape (ms) | 20 others, total "
                     "(ms) | others / first | worst rel err |")
        lines.append("| --- | --- | --- | --- | --- |")
        for impl in ("frontend", "dnngraph"):
            r = res[impl, "dynamic"]
            if "runs" not in r:  # refused (or failed): say so rather than leave the row out
                lines.append(f"| {impl} | {r.get('error', 'no result')} | | | |")
                continue
            first = r["runs"][0]["ms"]
            rest = sum(x["ms"] for x in r["runs"][1:])
            worst = max(x["err"] for x in r["runs"])
            lines.append(f"| {impl} | {first:.1f} | {rest:.1f} | {rest / first:.2f}x | "
                         f"{worst:.1e} |")
    text = "\n".join(lines)
    print(text)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
