#!/usr/bin/env python3
"""Runs the frontend-style programs of tests/compat twice on a GPU machine -- once with the cuDNN
frontend (`import cudnn`) and once with dnngraph (`import dnngraph as cudnn`) -- and prints a
table: does each run, its error against the float64 reference, how far the two outputs are
apart, the first-run time (graph build + first execute) and the steady execute time.

    python3 scripts/compat-compare.py [--build build/release] [--wheel PATH] [--iters 50]
                                      [--programs a,b,...] [--markdown out.md]
                                      [--timeout 180]

The frontend comes from an importable `cudnn`, else from its wheel (--wheel, or .whl/*.whl,
or /work/fe/*.whl) installed with `pip install --no-deps --target build/fe-wheel`; dnngraph from
--build/python. Each program runs in its own process (one implementation per process).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The programs and their harness (not the repository root on sys.path: its torch/ directory
# would pass for a torch package where torch is not installed).
COMPAT = os.path.join(ROOT, "tests", "compat")


def child(impl: str, name: str, out: str, iters: int) -> None:
    """One program with one implementation: outputs to out.npz, facts to out.json."""
    import numpy as np

    sys.path.insert(0, COMPAT)
    import compat_harness as harness

    facts = {"impl": impl, "program": name}
    try:
        h = harness.load(impl=impl)
        facts["device"] = h.device
        prog = __import__(f"compat_programs.{name}", fromlist=["run"])
        t0 = time.perf_counter()
        result = prog.run(h)
        h.sync()
        facts["first_run_ms"] = (time.perf_counter() - t0) * 1e3
        if result is None:
            facts["status"] = "skipped"
        else:
            outs = {k: harness._np(v) if not isinstance(v, np.ndarray) else v.astype(np.float64)
                    for k, v in result.outputs.items()}
            np.savez(out + ".npz", **outs)
            if result.notes:
                facts["notes"] = {k: str(v) for k, v in result.notes.items()}
            try:
                facts["ref_error"] = harness.check(result)
                facts["status"] = "ok"
            except AssertionError as e:
                facts["status"] = "wrong"
                facts["message"] = str(e)
            if result.execute is not None:
                for _ in range(3):
                    result.execute()
                h.sync()
                t0 = time.perf_counter()
                for _ in range(iters):
                    result.execute()
                h.sync()
                facts["execute_us"] = (time.perf_counter() - t0) / iters * 1e6
    except Exception as e:  # noqa: BLE001 -- reported in the table
        facts["status"] = "error"
        facts["message"] = f"{type(e).__name__}: {e}".splitlines()[0][:300]
    with open(out + ".json", "w") as f:
        json.dump(facts, f)


def frontend_path(wheel: str | None) -> str | None:
    """A PYTHONPATH entry holding the frontend's `cudnn` package (None: already importable)."""
    probe = subprocess.run([sys.executable, "-c", "import cudnn, sys; sys.exit(0)"],
                           capture_output=True)
    if probe.returncode == 0 and not wheel:
        return None
    target = os.path.join(ROOT, "build", "fe-wheel")
    if os.path.isdir(os.path.join(target, "cudnn")):
        return target
    wheels = [wheel] if wheel else (glob.glob(os.path.join(ROOT, ".whl", "*.whl")) +
                                    glob.glob("/work/fe/*.whl"))
    if not wheels:
        sys.exit("compat-compare: no `cudnn` importable and no frontend wheel (--wheel PATH)")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target",
                    target, wheels[0]], check=True)
    return target


def run_one(impl: str, name: str, env: dict, iters: int, tmp: str, timeout: float) -> dict:
    out = os.path.join(tmp, f"{impl}-{name}")
    cmd = [sys.executable, os.path.abspath(__file__), "--child", impl, name, out, str(iters)]
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "message": f"no result within {timeout:.0f} s",
                "outputs": None}
    try:
        with open(out + ".json") as f:
            facts = json.load(f)
    except OSError:
        tail = (p.stderr or p.stdout).strip().splitlines()[-1:] or ["no output"]
        facts = {"status": "crashed", "message": f"exit {p.returncode}: {tail[0][:300]}"}
    facts["outputs"] = out + ".npz" if os.path.exists(out + ".npz") else None
    return facts


