#!/usr/bin/env python3
"""Runs the Python code of a cuDNN-frontend graph-API tutorial unchanged against dnngraph.

usage: run_tutorial.py TUTORIAL.txt [--require "2." "3." ...]

The tutorial text (code with prose paragraphs between the blocks) is not part of this
repository; pass its path. The prose is dropped, `import cudnn` resolves to `dnngraph`, and
the tutorial's `pip install nvidia-cudnn-frontend` step is skipped (no network is needed: the
package it installs is what dnngraph replaces). Every other line runs as written. Exits 1 when
a section named by --require (by its number prefix, default 2.-5.) did not complete.
"""
import argparse
import ast
import subprocess
import sys

import dnngraph


def code_of(text: str) -> str:
    """Keeps the blank-line separated blocks that are Python (a block that only parses
    together with the next ones, like a string spanning blank lines, is kept with them) and
    drops the prose paragraphs between them."""
    blocks = [b for b in text.split("\n\n")]
    out, i = [], 0
    while i < len(blocks):
        for j in range(i + 1, min(i + 6, len(blocks)) + 1):
            try:
                ast.parse("\n\n".join(blocks[i:j]))
                out.append("\n\n".join(blocks[i:j]))
                i = j
                break
            except SyntaxError:
                continue
        else:
            i += 1  # prose
    return "\n\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tutorial")
    ap.add_argument("--require", nargs="*", default=["2.", "3.", "4.", "5."])
    args = ap.parse_args()
    src = code_of(open(args.tutorial, encoding="utf-8").read())
    ast.parse(src)  # fail early and clearly if extraction went wrong

    real_run = subprocess.run

    def run(cmd, *a, **kw):
        if isinstance(cmd, (list, tuple)) and "install" in cmd and "nvidia-cudnn-frontend" in cmd:
            print("  [run_tutorial] skipped: pip install nvidia-cudnn-frontend (dnngraph stands in)")
            return subprocess.CompletedProcess(cmd, 0)
        return real_run(cmd, *a, **kw)

    subprocess.run = run
    sys.modules["cudnn"] = dnngraph
    ns = {"__name__": "__main__"}
    exec(compile(src, args.tutorial, "exec"), ns)
    results = ns.get("RESULTS", {})
    failed = [k for k in results if any(k.startswith(r) for r in args.require)
              and str(results[k]).startswith("SKIPPED / FAILED")]
    missing = [r for r in args.require if not any(k.startswith(r) for k in results)]
    if failed or missing:
        print(f"[run_tutorial] required sections failed: {failed} missing: {missing}")
        return 1
    print("[run_tutorial] required sections passed:", ", ".join(args.require))
    return 0


if __name__ == "__main__":
    sys.exit(main())
