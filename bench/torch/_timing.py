"""The timing both block benchmarks use: on a host-bound machine one back-to-back run per
variant is at the mercy of the host's noise (the same eager block has measured 2x apart in two
runs), so the variants take turns for several rounds and each one's fastest round counts."""

from torch.utils.benchmark import Timer


def time_in_turn(variants, run, iters, rounds=3, warmup=3):
    """{name: mean ms of run(model) over `iters` back-to-back calls, synchronized at both ends
    (torch.utils.benchmark)}, the best of `rounds` rounds in which the variants take turns."""
    for model in variants.values():
        for _ in range(warmup):
            run(model)
    best = {v: float("inf") for v in variants}
    for _ in range(rounds):
        for v, model in variants.items():
            timer = Timer("run(model)", globals={"run": run, "model": model})
            best[v] = min(best[v], timer.timeit(iters).mean * 1e3)
    return best
