"""The frontend's engine registry (``cudnn.engines``) as dnngraph answers it.

The cuDNN frontend serves some graphs with engines of its own written in Python (CuTe DSL
kernels for compute capability 10.x, ...) and lists them in ``cudnn.engines.manifest``.
dnngraph has none of those engines: every plan it builds runs on cuDNN's backend (or, on a CPU
handle, on the reference engine). ``manifest.MANIFEST`` names the frontend's engine families so
that code asking "does this family offer engine X here?" gets the true answer: no.
"""

from . import manifest

__all__ = ["manifest"]
