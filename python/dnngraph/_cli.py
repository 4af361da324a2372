"""The ``dnngraph`` console script: runs the command line tool shipped in the wheel."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def main() -> None:
    exe = Path(__file__).resolve().parent / "bin" / "dnngraph"
    if not exe.is_file():
        sys.stderr.write(
            f"dnngraph: the command line tool is not installed at {exe} (this package was not "
            "built by pip install; in a source tree use build/release/tools/dnngraph)\n"
        )
        sys.exit(2)
    os.execv(str(exe), [str(exe), *sys.argv[1:]])


if __name__ == "__main__":
    main()
