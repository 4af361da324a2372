"""The GPU under faults and load: CUDA out-of-memory during build, workspace allocation and
execute; a soak of one graph and of many shapes through the torch ops; several processes
sharing the on-disk plan and kernel caches while one writer is killed. Skipped without a CUDA
GPU and dnngraph's cuDNN engine.

Run on a GPU machine with `bash scripts/hardening-device.sh` (it also runs compute-sanitizer).
DNNGRAPH_FAULT_SCALE scales the soak and multi-process sizes (1 = the full figures: 10^6
executes, 10^5 shapes, 8 processes x 1,000 builds, which that script uses; unset: 0.01, so that
a run of the whole suite on a GPU stays short); DNNGRAPH_FAULT_FIGURES names a file that
each test appends its figures to (one JSON object a line)."""

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import dnngraph as cudnn

torch = pytest.importorskip("torch")


def _gpu_handle():
    if not torch.cuda.is_available():
        return None
    try:
        return cudnn.create_handle(device="cuda")
    except Exception:
        return None


HANDLE = _gpu_handle()
pytestmark = pytest.mark.skipif(HANDLE is None, reason="needs a CUDA GPU and dnngraph's cuDNN engine")
SCALE = float(os.environ.get("DNNGRAPH_FAULT_SCALE", "0.01"))
MiB = 1 << 20
# What a failed build or execute may raise: dnngraph's errors and torch's OutOfMemoryError
# (a RuntimeError), each with a message.
CLEAN = (RuntimeError, MemoryError, ValueError)


def record(test, **figures):
    figures = dict(test=test, **figures)
    print(json.dumps(figures))
    path = os.environ.get("DNNGRAPH_FAULT_FIGURES")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(figures) + "\n")


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def gpu_used():
    free, total = torch.cuda.mem_get_info()
    return total - free


def matmul_graph(m, k, n):
    """C = A @ B (fp16, fp32 compute) on the GPU handle, built (no device memory of ours is
    allocated for it); returns the graph and its tensors."""
    half = cudnn.data_type.HALF
    g = cudnn.pygraph(handle=HANDLE, io_data_type=half,
                      intermediate_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT)
    A = g.tensor(name="A", dim=[1, m, k], stride=[m * k, k, 1], data_type=half)
    B = g.tensor(name="B", dim=[1, k, n], stride=[k * n, n, 1], data_type=half)
    C = g.matmul(A=A, B=B).set_output(True).set_data_type(half)
    g.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    return g, A, B, C


def matmul_buffers(graph, seed=0):
    """Seeded inputs, a NaN-poisoned output and a workspace for `graph`."""
    g, A, B, C = graph
    gen = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(A.get_dim(), device="cuda", generator=gen).half()
    b = torch.randn(B.get_dim(), device="cuda", generator=gen).half()
    c = torch.full(C.get_dim(), float("nan"), device="cuda").half()
    ws = torch.empty(max(g.get_workspace_size(), 1), dtype=torch.uint8, device="cuda")
    return a, b, c, ws


def execute_matmul(graph, bufs):
    g, A, B, C = graph
    a, b, c, ws = bufs
    c.fill_(float("nan"))
    g.execute({A: a, B: b, C: c}, ws)
    torch.cuda.synchronize()


def check_matmul(bufs):
    a, b, c, _ = bufs
    want = torch.matmul(a.float(), b.float())
    torch.testing.assert_close(c.float(), want, rtol=2e-2, atol=2e-2 * want.abs().max().item())


def run_matmul(graph, seed=0):
    bufs = matmul_buffers(graph, seed)
    execute_matmul(graph, bufs)
    check_matmul(bufs)


class Hold:
    """Holds all but `leave` bytes of the GPU's free memory (torch allocations, released on
    exit together with torch's cached blocks)."""

    def __init__(self, leave):
        self.leave, self.blocks = leave, []

    def __enter__(self):
        torch.cuda.synchronize()
        chunk = 1 << 30
        while chunk >= MiB:
            free, _ = torch.cuda.mem_get_info()
            if free - chunk < self.leave:
                chunk //= 2
                continue
            try:
                self.blocks.append(torch.empty(chunk, dtype=torch.uint8, device="cuda"))
            except torch.cuda.OutOfMemoryError:
                chunk //= 2
        return self

    def __exit__(self, *exc):
        self.blocks.clear()
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def baseline():
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    return gpu_used(), torch.cuda.memory_allocated()


