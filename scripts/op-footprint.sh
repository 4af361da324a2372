#!/usr/bin/env bash
# Lists the non-test source files that mention an op of the op table (DNNGRAPH_OPS in
# include/dnngraph/ir/ops.hpp), with how many lines in each: the files someone adding or
# changing that op has to read or edit.
#
# Usage: scripts/op-footprint.sh [--max N] OP...
#   OP is the op's table name (concatenate, reshape, slice, conv_fprop, ...).
#   --max N: exit 1 when an op is mentioned in more than N files (CI uses 6: the table line,
#   the public builder declaration, and one file per layer).
#
# A file mentions an op when it contains one of the identifiers its table line gives it:
#   - its OpKind enumerator (OpKind::Concat) or attribute struct (ConcatAttrs);
#   - its name as a string literal ("concatenate"), as JSON, Python and the op table use it;
#   - a per-layer entry point named after it: infer_/run_/lower_/bind_op_/bind_ops_ followed by
#     the op's name or the snake_case form of its OpKind (infer_concat, lower_concatenate, ...);
#   - a Graph builder method of its name, declared or defined (Tensor concatenate(...),
#     Graph::concatenate).
# Code that merely uses the op (a torch op calling g.reshape(...)) is not a mention.
# Searched: src/ include/ python/ torch/ tools/ (C++ and Python), without tests.
set -euo pipefail
cd "$(dirname "$0")/.."

max=""
if [[ "${1:-}" == "--max" ]]; then
  max=$2
  shift 2
fi
if [[ $# -eq 0 ]]; then
  echo "usage: scripts/op-footprint.sh [--max N] OP..." >&2
  exit 2
fi

table=include/dnngraph/ir/ops.hpp
status=0
for op in "$@"; do
  # The table line: OP(Kind, name, Attrs, ...
  line=$(grep -E "^\s*OP\(\w+, ${op}, \w+," "$table" || true)
  if [[ -z "$line" ]]; then
    echo "op-footprint: '${op}' is not an op of the table in ${table}" >&2
    exit 2
  fi
  kind=$(sed -E 's/^\s*OP\((\w+), .*/\1/' <<<"$line")
  attrs=$(sed -E 's/^\s*OP\(\w+, \w+, (\w+),.*/\1/' <<<"$line")
  stem=$(sed -E 's/([a-z0-9])([A-Z])/\1_\2/g' <<<"$kind" | tr '[:upper:]' '[:lower:]')
  pattern="OpKind::${kind}\b|\b${attrs}\b|\"${op}\"|\b(infer|run|lower|bind_ops?)_(${op}|${stem})\b"
  pattern+="|Graph::${op}\(|^\s*(Tensor|std::array<Tensor, [0-9]+>) ${op}\("
  files=$(grep -rlE --include='*.cpp' --include='*.hpp' --include='*.h' --include='*.py' \
    "$pattern" src include python torch tools 2>/dev/null | grep -vE '(^|/)tests?/' | sort || true)
  count=0
  echo "${op} (OpKind::${kind}, ${attrs}):"
  for f in $files; do
    n=$(grep -cE "$pattern" "$f")
    printf '  %-50s %3d line(s)\n' "$f" "$n"
    count=$((count + 1))
  done
  echo "  ${count} file(s)"
  if [[ -n "$max" && $count -gt $max ]]; then
    echo "op-footprint: ${op} is mentioned in ${count} files, more than ${max}" >&2
    status=1
  fi
done
exit $status
