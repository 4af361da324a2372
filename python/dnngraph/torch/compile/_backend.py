"""The ``dnngraph`` backend of ``torch.compile``: AOTAutograd, the dnngraph pass on each ATen
graph (forward, backward, inference), then the inner compiler on what is left."""

from __future__ import annotations

import functools
import itertools
import logging
import os
import threading
import time

import torch
from torch._dynamo.backends.common import aot_autograd
from torch._functorch.aot_autograd import make_boxed_func

from ._blocks import rewrite_blocks
from ._fxpass import run_pass
from ._report import Decision, Report
from ._prologue import hoist_parameter_work

log = logging.getLogger("dnngraph")
INNERS = ("inductor", "eager")
# What explain adds to the reason of an op computed from parameters alone in an inference graph.
KEPT = "; computed once and kept until a parameter or buffer it reads changes"
# torch.compile's modes: the inner Inductor takes each one's settings (CUDA graphs, autotuning).
MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")

_graph_ids = itertools.count()
# The lists collect_reports() fills, innermost last. Not thread-local: on a GPU the autograd
# engine runs the backward (and compiles its graph, lazily) on its device thread.
_collectors: list[list] = []
_collectors_lock = threading.Lock()


def _collecting():
    with _collectors_lock:
        return _collectors[-1] if _collectors else None


class collect_reports:
    """Context manager: the reports of every graph compiled while it is open (in any thread:
    a GPU backward compiles on the autograd engine's device thread), in order."""

    def __enter__(self):
        self.reports = []
        with _collectors_lock:
            _collectors.append(self.reports)
        return self.reports

    def __exit__(self, *exc):
        with _collectors_lock:
            for i in range(len(_collectors) - 1, -1, -1):
                if _collectors[i] is self.reports:
                    del _collectors[i]
                    break
        return False


class _InductorState:
    """What Inductor's own forward and backward compilers of one graph share: whether CUDA
    graphs are on (Inductor turns the box off where a graph cannot be captured), the graph id
    and the forward's device (CUDA graph trees)."""

    def __init__(self, config):
        from torch._inductor.cudagraph_utils import BoxedDeviceIndex
        from torch._inductor.utils import BoxedBool

        self.config = config
        self.cudagraphs = BoxedBool(bool(config.get("triton.cudagraphs", False)))
        self.graph_id = next(_graph_ids)
        self.forward_device = BoxedDeviceIndex(None)

    def kwargs(self, kind, gm, static=None):
        """compile_fx_inner's keywords, as Inductor's own forward/backward compilers give them:
        the inputs with fixed addresses (parameters and buffers, ``static_inputs``; in the
        backward, everything but the tangents) are not copied into a CUDA graph's buffers on
        each replay."""
        if kind == "backward":
            from torch._inductor.utils import count_tangents

            static = list(range(count_tangents(gm)))
        elif static is None:
            static = static_inputs()
        return dict(static_input_idxs=static, cudagraphs=self.cudagraphs, graph_id=self.graph_id,
                    is_backward=kind == "backward", is_inference=kind == "inference",
                    boxed_forward_device_index=self.forward_device)


def static_inputs() -> list[int]:
    """Indices of the graph's inputs with fixed addresses (parameters and buffers) as
    AOTAutograd's metadata names them (none outside a torch.compile trace)."""
    context = torch._guards.TracingContext.try_get()
    meta = getattr(context, "fw_metadata", None)
    return sorted(getattr(meta, "static_input_indices", None) or ())


