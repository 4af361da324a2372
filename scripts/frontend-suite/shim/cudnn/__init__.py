"""Measurement shim: ``import cudnn`` gives the ``dnngraph`` module.

Put the directory that holds this ``cudnn/`` folder first on PYTHONPATH (before the dnngraph
build and before any site-packages that might hold the real cuDNN frontend). After
``import cudnn``:

* ``sys.modules["cudnn"]`` is the ``dnngraph`` package itself (``cudnn is dnngraph``);
* ``import cudnn.X`` / ``from cudnn.X import Y`` give the module ``dnngraph.X`` (the same object,
  not a second copy), through a meta-path finder; a submodule dnngraph lacks raises the usual
  ModuleNotFoundError (named ``cudnn.X``), which is a fact worth reporting, not hiding.

It never falls back to the real frontend: if ``import dnngraph`` fails, ``import cudnn`` fails.
"""

import importlib
import importlib.abc
import importlib.util
import sys

_PREFIX = "cudnn."
_TARGET = "dnngraph"


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, target_name):
        self._target_name = target_name
        self._target_spec = None

    def create_module(self, spec):
        module = importlib.import_module(self._target_name)
        self._target_spec = getattr(module, "__spec__", None)
        return module

    def exec_module(self, module):
        # module_from_spec() stamped the alias spec on the real module; give it back its own.
        if self._target_spec is not None:
            module.__spec__ = self._target_spec


class _AliasFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if not fullname.startswith(_PREFIX):
            return None
        real = _TARGET + "." + fullname[len(_PREFIX):]
        try:
            found = importlib.util.find_spec(real)
        except (ImportError, ValueError):
            found = None
        if found is None:
            return None  # the import system then raises ModuleNotFoundError for cudnn.X
        return importlib.util.spec_from_loader(fullname, _AliasLoader(real))


if not any(isinstance(f, _AliasFinder) for f in sys.meta_path):
    sys.meta_path.insert(0, _AliasFinder())

import dnngraph as _dnngraph  # noqa: E402  (no fallback to the real frontend, on purpose)

sys.modules[__name__] = _dnngraph
# Submodules dnngraph already imported answer to their cudnn.* names too.
for _name, _mod in list(sys.modules.items()):
    if _name.startswith(_TARGET + ".") and _mod is not None:
        sys.modules.setdefault("cudnn." + _name[len(_TARGET) + 1:], _mod)
