"""The autotuner and CUDA graphs through Python on a CUDA handle, against torch (skipped where
torch sees no GPU; scripts/autotune-device.sh runs them on the GPU machine)."""

import ctypes
import glob
import os
import site
import uuid

import pytest

import dnngraph as cudnn

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device visible to torch", allow_module_level=True)


@pytest.fixture(scope="module")
def gpu():
    # A GPU is present: a handle that cannot be made fails the tests (it is no reason to skip).
    return cudnn.create_handle(device="cuda")


def matmul_graph(handle, batch, n=64):
    g = cudnn.pygraph(handle=handle, io_data_type=cudnn.data_type.BFLOAT16,
                      intermediate_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT)
    A = g.tensor(name="A", dim=[batch, n, n], stride=[n * n, n, 1],
                 data_type=cudnn.data_type.BFLOAT16)
    B = g.tensor(name="B", dim=[batch, n, n], stride=[n * n, n, 1],
                 data_type=cudnn.data_type.BFLOAT16)
    C = g.matmul(A, B)
    C.set_output(True)
    C.set_data_type(cudnn.data_type.BFLOAT16)
    g.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    return g, A, B, C


def tensors(batch, n=64):
    a = torch.randn(batch, n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(batch, n, n, device="cuda", dtype=torch.bfloat16)
    c = torch.full((batch, n, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    return a, b, c


def test_autotune_selects_and_is_reused(gpu):
    batch = 1 + uuid.uuid4().int % 1000
    g, A, B, C = matmul_graph(gpu, batch)
    a, b, c = tensors(batch)
    r = g.autotune(gpu, {A: a, B: b, C: c}, None, iterations=5, rotate_inputs=1)
    assert not r["from_cache"] and r["flush_bytes"] > 0 and r["rotated_copies"] == 1
    assert r["selected_name"] == g.get_plan_name_at_index(r["selected"])
    timed = [x for x in r["candidates"] if x["ok"]]
    assert timed and min(x["median_ms"] for x in timed) == r["selected_ms"]
    c.fill_(float("nan"))
    g.execute({A: a, B: b, C: c})
    torch.testing.assert_close(c.float(), (a.float() @ b.float()), rtol=2e-2, atol=2e-2)
    g2, *_ = matmul_graph(gpu, batch)
    r2 = g2.autotune(gpu, iterations=5)  # buffers of its own
    if os.environ.get("DNNGRAPH_CACHE", "1") != "0":
        assert r2["from_cache"] and r2["timed_runs"] == 0
        assert r2["selected_name"] == r["selected_name"]


def test_graph_backed_execute_is_identical(gpu):
    g, A, B, C = matmul_graph(gpu, 2)
    a, b, c = tensors(2)
    ws = torch.empty(max(g.get_workspace_size(), 1), dtype=torch.uint8, device="cuda")
    g.execute({A: a, B: b, C: c}, ws)
    want = c.clone()
    g.set_cuda_graph_execute(True)
    for _ in range(3):
        c.fill_(float("nan"))
        g.execute({A: a, B: b, C: c}, ws)
        torch.cuda.synchronize()
        assert torch.equal(c, want)
    a2, b2, c2 = tensors(2)
    g.execute({A: a2, B: b2, C: c2}, ws)
    g.set_cuda_graph_execute(False)
    c3 = torch.full_like(c2, float("nan"))
    g.execute({A: a2, B: b2, C: c3}, ws)
    torch.cuda.synchronize()
    assert torch.equal(c2, c3)


def test_graph_backed_execute_records_only_repeated_pointers(gpu):
    """'repeated': a set of pointers used once runs directly; the second time it is recorded,
    from then on replayed, with the same bytes as a direct execute; inputs changed in place
    between replays are read afresh."""
    g, A, B, C = matmul_graph(gpu, 2)
    a, b, c = tensors(2)
    ws = torch.empty(max(g.get_workspace_size(), 1), dtype=torch.uint8, device="cuda")
    g.execute({A: a, B: b, C: c}, ws)
    want = c.clone()
    g.set_cuda_graph_execute("repeated")
    for k in range(4):
        c.fill_(float("nan"))
        g.execute({A: a, B: b, C: c}, ws)
        torch.cuda.synchronize()
        assert torch.equal(c, want), k
    assert g.cuda_graph_execute_stats == {"replayed": 2, "recorded": 1, "direct": 1}
    a.mul_(-0.5)  # the recorded graph reads the buffers as they are now
    g.execute({A: a, B: b, C: c}, ws)
    g.set_cuda_graph_execute(False)
    c2 = torch.full_like(c, float("nan"))
    g.execute({A: a, B: b, C: c2}, ws)
    torch.cuda.synchronize()
    assert torch.equal(c, c2) and not torch.equal(c, want)
    # Many more live pointer sets than a plan keeps graphs for, in turn: recording stops
    # (each graph would be evicted before it pays for itself) and results stay right.
    g.set_cuda_graph_execute("repeated")
    outs = [torch.empty_like(c) for _ in range(40)]
    for _ in range(3):
        for o in outs:
            o.fill_(float("nan"))
            g.execute({A: a, B: b, C: o}, ws)
    torch.cuda.synchronize()
    for o in outs:
        assert torch.equal(o, c2)
    st = g.cuda_graph_execute_stats
    assert st["recorded"] <= 1 + 16 + 16, st  # given up after 16 wasted graphs at the most
    before = st["recorded"]
    for o in outs:
        g.execute({A: a, B: b, C: o}, ws)
    assert g.cuda_graph_execute_stats["recorded"] == before


def cudart():
    names = []
    for d in site.getsitepackages():
        names += glob.glob(os.path.join(d, "nvidia", "*", "lib", "libcudart.so*"))
    names += ["libcudart.so", "libcudart.so.13", "libcudart.so.12"]
    for n in names:
        try:
            return ctypes.CDLL(n)
        except OSError:
            continue
    pytest.skip("no libcudart to create a CUDA graph with")


def test_populate_update_replay_is_identical(gpu):
    rt = cudart()
    g, A, B, C = matmul_graph(gpu, 2)
    a, b, c = tensors(2)
    ws = torch.empty(max(g.get_workspace_size(), 1), dtype=torch.uint8, device="cuda")
    g.execute({A: a, B: b, C: c}, ws)
    torch.cuda.synchronize()
    want = c.clone()
    graph, exe = ctypes.c_void_p(), ctypes.c_void_p()
    assert rt.cudaGraphCreate(ctypes.byref(graph), 0) == 0
    c.fill_(float("nan"))
    g.populate_cuda_graph(gpu, {A: a, B: b, C: c}, ws, graph.value)
    assert rt.cudaGraphInstantiate(ctypes.byref(exe), graph, ctypes.c_ulonglong(0)) == 0
    assert rt.cudaGraphLaunch(exe, None) == 0 and rt.cudaDeviceSynchronize() == 0
    assert torch.equal(c, want)
    a2, b2, c2 = tensors(2)
    g.update_cuda_graph(gpu, {A: a2, B: b2, C: c2}, ws, graph.value)
    rt.cudaGraphExecDestroy(exe)
    assert rt.cudaGraphInstantiate(ctypes.byref(exe), graph, ctypes.c_ulonglong(0)) == 0
    assert rt.cudaGraphLaunch(exe, None) == 0 and rt.cudaDeviceSynchronize() == 0
    c3 = torch.full_like(c2, float("nan"))
    g.execute({A: a2, B: b2, C: c3}, ws)
    torch.cuda.synchronize()
    assert torch.equal(c2, c3)
    rt.cudaGraphExecDestroy(exe)
    rt.cudaGraphDestroy(graph)
