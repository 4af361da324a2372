"""The backend's ``measure`` option (on by default for GPU partitions): each claimed partition
is timed at compile time, through its fused graph and through the ATen ops it replaces, on
random inputs; one that does not take at most ``MARGIN`` of the alternative's time stays out of
the rewrite, and the inner compiler gets its ops.

The alternative is ATen's ops one by one when the inner compiler runs them so (``eager``). When
it fuses (Inductor), it runs the anchor ops (convolution, GEMM, norm, attention) as ATen does and
the rest as one generated kernel: the alternative is then costed as the anchor ops alone plus
the costliest of the other ops alone (each of those passes over the data once, as the fused
kernel does), when that is less than ATen's ops one by one. A fused cuDNN graph that beats
ATen's eager ops but not a convolution plus one fused epilogue kernel is left to Inductor.

A partition whose pointwise tail reads a full-size tensor from outside (a gate behind a
convolution's bias; a residual add there is moved in front of the bias first, ``_canonical``)
is also timed without that tail: its head (the convolution and bias) as a fused graph, plus the
costliest op of the tail alone (Inductor runs the tail as one kernel). Where that is the fastest
of the three, the head alone is fused and the tail goes to the inner compiler (``Narrower``):
cuDNN runs a convolution with a bias in precompiled kernels, and with such a tail only in
kernels it compiles at run time, which can be slower than both.

It costs about 60 runs of each partition's fused graph and of its ATen ops (and of its anchor
ops and each other op, for the estimate) per compiled graph. The CPU engine is
never measured: it exists to be exact, not fast.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import operator
import time

import torch
from torch._subclasses.fake_tensor import unset_fake_temporarily

from ._lower import RESHAPES, device_of
from ._ops import ANCHORS
from ._verify import aten_run, failed_to_run, fused, random_inputs

log = logging.getLogger("dnngraph")

MARGIN = 0.97  # fused time / ATen time at most this to keep the fused graph
REPS = 10  # runs back to back per timing
ROUNDS = 3  # timings of each side, interleaved; the fastest counts
CYCLES_PER_S = 2.0e9  # at least a GPU's clock: the sleep lasts at least as long as asked
# How the reason for a fused graph slower than ATen begins (a choice, logged at INFO; a graph
# that fails to run is an engine fault, a warning).
SLOWER = "measure: the fused graph takes"
# How the reason for the ops a narrowed partition leaves out begins (a choice, logged at INFO).
NARROWED = "measure: faster as"


@dataclasses.dataclass
class Narrower:
    """measure's answer where the partition's head alone is the faster choice: the head's FX
    nodes, its built graph and JSON, and the reason given to the ops left out."""

    nodes: list
    built: object
    graph_json: str
    reason: str


def _ms_per_run(fn, reps):
    """GPU milliseconds per run of ``fn`` (``reps`` runs back to back). At compile time the host
    is slower than usual (the compiler's dispatch modes, first calls): the stream is first held
    by a sleep kernel longer than the host takes to queue the runs, so that they execute back
    to back and the events time the GPU's work alone."""
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    host_s = time.perf_counter() - t0
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(int(min(2 * host_s + 1e-4, 0.2) * CYCLES_PER_S))
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / reps


# Times of the partitions measured in this process, by the fused graph's fingerprint (its ops,
# shapes, layouts and types; not its names) and device: a network repeats its blocks (a ResNet's
# blocks after the first of each stage repeat the same graphs).
_timed: dict[tuple, tuple | None] = {}


def time_partition(nodes, built, graph_json, seed=0):
    """(fused ms, ATen ms, fusing inner compiler's ms) per run of the partition on its GPU (the
    last: the anchor ops alone plus the costliest other op alone; None without both kinds), or
    None when it cannot be timed apart from its graph (random ops, non-tensor or CPU inputs,
    ATen failing on random values). An engine error propagates. A graph with the fingerprint of
    one timed before gets that one's times."""
    key = (built.g.key(), str(device_of(nodes)))
    if key not in _timed:
        _timed[key] = _time_partition(nodes, built, graph_json, seed)
    return _timed[key]


def _time_partition(nodes, built, graph_json, seed):
    return _timed_on_gpu(nodes, built, graph_json, seed, lambda values, env: best_times(
        nodes, built, graph_json, values, env, _ms_per_run))


def _timed_on_gpu(nodes, built, graph_json, seed, timings):
    """``timings(values, env)`` on random inputs of the partition (``env``: a full ATen run's
    values) after a first run of ``built`` (which builds its plan; an engine error propagates),
    or None when the partition cannot be timed apart from its graph."""
    with unset_fake_temporarily(), torch.no_grad():
        values = random_inputs(nodes, seed)
        if not values or not all(v.is_cuda for v in values.values()):
            return None
        device = next(iter(values.values())).device
        with torch.cuda.device(device):
            try:
                env = aten_run(nodes, values)
            except Exception:  # noqa: BLE001  (nothing to compare against)
                return None
            fused(built, graph_json, values)  # builds the plan (the graph cache keeps it)
            torch.cuda.synchronize(device)
            return timings(values, env)


def _best_of_rounds(runs, ms_per_run):
    """Each run's best of ROUNDS timings, taken in turn, by ``ms_per_run(fn, reps)``."""
    best = [math.inf] * len(runs)
    for _ in range(ROUNDS):
        for i, run in enumerate(runs):
            best[i] = min(best[i], ms_per_run(run, REPS))
    return best


def best_times(nodes, built, graph_json, values, env, ms_per_run):
    """time_partition's figures, each the best of ROUNDS timings taken in turn by
    ``ms_per_run(fn, reps)``; ``env``: a full ATen run's values (the ops timed alone read it)."""
    compute = [n for n in nodes if n.target is not operator.getitem and n.target not in RESHAPES]
    anchors = [n for n in compute if n.target in ANCHORS]
    rest = [[n] for n in compute if n.target not in ANCHORS]
    runs = [lambda: fused(built, graph_json, values), lambda: aten_run(nodes, values)]
    if anchors and rest:  # each alone, on the values a full run gave its inputs
        runs += [lambda: aten_run(anchors, env)]
        runs += [lambda one=one: aten_run(one, env) for one in rest]
    best = _best_of_rounds(runs, ms_per_run)
    inner = best[2] + max(best[3:]) if len(best) > 2 else None
    return best[0], best[1], inner


def measure_partition(nodes, built, graph_json, inner_fuses=True, head=None):
    """Why the partition is left to the inner compiler (not faster than the alternative, or
    failing to run), None to keep it, or a ``Narrower`` to fuse only its head. ``inner_fuses``:
    the inner compiler fuses pointwise ops (Inductor), so its estimate counts where it is the
    cheaper alternative. ``head``: a callable giving the partition's head (nodes, built graph,
    JSON) or None; tried only with a fusing inner compiler."""
    try:
        times = time_partition(nodes, built, graph_json)
    except Exception as e:  # the engine failed where ATen ran
        return failed_to_run("measure", e)
    if times is None:
        return None
    why = _verdict(times, inner_fuses)
    if head is None or not inner_fuses:
        return why
    return _narrowed(nodes, built, times, why, head) or why


def _estimate_counts(times, inner_fuses) -> bool:
    """Whether the alternative to the fused graph is the inner compiler's estimate (it fuses,
    and its estimate is below ATen's ops one by one) rather than ATen's ops."""
    _fused_ms, aten_ms, inner_ms = times
    return inner_fuses and inner_ms is not None and inner_ms < aten_ms


def _verdict(times, inner_fuses) -> str | None:
    fused_ms, aten_ms, inner_ms = times
    if not _estimate_counts(times, inner_fuses):
        if fused_ms <= MARGIN * aten_ms:
            return None
        return (f"{SLOWER} {fused_ms * 1e3:.1f} us, the ATen ops it replaces "
                f"{aten_ms * 1e3:.1f} us: left to the inner compiler")
    if fused_ms <= MARGIN * inner_ms:
        return None
    return (f"{SLOWER} {fused_ms * 1e3:.1f} us, its anchor ops plus one fused kernel for the "
            f"rest about {inner_ms * 1e3:.1f} us (the ATen ops one by one {aten_ms * 1e3:.1f} "
            "us): left to the inner compiler")


def _narrowed(nodes, built, times, why, head) -> Narrower | None:
    """A Narrower when the head's fused graph plus the tail as one kernel (the tail's costliest
    op alone) takes at most MARGIN of the best of the whole fused graph and the inner compiler's
    way; else None."""
    fused_ms, aten_ms, inner_ms = times
    if why is None:
        best, what = fused_ms, "the whole fused graph"
    else:
        best = inner_ms if _estimate_counts(times, True) else aten_ms
        what = "the inner compiler's way"
    h = head()
    if h is None:
        return None
    h_nodes, h_built, h_json = h
    try:
        t = time_head(nodes, built, h_nodes, h_built, h_json)
    except Exception as e:  # noqa: BLE001  (the head cannot run: the choice stays as it is)
        log.info("dnngraph backend: measure: a partition's head failed to run (%s: %s)",
                 type(e).__name__, str(e).splitlines()[0] if str(e) else "")
        return None
    if t is None:
        return None
    head_ms, tail_ms = t
    if head_ms + tail_ms > MARGIN * best:
        return None
    return Narrower(h_nodes, h_built, h_json, (
        f"{NARROWED} the graph of the ops before it ({head_ms * 1e3:.1f} us) and these ops in "
        f"one kernel of the inner compiler (about {tail_ms * 1e3:.1f} us) than as "
        f"{what} ({best * 1e3:.1f} us): left to the inner compiler"))


def time_head(nodes, built, h_nodes, h_built, h_json, seed=0):
    """(head fused ms, tail ms) per run: the head's fused graph, and the costliest op of the
    rest of the partition alone (ATen, on the values a full ATen run gave its inputs); None when
    the partition cannot be timed apart from its graph. Remembered as time_partition's are."""
    key = ("head", built.g.key(), h_built.g.key(), str(device_of(nodes)))
    if key not in _timed:
        _timed[key] = _time_head(nodes, h_nodes, h_built, h_json, seed)
    return _timed[key]


def _time_head(nodes, h_nodes, h_built, h_json, seed):
    in_head = set(h_nodes)
    tail = [[n] for n in nodes if n not in in_head and n.target is not operator.getitem
            and n.target not in RESHAPES]
    if not tail:
        return None
    return _timed_on_gpu(nodes, h_built, h_json, seed, lambda values, env: head_times(
        h_built, h_json, values, env, tail, _ms_per_run))


def head_times(h_built, h_json, values, env, tail, ms_per_run):
    """time_head's figures, each the best of ROUNDS timings by ``ms_per_run(fn, reps)``."""
    runs = [lambda: fused(h_built, h_json, values)]
    runs += [lambda one=one: aten_run(one, env) for one in tail]
    best = _best_of_rounds(runs, ms_per_run)
    return best[0], max(best[1:])
