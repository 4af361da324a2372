#!/usr/bin/env bash
# The README's C++ example must be samples/readme_example.cpp verbatim (which CI builds and runs).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python3}
diff <("$PY" -c "import re;print(re.search(r'\`\`\`cpp\n(.*?)\`\`\`', open('README.md').read(), re.S).group(1), end='')") \
     <(tail -n +2 samples/readme_example.cpp) && echo "README example matches samples/readme_example.cpp"
# The README's Python example runs (CPU handle) against the in-tree build.
if [ -n "${PYTHONPATH_BUILD:-}" ]; then
  "$PY" -c "import re;print(re.search(r'\`\`\`python\n(.*?)\`\`\`', open('README.md').read(), re.S).group(1))" \
    | PYTHONPATH="$PYTHONPATH_BUILD" "$PY" - >/dev/null && echo "README Python example runs"
fi