def fmt(f: dict) -> str:
    s = f.get("status", "?")
    if s == "ok":
        err = max(f.get("ref_error", {0: 0}).values() or [0])
        return f"ok (ref err {err:.1e})"
    return f"{s}: {f.get('message', '')[:90]}" if f.get("message") else s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build", "release"))
    ap.add_argument("--wheel")
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--programs")
    ap.add_argument("--markdown", help="write the table here (rewritten after each program)")
    ap.add_argument("--timeout", type=float, default=180, help="seconds per program and library")
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        impl, name, out, iters = a.child
        child(impl, name, out, int(iters))
        return

    import numpy as np

    sys.path.insert(0, COMPAT)
    from compat_programs import NAMES

    names = a.programs.split(",") if a.programs else NAMES
    fe = frontend_path(a.wheel)
    base = dict(os.environ)
    env_fe = dict(base, PYTHONPATH=os.pathsep.join(filter(None, [fe, COMPAT,
                                                                 base.get("PYTHONPATH")])))
    env_dg = dict(base, PYTHONPATH=os.pathsep.join(filter(None, [
        os.path.join(a.build, "python"), COMPAT, base.get("PYTHONPATH")])))
    rows, notes = [], []
    text = table(rows, len(names))
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            f = run_one("frontend", name, env_fe, a.iters, tmp, a.timeout)
            d = run_one("dnngraph", name, env_dg, a.iters, tmp, a.timeout)
            diff = "-"
            same = "-"
            if f.get("outputs") and d.get("outputs"):
                fo, do = np.load(f["outputs"]), np.load(d["outputs"])
                worst = 0.0
                for k in fo.files:
                    if k not in do.files or fo[k].shape != do[k].shape:
                        worst = float("inf")
                        continue
                    x, y = fo[k], do[k]
                    worst = max(worst, float(np.max(np.abs(x - y) / np.maximum(1.0, np.abs(x))))
                                if x.size else 0.0)
                diff = f"{worst:.1e}"
                same = "yes" if f["status"] == d["status"] == "ok" else "no"
            elif f.get("status") == d.get("status"):
                same = "yes" if f.get("status") in ("ok", "skipped") else "both fail"
            else:
                same = "no"

            def t(x: dict, key: str, unit: str) -> str:
                return f"{x[key]:.1f} {unit}" if key in x else "-"

            rows.append([name, fmt(f), fmt(d), diff, same, t(f, "first_run_ms", "ms"),
                         t(d, "first_run_ms", "ms"), t(f, "execute_us", "us"),
                         t(d, "execute_us", "us")])
            print(f"{name}: frontend {fmt(f)} | dnngraph {fmt(d)} | diff {diff}", flush=True)
            for impl, x in (("frontend", f), ("dnngraph", d)):
                if x.get("notes"):
                    line = "; ".join(f"{k}: {v}" for k, v in x["notes"].items())
                    notes.append(f"- {name}, {impl}: {line}")
                    print(f"  {impl} notes: {line}", flush=True)
            text = table(rows, len(names), notes)
            if a.markdown:  # after each program: a run cut short still leaves its rows
                with open(a.markdown, "w") as out:
                    out.write(text + "\n")
    print()
    print(text)


def table(rows: list, planned: int, notes: list | None = None) -> str:
    head = ["program", "frontend", "dnngraph", "max rel diff", "same result",
            "frontend first run", "dnngraph first run", "frontend execute", "dnngraph execute"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    agree = sum(r[4] == "yes" for r in rows)
    lines.append("")
    lines.append(f"{agree} of {len(rows)} programs give the same result with both"
                 + (f" ({planned - len(rows)} of {planned} not run)." if len(rows) < planned
                    else "."))
    if notes:  # what programs report beyond their outputs (e.g. build times)
        lines += ["", "Notes:"] + notes
    return "\n".join(lines)


if __name__ == "__main__":
    main()