def _inner_compile(gm, example_inputs, inner, state, kind, static=None):
    if inner == "eager":
        return make_boxed_func(gm.forward)
    from torch._inductor.compile_fx import compile_fx_inner

    # The ATen graph keeps ops Inductor would have decomposed (layer norm, gelu, ...): trace it
    # again with Inductor's decompositions; run_graph calls stay single ops (fake kernels).
    from torch._inductor.decomposition import select_decomp_table
    from torch.fx.experimental.proxy_tensor import make_fx

    kwargs = state.kwargs(kind, gm, static)
    fake_mode = torch._guards.detect_fake_mode(example_inputs)
    with _maybe(fake_mode):
        decomposed = make_fx(
            gm, decomposition_table=select_decomp_table(), tracing_mode="real",
        )(*example_inputs)
    # Which outputs the user sees (their strides are kept): the meta Inductor's own compilers
    # put on the output node, lost by the trace above.
    visible = _output_node(gm).meta.get("user_visible_output_idxs")
    if visible is not None:
        _output_node(decomposed).meta["user_visible_output_idxs"] = visible
    with torch._inductor.config.patch(state.config):
        return compile_fx_inner(decomposed, example_inputs, **kwargs)


def _output_node(gm):
    return next(n for n in reversed(gm.graph.nodes) if n.op == "output")


def _maybe(ctx):
    import contextlib

    return ctx if ctx is not None else contextlib.nullcontext()


def _compiler(kind: str, inner: str, state, fuse_pointwise, verify, measure, keep_params, gm,
              example_inputs):
    name = f"{kind}_{next(_graph_ids)}"
    report = run_pass(gm, graph_name=name, pointwise=fuse_pointwise, verify=verify,
                      measure=measure, inner_fuses=inner == "inductor")
    reports = _collecting()
    if reports is not None:
        reports.append(report)
    hoisted = None
    if kind == "inference" and keep_params:
        static = static_inputs()
        hoisted = hoist_parameter_work(gm, example_inputs, set(static))
    t0 = time.perf_counter()
    if hoisted is None:
        compiled = _inner_compile(gm, example_inputs, inner, state, kind)
    else:
        # The kept results are inputs with fixed addresses too (refreshed in place).
        inputs, wrap, moved = hoisted
        moved = set(moved)
        for d in report.decisions:
            if d.node in moved and d.partition is None:
                d.reason += KEPT
        static += list(range(len(example_inputs), len(inputs)))
        compiled = wrap(_inner_compile(gm, inputs, inner, state, kind, static))
    report.seconds["inner"] = time.perf_counter() - t0
    log.info("dnngraph backend: %s: %d fused graph(s); compiled in %.2f s (planning and plan "
             "builds %.2f s, measure/verify %.2f s, inner compiler %s %.2f s)", name,
             len(report.partitions), sum(report.seconds.values()), report.seconds["plan"],
             report.seconds["checks"], inner, report.seconds["inner"])
    return compiled


def _mode_config(mode) -> dict:
    """Inductor's settings for a torch.compile mode (CUDA graphs for "reduce-overhead" and
    "max-autotune", autotuning for the "max-autotune" modes), as torch.compile gives them to
    its own Inductor backend."""
    if mode in (None, "default"):
        return {}
    from torch._inductor import list_mode_options

    return dict(list_mode_options(mode))


def _rewrite_blocks(gm):
    """The block rewrites (``_blocks.py``) on Dynamo's graph, reported as fused graphs."""
    done = rewrite_blocks(gm)
    reports = _collecting()
    if done and reports is not None:
        decisions = [Decision(name, f"{op} -> dnngraph::residual_block", k, "")
                     for k, nodes in enumerate(done) for name, op in nodes]
        reports.append(Report(f"dynamo_{next(_graph_ids)}", decisions,
                              [[name for name, _ in nodes] for nodes in done]))


