"""The autotuner, plan filters and CUDA graph entry points from Python, on the CPU reference
engine (one candidate, timed for real); tests/gpu covers cuDNN."""

import os
import uuid

import numpy as np
import pytest

import dnngraph as cudnn

CACHE_ON = os.environ.get("DNNGRAPH_CACHE", "1") != "0"


def make(handle, n, cls=None, batch=1):
    """Y = relu(A @ A) with a virtual intermediate (the plan needs a workspace)."""
    g = (cls or cudnn.pygraph)(handle=handle, name="tune_" + uuid.uuid4().hex[:8],
                               io_data_type=cudnn.data_type.FLOAT,
                               compute_data_type=cudnn.data_type.FLOAT)
    A = g.tensor(name="A", dim=[batch, n, n])
    Y = g.relu(input=g.matmul(A, A))
    Y.set_output(True)
    return g, A, Y


def test_native_autotune_allocates_its_buffers_and_records_the_choice(handle):
    batch = 1 + uuid.uuid4().int % 100000  # a shape no earlier run recorded
    g, _, _ = make(handle, 4, cudnn.NativeGraph, batch)
    g.build()
    seen = []
    r = g.autotune(handle, iterations=3, warmup=1, progress=lambda i, k, name: seen.append(
        (i, k, name)))
    assert r["selected_name"] == "reference" and r["selected"] == 0
    assert not r["from_cache"] and r["timed_runs"] >= 3
    (c,) = r["candidates"]
    assert c["ok"] and c["runs"] >= 3 and 0 < c["min_ms"] <= c["median_ms"]
    assert c["workspace_size"] == g.get_autotune_workspace_size() > 0
    assert seen == [(0, 1, "reference")]
    g2, _, _ = make(handle, 4, cudnn.NativeGraph, batch)
    g2.build()
    r2 = g2.autotune(handle, iterations=3)
    if CACHE_ON:
        assert r2["from_cache"] and r2["timed_runs"] == 0 and r2["candidates"] == []
        assert r2["selected_ms"] == pytest.approx(c["median_ms"])
    r3 = g2.autotune(handle, iterations=3, use_cache=False)
    assert not r3["from_cache"] and r3["timed_runs"] >= 3


def test_compat_autotune_on_the_callers_buffers(handle, rng):
    g, A, Y = make(handle, 4)
    g.build()
    a = rng.standard_normal((1, 4, 4)).astype(np.float32)
    y = np.full((1, 4, 4), np.nan, np.float32)
    r = g.autotune(handle, {A: a, Y: y}, None, iterations=2, rotate_inputs=2, use_cache=False)
    assert r["rotated_copies"] == 2 and r["flush_bytes"] == 0
    y[...] = np.nan
    g.execute({A: a, Y: y})
    np.testing.assert_allclose(y, np.maximum(a @ a, 0), rtol=1e-5, atol=1e-6)
    r = g.autotune(handle, {A: a, Y: y}, None, iterations=2, use_cache=False,
                   keep_unselected=False)  # the selected plan stays, and runs
    y[...] = np.nan
    g.execute({A: a, Y: y})
    np.testing.assert_allclose(y, np.maximum(a @ a, 0), rtol=1e-5, atol=1e-6)
    with pytest.raises(cudnn.NotSupportedError, match="user_impl"):
        g.autotune(handle, {A: a, Y: y}, None, user_impl=object())


def test_bad_options_and_packs_are_errors(handle, rng):
    g, A, Y = make(handle, 4, cudnn.NativeGraph)
    with pytest.raises(ValueError, match="before build_operation_graph"):
        g.autotune(handle)
    g.build()
    for kw in ({"iterations": 0}, {"warmup": -1}, {"budget_ms": -1.0}, {"rotate_inputs": -1}):
        with pytest.raises(ValueError, match="out of range"):
            g.autotune(handle, **kw)
    a = rng.standard_normal((1, 4, 4)).astype(np.float32)
    with pytest.raises(ValueError, match="'Y'|missing"):
        g.autotune(handle, {A: a}, None)


def test_native_filters_chain_and_report(handle):
    g, _, _ = make(handle, 4, cudnn.NativeGraph)
    assert g.deselect_numeric_notes(["TENSOR_CORE"]).deselect_workspace_greater_than(1 << 20) is g
    f = g.plan_filters()
    assert f["deselect_numeric_notes"] == ["TENSOR_CORE"] and f["workspace_limit"] == 1 << 20
    g.build()  # the reference plan carries neither: kept
    g.select_numeric_notes(["FP64_ACCUMULATION"])
    g.build()
    g.deselect_engines(["reference"])
    with pytest.raises(cudnn.NotSupportedError, match="deselect_engines"):
        g.build()


def test_cuda_graph_calls_on_the_cpu(handle, rng):
    g, A, Y = make(handle, 4)
    g.build()
    a = rng.standard_normal((1, 4, 4)).astype(np.float32)
    y = np.full((1, 4, 4), np.nan, np.float32)
    ws = np.empty(g.get_workspace_size(), np.uint8)
    with pytest.raises(cudnn.NotSupportedError, match="cannot record CUDA graphs"):
        g.populate_cuda_graph(handle, {A: a, Y: y}, ws, 0x1000)
    with pytest.raises(ValueError, match="null"):
        g.update_cuda_graph(handle, {A: a, Y: y}, ws, 0)
    with pytest.raises(TypeError, match="cudaGraph_t"):
        g.populate_cuda_graph(handle, {A: a, Y: y}, ws, "graph")
    assert g.set_cuda_graph_execute(True) is g and g.cuda_graph_execute
    g.execute({A: a, Y: y}, ws)  # the reference engine executes directly
    np.testing.assert_allclose(y, np.maximum(a @ a, 0), rtol=1e-5, atol=1e-6)
    for mode in ("repeated", "always"):
        y.fill(np.nan)
        assert g.set_cuda_graph_execute(mode).cuda_graph_execute
        g.execute({A: a, Y: y}, ws)
        np.testing.assert_allclose(y, np.maximum(a @ a, 0), rtol=1e-5, atol=1e-6)
    assert g.cuda_graph_execute_stats == {"replayed": 0, "recorded": 0, "direct": 0}
    assert not g.set_cuda_graph_execute("off").cuda_graph_execute
    with pytest.raises(ValueError, match="'sometimes' is not one of 'always', 'repeated', 'off'"):
        g.set_cuda_graph_execute("sometimes")
    with pytest.raises(TypeError, match="expected a bool or one of"):
        g.set_cuda_graph_execute(1)
