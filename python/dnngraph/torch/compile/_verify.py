"""The backend's ``verify`` option: each claimed partition runs once at compile time on random
inputs, through its fused graph and through the ATen ops it replaces; a partition whose result
differs beyond its dtype's tolerance is refused (its ops stay in ATen) and the difference is
logged and shown by ``explain``.

It guards against an engine that returns a wrong result with a success status; it costs one
run of each partition (both ways) per compiled graph.
"""

from __future__ import annotations

import logging

import torch
import torch.fx as fx
from torch._subclasses.fake_tensor import unset_fake_temporarily

from ._lower import apply_request, meta
from ._runtime import run_graph_op

log = logging.getLogger("dnngraph")

# Largest difference accepted, relative to the largest magnitude of ATen's result, by the
# output's dtype: the fused graph keeps intermediates in fp32 where ATen rounds each op's result
# (and cuDNN's fp32 GEMMs and convolutions may run in TF32).
TOLERANCE = {
    torch.float64: 1e-6,
    torch.float32: 5e-3,
    torch.float16: 2e-2,
    torch.bfloat16: 6e-2,
}


def _random_like(v: torch.Tensor, gens: dict, seed: int) -> torch.Tensor:
    """Fresh normal values laid out as ``v`` (strides included, broadcast ones too), drawn on
    ``v``'s device (a CPU draw and copy of a large activation costs tens of ms at compile time);
    ``gens``: each device's generator, made with ``seed`` on first use."""
    span = 1 + sum((n - 1) * s for n, s in zip(v.shape, v.stride()) if n > 0)
    if v.device not in gens:
        gens[v.device] = torch.Generator(device=v.device).manual_seed(seed)
    gen = gens[v.device]
    flat = torch.randn(span, generator=gen, dtype=torch.float32, device=v.device)
    return flat.to(v.dtype).as_strided(tuple(v.shape), tuple(v.stride()))


def _seeded(nodes) -> bool:
    tag = getattr(torch.Tag, "nondeterministic_seeded", None)
    return any(tag is not None and tag in getattr(n.target, "tags", ()) for n in nodes)


def aten_run(nodes, values):
    """The members run by ATen, in order, from ``values`` (external FX node -> tensor)."""
    env = dict(values)
    for n in nodes:
        args = fx.node.map_arg(n.args, env.__getitem__)
        kwargs = fx.node.map_arg(n.kwargs, env.__getitem__)
        env[n] = n.target(*args, **kwargs)
    return env


def fused(built, graph_json, env):
    """The partition's outputs through run_graph, with the views the rewrite puts in front."""
    ins = [
        apply_request(fxn, request, lambda t, d: t.view(d), lambda t, d: t.narrow(d, 0, 1),
                      lambda t, size, stride: t.as_strided(size, stride), source=env[fxn])
        for fxn, request in built.inputs
    ]
    outs = run_graph_op()(graph_json, ins)
    got = {}
    for fxn, dims, k in built.outputs:
        item = outs[k]
        shape = list(meta(fxn).shape)
        got[fxn] = item.view(shape) if list(dims) != shape else item
    return got


def difference(got: torch.Tensor, want: torch.Tensor) -> float:
    """Largest |got - want| where ATen's value is finite, relative to its largest magnitude
    there; inf when the fused graph is not finite where ATen is."""
    want = want.to(torch.float64)
    got = got.to(torch.float64)
    finite = torch.isfinite(want)
    if not bool(torch.isfinite(got[finite]).all()):
        return float("inf")
    if not bool(finite.any()):
        return 0.0
    scale = float(want[finite].abs().max())
    return float((got - want)[finite].abs().max()) / max(scale, 1e-30)


def random_inputs(nodes, seed=0):
    """Fresh random values (real tensors, as the FX metadata lays them out) for the partition's
    external inputs, keyed by FX node; None when it cannot run apart from the graph (random ops,
    inputs that are not floating-point tensors). Call with fake tensors unset."""
    members = set(nodes)
    external = []
    for n in nodes:
        for a in n.all_input_nodes:
            if a not in members and a not in external:
                external.append(a)
    if _seeded(nodes) or not all(
        isinstance(meta(a), torch.Tensor) and meta(a).is_floating_point() for a in external
    ):
        return None
    gens = {}
    return {a: _random_like(meta(a), gens, seed) for a in external}


def check_partition(nodes, built, graph_json, seed=0) -> str | None:
    """Why the partition (FX ``nodes``, replaced by ``built``) is refused, or None when its
    fused result matches ATen's (or cannot be compared: random ops, non-tensor inputs)."""
    # The compiler runs under AOTAutograd's fake mode: these runs are real.
    with unset_fake_temporarily(), torch.no_grad():
        values = random_inputs(nodes, seed)
        if values is None:
            return None
        try:
            env = aten_run(nodes, values)
        except Exception as e:  # ATen's ops cannot run on these inputs: nothing to compare
            log.info("dnngraph backend: verify skipped a partition: ATen raised %s: %s",
                     type(e).__name__, e)
            return None
        try:
            got = fused(built, graph_json, env)
        except Exception as e:  # the engine failed where ATen ran: the partition stays out
            return failed_to_run("verify", e)
        worst = _worst(got, env)
    if worst is None:
        return None
    err, tol, name = worst
    return (f"verify: the fused graph's '{name}' differs from ATen's by {err:.3g} of its largest "
            f"value (tolerance {tol:g}): left to ATen")


def failed_to_run(check: str, e: Exception) -> str:
    """The reason a check (``verify``, ``measure``) gives for a fused graph that raised where
    ATen's ops ran: the partition stays in ATen."""
    first = str(e).splitlines()[0] if str(e) else ""
    return f"{check}: the fused graph failed to run ({type(e).__name__}: {first}): left to ATen"


def _worst(got, env):
    """(difference, tolerance, name) of the output furthest past its tolerance, or None."""
    worst = None
    for fxn, g in got.items():
        want = env[fxn]
        err = difference(g, want)
        tol = TOLERANCE.get(want.dtype, 5e-3)
        if err > tol and (worst is None or err / tol > worst[0] / worst[1]):
            worst = (err, tol, fxn.name)
    return worst