def make_backend(inner: str = "inductor", mode=None, fuse_pointwise: bool = False,
                 verify: bool | None = None, measure: bool | None = None, blocks: bool = True,
                 cache_parameter_work: bool = True):
    """The backend callable (``torch.compile(model, backend=make_backend("eager"))``).

    ``fuse_pointwise``: also claim partitions of pointwise and reduction ops alone (by default
    they go to the inner compiler, which fuses them as well). ``verify``: run each fused graph
    once at compile time against the ATen ops it replaces, on random inputs, and leave any that
    differs to ATen (default: the environment variable ``DNNGRAPH_COMPILE_VERIFY=1``).
    ``measure``: time each fused graph on a GPU at compile time against the ATen ops it
    replaces and leave any that is not faster to the inner compiler (default: on, unless
    ``DNNGRAPH_COMPILE_MEASURE=0``; CPU partitions are never timed). ``blocks``: replace the
    blocks whose backward fuses across ops (the ResNet basic block without batch norm) by the
    dnngraph op for them, on Dynamo's graph before AOTAutograd (``_blocks.py``).
    ``cache_parameter_work``: in inference graphs, compute what depends on parameters and
    buffers alone (folded batch-norm weights) once and again only when one of them changes
    in place (``_prologue.py``); off for code that writes weights through ``.data``."""
    if not isinstance(inner, str) or inner not in INNERS:
        raise ValueError(
            f"dnngraph backend: options['inner'] is {inner!r}; expected one of {INNERS}"
        )
    if not (mode is None or isinstance(mode, str)) or mode not in MODES:
        raise ValueError(f"dnngraph backend: mode={mode!r}; expected one of {MODES}")
    for name, v in (("fuse_pointwise", fuse_pointwise), ("verify", verify), ("measure", measure),
                    ("blocks", blocks), ("cache_parameter_work", cache_parameter_work)):
        if not isinstance(v, bool) and not (name in ("verify", "measure") and v is None):
            raise ValueError(
                f"dnngraph backend: options['{name}'] is {v!r}; expected True or False"
            )
    if verify is None:
        verify = os.environ.get("DNNGRAPH_COMPILE_VERIFY", "0") not in ("", "0")
    if measure is None and os.environ.get("DNNGRAPH_COMPILE_MEASURE", "1") in ("", "0"):
        measure = False
    config = _mode_config(mode) if inner == "inductor" else {}

    def backend(gm, example_inputs):
        if blocks:
            _rewrite_blocks(gm)
        # One state per Dynamo graph, shared by its forward and backward compilers.
        state = _InductorState(config) if inner == "inductor" else None
        args = (inner, state, fuse_pointwise, verify, measure, cache_parameter_work)
        extra = {}
        if inner == "inductor":
            # What the forward saves for the backward is chosen as Inductor chooses it (cheap
            # pointwise ops recomputed in the backward rather than saved), so that with every
            # partition left out the result is Inductor's own.
            from torch._functorch.partitioners import min_cut_rematerialization_partition

            extra["partition_fn"] = functools.partial(min_cut_rematerialization_partition,
                                                      compiler="inductor")
        return aot_autograd(
            fw_compiler=functools.partial(_compiler, "forward", *args),
            bw_compiler=functools.partial(_compiler, "backward", *args),
            inference_compiler=functools.partial(_compiler, "inference", *args),
            **extra,
        )(gm, example_inputs)

    return backend


def dnngraph_backend(gm, example_inputs, options=None, mode=None):
    """``torch.compile(model, backend="dnngraph", options={"inner": "inductor" | "eager",
    "fuse_pointwise": False, "verify": False, "measure": None, "blocks": True,
    "cache_parameter_work": True})``."""
    if options is not None and not isinstance(options, dict):
        raise ValueError(
            f"dnngraph backend: options is a {type(options).__name__}; expected a dict such as "
            "{'inner': 'eager', 'fuse_pointwise': False}"
        )
    options = dict(options or {})
    inner = options.pop("inner", "inductor")
    fuse_pointwise = options.pop("fuse_pointwise", None) or False
    verify = options.pop("verify", None)
    measure = options.pop("measure", None)
    blocks = options.pop("blocks", True)
    keep = options.pop("cache_parameter_work", True)
    if options:
        raise ValueError(
            f"dnngraph backend: unknown options {sorted(options)}; the backend takes 'inner', "
            "'fuse_pointwise', 'verify', 'measure', 'blocks' and 'cache_parameter_work'"
        )
    return make_backend(inner, mode, fuse_pointwise, verify, measure, blocks, keep)(
        gm, example_inputs)


def register():
    """Registers the backend under the name ``dnngraph`` (once)."""
    from torch._dynamo import list_backends
    from torch._dynamo.backends.registry import register_backend

    if "dnngraph" not in list_backends(exclude_tags=()):
        register_backend(name="dnngraph")(dnngraph_backend)
