"""The ``dnngraph`` backend of ``torch.compile``: AOTAutograd, the dnngraph pass on each ATen
graph (forward, backward, inference), then the inner compiler on what is left."""

from __future__ import annotations

import functools
import itertools
import threading

import torch
from torch._dynamo.backends.common import aot_autograd
from torch._functorch.aot_autograd import make_boxed_func

from ._fxpass import run_pass

INNERS = ("inductor", "eager")
# torch.compile's modes; the backend reads "max-autotune" (the inner Inductor's autotuning).
MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")

_local = threading.local()
_graph_ids = itertools.count()


def _collecting():
    return getattr(_local, "reports", None)


class collect_reports:
    """Context manager: the reports of every graph compiled inside it, in order."""

    def __enter__(self):
        self.saved = _collecting()
        _local.reports = []
        return _local.reports

    def __exit__(self, *exc):
        _local.reports = self.saved
        return False


def _inner_compile(gm, example_inputs, inner, mode):
    if inner == "eager":
        return make_boxed_func(gm.forward)
    from torch._inductor.compile_fx import compile_fx_inner

    # The ATen graph keeps ops Inductor would have decomposed (layer norm, gelu, ...): trace it
    # again with Inductor's decompositions; run_graph calls stay single ops (fake kernels).
    from torch._inductor.decomposition import select_decomp_table
    from torch.fx.experimental.proxy_tensor import make_fx

    fake_mode = torch._guards.detect_fake_mode(example_inputs)
    with _maybe(fake_mode):
        decomposed = make_fx(
            gm, decomposition_table=select_decomp_table(), tracing_mode="real",
        )(*example_inputs)
    config = {"max_autotune": True} if mode == "max-autotune" else {}
    with torch._inductor.config.patch(config):
        return compile_fx_inner(decomposed, example_inputs)


def _maybe(ctx):
    import contextlib

    return ctx if ctx is not None else contextlib.nullcontext()


def _compiler(kind: str, inner: str, mode, fuse_pointwise, gm, example_inputs):
    name = f"{kind}_{next(_graph_ids)}"
    report = run_pass(gm, graph_name=name, pointwise=fuse_pointwise)
    reports = _collecting()
    if reports is not None:
        reports.append(report)
    return _inner_compile(gm, example_inputs, inner, mode)


def make_backend(inner: str = "inductor", mode=None, fuse_pointwise: bool = False):
    """The backend callable (``torch.compile(model, backend=make_backend("eager"))``).

    ``fuse_pointwise``: also claim partitions of pointwise and reduction ops alone (by default
    they go to the inner compiler, which fuses them as well)."""
    if not isinstance(inner, str) or inner not in INNERS:
        raise ValueError(
            f"dnngraph backend: options['inner'] is {inner!r}; expected one of {INNERS}"
        )
    if not (mode is None or isinstance(mode, str)) or mode not in MODES:
        raise ValueError(f"dnngraph backend: mode={mode!r}; expected one of {MODES}")
    if not isinstance(fuse_pointwise, bool):
        raise ValueError(
            f"dnngraph backend: options['fuse_pointwise'] is {fuse_pointwise!r}; expected True "
            "or False"
        )
    return aot_autograd(
        fw_compiler=functools.partial(_compiler, "forward", inner, mode, fuse_pointwise),
        bw_compiler=functools.partial(_compiler, "backward", inner, mode, fuse_pointwise),
        inference_compiler=functools.partial(
            _compiler, "inference", inner, mode, fuse_pointwise
        ),
    )


def dnngraph_backend(gm, example_inputs, options=None, mode=None):
    """``torch.compile(model, backend="dnngraph", options={"inner": "inductor" | "eager",
    "fuse_pointwise": False})``."""
    if options is not None and not isinstance(options, dict):
        raise ValueError(
            f"dnngraph backend: options is a {type(options).__name__}; expected a dict such as "
            "{'inner': 'eager', 'fuse_pointwise': False}"
        )
    options = dict(options or {})
    inner = options.pop("inner", "inductor")
    fuse_pointwise = options.pop("fuse_pointwise", None) or False
    if options:
        raise ValueError(
            f"dnngraph backend: unknown options {sorted(options)}; the backend takes 'inner' "
            "and 'fuse_pointwise'"
        )
    return make_backend(inner, mode, fuse_pointwise)(gm, example_inputs)


def register():
    """Registers the backend under the name ``dnngraph`` (once)."""
    from torch._dynamo import list_backends
    from torch._dynamo.backends.registry import register_backend

    if "dnngraph" not in list_backends(exclude_tags=()):
        register_backend(name="dnngraph")(dnngraph_backend)