def assert_nothing_leaked(before, slack=64 * MiB):
    used, allocated = baseline()
    assert torch.cuda.memory_allocated() <= before[1], (allocated, before[1])
    assert used <= before[0] + slack, f"device memory grew by {(used - before[0]) / MiB:.0f} MiB"


# ---------------------------------------------------------------- out of memory


def test_oom_during_build_is_clean_and_the_next_build_works():
    run_matmul(matmul_graph(64, 64, 64))  # the handle and cuDNN's own state exist
    before = baseline()
    outcomes = []
    with Hold(leave=0):
        for shape in ((4096, 4096, 4096), (8192, 1024, 8192)):
            try:
                matmul_graph(*shape)
                outcomes.append("built")
            except CLEAN as e:
                assert str(e).strip(), type(e)
                outcomes.append(type(e).__name__)
    assert_nothing_leaked(before)
    run_matmul(matmul_graph(4096, 4096, 4096))
    record("oom_build", outcomes=outcomes)


def test_oom_during_workspace_allocation_is_clean():
    from dnngraph.torch import functional as F

    q = torch.randn(8, 16, 2048, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    out = F.scaled_dot_product_attention(q, q, q, is_causal=True)
    dout = torch.randn_like(out)
    before = baseline()
    outcomes = []
    for leave in (0, 4 * MiB, 64 * MiB):
        with Hold(leave=leave):
            try:
                torch.autograd.grad(out, q, dout, retain_graph=True)
                outcomes.append("ran")
            except CLEAN as e:
                assert str(e).strip(), type(e)
                outcomes.append(type(e).__name__)
    assert_nothing_leaked(before)
    (g,) = torch.autograd.grad(out, q, dout)
    # bf16 over 2,048 keys: an elementwise bound fails on a few elements for no fault; the
    # gradient's error against float32 is held to torch's own bf16 SDPA's.
    exact, eager = (
        torch.autograd.grad(torch.nn.functional.scaled_dot_product_attention(
            x, x, x, is_causal=True), x, dout.to(x.dtype))[0].float()
        for x in (q.detach().float().requires_grad_(), q.detach().requires_grad_()))
    from torch_util import assert_no_worse_than_eager

    assert_no_worse_than_eager(g.float(), eager, exact, "dq after the held memory")
    record("oom_workspace", outcomes=outcomes)


def test_oom_during_execute_is_clean_and_the_next_execute_works():
    from dnngraph.torch import functional as F

    # The graph API executes into the caller's buffers (allocated before the memory is held):
    # it needs no memory of its own. The torch op allocates its output and workspace per call.
    graph = matmul_graph(2048, 2048, 2048)
    bufs = matmul_buffers(graph)
    x = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
    w = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
    F.linear(x, w)
    execute_matmul(graph, bufs)  # the kernels are loaded (CUDA loads modules lazily)
    before = baseline()
    outcomes = []
    with Hold(leave=0):
        for call in (lambda: execute_matmul(graph, bufs), lambda: F.linear(x, w, None, "gelu")):
            try:
                call()
                outcomes.append("ran")
            except CLEAN as e:
                assert str(e).strip()
                outcomes.append(type(e).__name__)
    assert outcomes[0] == "ran", outcomes  # nothing to allocate: never out of memory
    check_matmul(bufs)
    assert_nothing_leaked(before)
    run_matmul(graph, seed=1)
    torch.testing.assert_close(
        F.linear(x, w, None, "gelu").float(),
        torch.nn.functional.gelu(x.float() @ w.float().t()), atol=0.5, rtol=2e-2)
    record("oom_execute", outcomes=outcomes)


# ---------------------------------------------------------------- soak


def sample_flat(samples, what, limit):
    """The growth between the first sample after warm-up and the last stays under `limit`."""
    growth = samples[-1] - samples[0]
    assert growth < limit, f"{what} grew by {growth / MiB:.1f} MiB: {[s // MiB for s in samples]} MiB"
    return growth


def test_soak_one_graph_million_executes():
    graph = matmul_graph(64, 64, 64)
    g, A, B, C = graph
    a = torch.randn(A.get_dim(), device="cuda").half()
    b = torch.randn(B.get_dim(), device="cuda").half()
    c = torch.empty(C.get_dim(), device="cuda").half()
    ws = torch.empty(max(g.get_workspace_size(), 1), dtype=torch.uint8, device="cuda")
    pack = {A: a, B: b, C: c}
    total = int(1_000_000 * SCALE)
    every = max(total // 10, 1)
    for _ in range(min(every, 10_000)):  # warm-up
        g.execute(pack, ws)
    torch.cuda.synchronize()
    host, dev = [rss()], [gpu_used()]
    start = time.perf_counter()
    for i in range(1, total + 1):
        g.execute(pack, ws)
        if i % every == 0:
            torch.cuda.synchronize()
            host.append(rss())
            dev.append(gpu_used())
    elapsed = time.perf_counter() - start
    run_matmul(graph)
    hg = sample_flat(host, "host RSS", 16 * MiB)
    dg = sample_flat(dev, "GPU memory", 16 * MiB)
    record("soak_executes", executes=total, seconds=round(elapsed, 1),
           us_per_execute=round(1e6 * elapsed / max(total, 1), 2),
           rss_growth_mib=round(hg / MiB, 2), gpu_growth_mib=round(dg / MiB, 2))


SOAK_WORKER = textwrap.dedent(
    """
    import json, os, sys, torch
    import dnngraph.torch as dt
    from dnngraph.torch import functional as F
    first, count = int(sys.argv[1]), int(sys.argv[2])
    dt.set_cache_capacity(64)
    w = torch.randn(32, 64, device="cuda", dtype=torch.bfloat16)
    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    def run(i):  # every i a shape not seen before, in this process and the others
        m, k = 1 + i // 3, (64, 48, 32)[i % 3]
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        y = F.linear(x, w[:, :k], None, "relu")
        if i % 1009 == 0:
            want = torch.relu(x.float() @ w[:, :k].float().t())
            torch.testing.assert_close(y.float(), want, atol=5e-2, rtol=5e-2)
    warm = max(count // 10, 1)
    for i in range(first, first + warm):
        run(i)
    torch.cuda.synchronize()
    print("READY", flush=True)
    sys.stdin.readline()  # every process warm: the device's memory is sampled from here on
    host, dev = [rss()], [torch.cuda.mem_get_info()]
    every = max((count - warm) // 9, 1)
    for j, i in enumerate(range(first + warm, first + count), 1):
        run(i)
        if j % every == 0 or i == first + count - 1:
            torch.cuda.synchronize()
            host.append(rss())
            dev.append(torch.cuda.mem_get_info())
    size, capacity = torch.ops.dnngraph.cache_info()[:2]
    print(json.dumps(dict(host=host, dev=[t - f for f, t in dev], size=size, capacity=capacity)))
    """
)


def test_soak_distinct_shapes_through_the_torch_ops():
    """10^5 shapes (at full scale) through ``linear``, each new to the op cache at capacity 64,
    spread over DNNGRAPH_SOAK_WORKERS processes (default 8) started together so that it fits a
    device call: each process's host RSS and the device's used memory stay flat after warm-up."""
    procs = int(os.environ.get("DNNGRAPH_SOAK_WORKERS", "8"))
    total = max(int(100_000 * SCALE), 10 * procs)
    each = total // procs
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    start = time.perf_counter()
    workers = [
        subprocess.Popen([sys.executable, "-c", SOAK_WORKER, str(p * each), str(each)], env=env,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
        for p in range(procs)
    ]
    try:
        for wk in workers:
            line = wk.stdout.readline()
            assert line.startswith("READY"), wk.stderr.read()[-3000:]
        for wk in workers:  # all warm: go on together
            wk.stdin.write("go\n")
            wk.stdin.flush()
        results = [(wk.wait(timeout=3600), *wk.communicate()) for wk in workers]
    finally:
        for wk in workers:
            if wk.poll() is None:
                wk.kill()
    elapsed = time.perf_counter() - start
    figures = []
    for rc, out, err in results:
        assert rc == 0, err[-3000:]
        figures.append(json.loads(out.strip().splitlines()[-1]))
    for f in figures:
        assert f["size"] <= 64 and f["capacity"] == 64, f
    hg = max(sample_flat(f["host"], "host RSS", 64 * MiB) for f in figures)
    # Device-wide: every process adds to it, so the sum of their increments is what stays flat.
    dg = max(f["dev"][-1] for f in figures) - min(f["dev"][0] for f in figures)
    assert dg < 64 * MiB, f"GPU memory grew by {dg / MiB:.1f} MiB over the soak"
    # The plan cache on disk, when the run has one: bounded by DNNGRAPH_CACHE_DISK_MB.
    disk = os.path.join(os.environ.get("DNNGRAPH_CACHE_DIR", ""), "plans.sqlite3")
    disk_mib = round(os.path.getsize(disk) / MiB, 1) if os.environ.get(
        "DNNGRAPH_CACHE_DIR") and os.path.exists(disk) else None
    record("soak_shapes", shapes=each * procs, processes=procs, seconds=round(elapsed, 1),
           rss_growth_mib=round(hg / MiB, 2), gpu_growth_mib=round(dg / MiB, 2),
           plan_file_mib=disk_mib)


# ---------------------------------------------------------------- processes sharing the caches

WORKER = textwrap.dedent(
    """
    import os, sys, random, numpy as np, torch, dnngraph as cudnn
    builds, seed, kc_path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    rng = random.Random(seed)
    h = cudnn.create_handle(device="cuda")
    print("STARTED", flush=True)
    def kernel_cache():
        # A damaged or half-written file is refused with an error, never used: start afresh.
        try:
            return cudnn.KernelCache.load(kc_path)
        except (ValueError, RuntimeError):
            return cudnn.create_kernel_cache()
    kc = kernel_cache()
    for i in range(builds):
        dynamic = i % 4 == 3
        m, k, n = rng.choice([16, 32, 48, 64]), rng.choice([16, 32, 64]), rng.choice([8, 16, 24])
        kw = dict(kernel_cache=kc, is_dynamic_shape_enabled=True) if dynamic else {}
        g = cudnn.pygraph(handle=h, io_data_type=cudnn.data_type.HALF,
                          compute_data_type=cudnn.data_type.FLOAT, **kw)
        a = torch.randn(1, m, k, device="cuda").half()
        b = torch.randn(1, k, n, device="cuda").half()
        A, B = g.tensor_like(a), g.tensor_like(b)
        C = g.matmul(A=A, B=B).set_output(True).set_data_type(cudnn.data_type.HALF)
        g.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
        c = torch.full((1, m, n), float("nan"), device="cuda").half()
        ws = torch.empty(max(g.get_workspace_size(), 1), dtype=torch.uint8, device="cuda")
        g.execute({A: a, B: b, C: c}, ws)
        torch.cuda.synchronize()
        want = a.float() @ b.float()
        err = (c.float() - want).abs().max().item()
        assert err <= 2e-2 * (1 + want.abs().max().item()), (i, m, k, n, err)
        if dynamic and kc.in_use and i % 16 == 15:
            kc.save(kc_path)
    print("OK", builds)
    """
)


def test_eight_processes_share_the_disk_caches_with_a_killed_writer(tmp_path):
    env = dict(os.environ, DNNGRAPH_CACHE_DIR=str(tmp_path), PYTHONUNBUFFERED="1")
    kc_path = str(tmp_path / "kernels.bin")
    builds = max(int(1000 * SCALE), 8)
    start = time.perf_counter()
    workers = [
        subprocess.Popen([sys.executable, "-c", WORKER, str(builds), str(seed), kc_path], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for seed in range(8)
    ]
    # A ninth writer, killed with SIGKILL while it builds and stores plans and kernels.
    victim = subprocess.Popen([sys.executable, "-c", WORKER, str(10 * builds), "99", kc_path],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert victim.stdout.readline().startswith("STARTED")
    time.sleep(random.uniform(1.0, 5.0))  # mid-run: building, storing plans, saving kernels
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    results = [(w.wait(timeout=3600), *w.communicate()) for w in workers]
    elapsed = time.perf_counter() - start
    for rc, out, err in results:
        assert rc == 0 and "OK" in out, err[-3000:]
    # A fresh process after the kill: every entry it reads is either sound or dropped.
    after = subprocess.run([sys.executable, "-c", WORKER, "200", "7", kc_path], env=env,
                           capture_output=True, text=True, timeout=1800)
    assert after.returncode == 0, after.stderr[-3000:]
    dropped = sum(err.count("[dnngraph] warning") for _, _, err in results) + after.stderr.count(
        "[dnngraph] warning")
    record("eight_processes", processes=8, builds_each=builds, seconds=round(elapsed, 1),
           victim_rc=victim.returncode, warnings=dropped)
