"""The backend's ``measure`` option (on by default for GPU partitions): each claimed partition
is timed at compile time, through its fused graph and through the ATen ops it replaces, on
random inputs; one that does not take at most ``MARGIN`` of ATen's time stays out of the
rewrite, and the inner compiler gets its ops (Inductor may fuse their pointwise part with
neighbours, which a tie would forgo).

It costs about 120 runs of each partition, both ways, per compiled graph. The CPU engine is
never measured: it exists to be exact, not fast.
"""

from __future__ import annotations

import math
import time

import torch
from torch._subclasses.fake_tensor import unset_fake_temporarily

from ._verify import aten_run, failed_to_run, fused, random_inputs

MARGIN = 0.97  # fused time / ATen time at most this to keep the fused graph
REPS = 10  # runs back to back per timing
ROUNDS = 3  # timings of each side, interleaved; the fastest counts
CYCLES_PER_S = 2.0e9  # at least a GPU's clock: the sleep lasts at least as long as asked
# How the reason for a fused graph slower than ATen begins (a choice, logged at INFO; a graph
# that fails to run is an engine fault, a warning).
SLOWER = "measure: the fused graph takes"


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


def time_partition(nodes, built, graph_json, seed=0):
    """(fused ms, ATen ms) per run of the partition on its GPU, or None when it cannot be
    timed apart from its graph (random ops, non-tensor or CPU inputs, ATen failing on random
    values). An engine error propagates."""
    with unset_fake_temporarily(), torch.no_grad():
        values = random_inputs(nodes, seed)
        if not values or not all(v.is_cuda for v in values.values()):
            return None
        device = next(iter(values.values())).device
        with torch.cuda.device(device):
            try:
                aten_run(nodes, values)
            except Exception:  # noqa: BLE001  (nothing to compare against)
                return None
            fused(built, graph_json, values)  # builds the plan (the graph cache keeps it)
            torch.cuda.synchronize(device)
            best = [math.inf, math.inf]
            for _ in range(ROUNDS):
                best[0] = min(best[0], _ms_per_run(lambda: fused(built, graph_json, values), REPS))
                best[1] = min(best[1], _ms_per_run(lambda: aten_run(nodes, values), REPS))
    return tuple(best)


def measure_partition(nodes, built, graph_json) -> str | None:
    """Why the partition is left to the inner compiler (not faster than ATen, or failing to
    run), or None to keep it."""
    try:
        times = time_partition(nodes, built, graph_json)
    except Exception as e:  # the engine failed where ATen ran
        return failed_to_run("measure", e)
    if times is None:
        return None
    fused_ms, aten_ms = times
    if fused_ms <= MARGIN * aten_ms:
        return None
    return (f"{SLOWER} {fused_ms * 1e3:.1f} us, the ATen ops it replaces "
            f"{aten_ms * 1e3:.1f} us: left to the inner compiler")
