"""The frontend's experimental APIs: ``dnngraph.experimental.ops`` (rms_norm, layer_norm, ...)."""

import sys

from . import _experimental_ops as ops

# `import dnngraph.experimental.ops` finds it here.
sys.modules[__name__ + ".ops"] = ops

__all__ = ["ops"]
