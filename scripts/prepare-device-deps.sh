#!/usr/bin/env bash
# Run HERE (the CPU machine): copies the header-only dependencies and GoogleTest's sources that
# the GPU machine lacks into a folder (default: .devdeps/ of the repo root, gitignored), which
# the device tool then carries. Usage: scripts/prepare-device-deps.sh [target-dir]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest=${1:-$root/.devdeps}
mkdir -p "$dest"
rm -rf "$dest/nlohmann" "$dest/CLI" "$dest/googletest"
cp -a /usr/include/nlohmann "$dest/nlohmann"
cp -a /usr/include/CLI "$dest/CLI"
cp -f /usr/include/xxhash.h "$dest/xxhash.h"
cp -f /usr/include/sqlite3.h "$dest/sqlite3.h"  # the plan cache on disk (the library is there)
cp -a /usr/src/googletest "$dest/googletest"
# Optional: a graph-API tutorial text for scripts/run_tutorial.py (not part of the repo).
if [ -n "${TUTORIAL:-}" ]; then cp -f "$TUTORIAL" "$dest/tutorial.txt"; fi
echo "device dependencies in $dest ($(du -sh "$dest" | cut -f1))"
