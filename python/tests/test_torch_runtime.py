"""dnngraph.torch runtime: the graph cache (hits, bound), threads, and on a GPU: CUDA graph
capture and replay, two threads on two streams, two devices in one process. The GPU tests
skip on CPU machines; scripts/gpu-check.sh runs them (TORCH_CHECKS=1)."""

import threading

import pytest

from torch_util import assert_close, needs_2gpus, needs_cuda, rand, torch

import dnngraph.torch as dt
from dnngraph.torch import functional as F

TF = torch.nn.functional


def test_cache_hits_and_bound():
    dt.clear_cache()
    x, w, b = rand(4, 8), rand(8), rand(8)
    for _ in range(3):
        F.layer_norm(x, [8], w, b)
    info = dt.cache_info()
    assert info["size"] == 1 and info["misses"] == 1 and info["hits"] == 2
    F.layer_norm(rand(5, 8), [8], w, b)  # new shape: a new graph
    assert dt.cache_info()["size"] == 2
    old = info["capacity"]
    try:
        dt.set_cache_capacity(2)
        for n in range(6, 10):
            F.layer_norm(rand(n, 8), [8], w, b)
        assert dt.cache_info()["size"] == 2
    finally:
        dt.set_cache_capacity(old)
    with pytest.raises(ValueError, match="capacity"):
        dt.set_cache_capacity(0)


def test_cache_key_includes_attributes():
    dt.clear_cache()
    x, w = rand(4, 6), rand(3, 6)
    a = F.linear(x, w, None, "relu")
    c = F.linear(x, w, None, "gelu")
    assert dt.cache_info()["size"] == 2
    assert_close(a, TF.relu(x @ w.t()), torch.float32)
    assert_close(c, TF.gelu(x @ w.t()), torch.float32)


def test_threads_share_the_cache():
    x, w, b = rand(16, 32), rand(32), rand(32)
    ref = TF.layer_norm(x, [32], w, b)
    errors = []

    def work():
        try:
            for _ in range(50):
                torch.testing.assert_close(F.layer_norm(x, [32], w, b), ref, atol=1e-5, rtol=1e-5)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_meta_tensors_give_shapes_and_dtypes():
    x = rand(2, 3, 8).to("meta")
    y, mean, rstd = torch.ops.dnngraph.layer_norm(x, [8], None, None, 1e-5)
    assert y.shape == (2, 3, 8) and mean.shape == (2, 3, 1) and rstd.dtype == torch.float32
    q = rand(1, 2, 5, 4, dtype=torch.bfloat16).to("meta")
    out, lse = torch.ops.dnngraph.sdpa(q, q, q, None, 0.0, False, None, False)
    assert out.shape == (1, 2, 5, 4) and lse.shape == (1, 2, 5) and lse.dtype == torch.float32


@needs_cuda
def test_cuda_graph_capture_and_replay():
    x = rand(8, 64, device="cuda", dtype=torch.bfloat16)
    w, b = rand(64, device="cuda", dtype=torch.bfloat16), rand(64, device="cuda", dtype=torch.bfloat16)
    W = rand(32, 64, device="cuda", dtype=torch.bfloat16)

    def step():
        return F.linear(F.layer_norm(x, [64], w, b), W, None, "gelu")

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):  # warm: graphs built and cached outside the capture
            step()
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = step()
    for _ in range(2):
        x.copy_(rand(8, 64, device="cuda", dtype=torch.bfloat16))
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        ref = TF.gelu(TF.linear(TF.layer_norm(x.float(), [64], w.float(), b.float()), W.float()))
        assert_close(out, ref, torch.bfloat16, "cuda", scale=2)


@needs_cuda
def test_two_threads_two_streams():
    xs = [rand(64, 256, device="cuda") for _ in range(2)]
    w, b = rand(256, device="cuda"), rand(256, device="cuda")
    refs = [TF.layer_norm(x, [256], w, b) for x in xs]
    errors = []

    def work(i):
        try:
            stream = torch.cuda.Stream()
            with torch.cuda.stream(stream):
                for _ in range(100):
                    y = F.layer_norm(xs[i], [256], w, b)
                stream.synchronize()
                torch.testing.assert_close(y, refs[i], atol=5e-3, rtol=5e-3)
        except Exception as e:  # pragma: no cover
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


@needs_2gpus
def test_two_devices_one_process():
    for dev in ("cuda:0", "cuda:1", "cuda:0"):
        q, k, v = (rand(2, 4, 64, 64, device=dev, dtype=torch.bfloat16) for _ in range(3))
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        assert o.device == torch.device(dev)
        ref = TF.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=True)
        assert_close(o, ref, torch.bfloat16, "cuda", scale=2)
