#!/usr/bin/env python3
"""Source files over 600 lines and functions over 120 lines, outside an allowlist.

Usage: scripts/code-size.py [--all]
  Searches src/ include/ python/ torch/ tools/ (C++ and Python, tests excluded). Prints each
  file or function over its limit; those in scripts/code-size-allowlist.txt (one
  `path[:function]  reason` a line) are marked allowed. Exits 1 when one is not allowed.
  --all: also prints the counts of files and functions over the limits.

A C++ function is a definition whose header starts in column 0 (namespace scope, the style
here) and whose body ends at the next `}` in column 0; a Python function is a `def` and the
lines indented under it.
"""
import os
import re
import sys

FILE_LIMIT = 600
FUNCTION_LIMIT = 120
ROOTS = ("src", "include", "python", "torch", "tools")
ROOT = os.getcwd()  # the repository root
CPP_HEAD = re.compile(r"^(?!namespace\b|struct\b|class\b|enum\b|union\b|using\b|template\b|"
                      r"static_assert\b|return\b|extern\b)[A-Za-z_]")
CPP_NAME = re.compile(r"([A-Za-z_][A-Za-z0-9_:~]*)\s*\(")


def sources():
    for root in ROOTS:
        for d, dirs, files in os.walk(os.path.join(ROOT, root)):
            dirs[:] = [x for x in dirs if x not in ("tests", "test", "__pycache__")]
            for f in sorted(files):
                if f.endswith((".cpp", ".hpp", ".h", ".cu", ".py")):
                    yield os.path.relpath(os.path.join(d, f), ROOT)


def cpp_functions(lines):
    i = 0
    while i < len(lines):
        line = lines[i]
        if not CPP_HEAD.match(line) or "(" not in line:
            i += 1
            continue
        # The header runs to the first line that ends in '{' (a definition) or ';' (not one).
        j = i
        while j < len(lines) and j - i < 8 and not lines[j].rstrip().endswith(("{", ";", "}")):
            j += 1
        if j >= len(lines) or not lines[j].rstrip().endswith("{"):
            i = j + 1
            continue
        end = j + 1
        while end < len(lines) and not lines[end].startswith("}"):
            end += 1
        names = [n for n in CPP_NAME.findall(line) if n not in ("if", "for", "while")]
        yield (names[0] if names else "?"), i + 1, end - i + 1
        i = end + 1


def py_functions(lines):
    for i, line in enumerate(lines):
        m = re.match(r"^(\s*)def\s+([A-Za-z_0-9]+)", line)
        if not m:
            continue
        indent = len(m.group(1))
        end = i + 1
        last = i
        while end < len(lines):
            s = lines[end]
            if s.strip():
                if len(s) - len(s.lstrip()) <= indent and not s.lstrip().startswith((")", "]")):
                    break
                last = end
            end += 1
        yield m.group(2), i + 1, last - i + 1


def allowlist():
    allowed = {}
    path = os.path.join(ROOT, "scripts", "code-size-allowlist.txt")
    if os.path.exists(path):
        for line in open(path, encoding="utf-8"):
            line = line.strip()
            if line and not line.startswith("#"):
                key, _, why = line.partition(" ")
                allowed[key] = why.strip()
    return allowed


def main():
    allowed = allowlist()
    bad = files_over = functions_over = 0
    for rel in sources():
        lines = open(os.path.join(ROOT, rel), encoding="utf-8", errors="replace").read().split("\n")
        n = len(lines) - (1 if lines and lines[-1] == "" else 0)
        found = []
        if n > FILE_LIMIT:
            files_over += 1
            found.append((rel, f"{rel}: {n} lines (limit {FILE_LIMIT})"))
        fns = py_functions(lines) if rel.endswith(".py") else cpp_functions(lines)
        for name, line, length in fns:
            if length > FUNCTION_LIMIT:
                functions_over += 1
                found.append((f"{rel}:{name}",
                              f"{rel}:{line}: {name} is {length} lines (limit {FUNCTION_LIMIT})"))
        for key, text in found:
            if key in allowed:
                print(f"allowed  {text}: {allowed[key]}")
            else:
                print(f"OVER     {text}")
                bad += 1
    if "--all" in sys.argv:
        print(f"{files_over} file(s) over {FILE_LIMIT} lines, {functions_over} function(s) over "
              f"{FUNCTION_LIMIT} lines, {bad} not in the allowlist")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
