"""Shared fixtures and numpy reference helpers for the dnngraph Python tests (CPU only).

Every test runs with dnngraph.torch's fallback policy at "error": an op the engine has no plan
for raises instead of quietly running on ATen, so a result compared with torch's was computed by
dnngraph. A test that exercises the ATen fallback on purpose says so with
``@pytest.mark.aten_fallback`` (the policy is then "warn"). A test in which an op still reached
the fallback (say, one that caught the error) fails. Every test starts from seeded random
generators (numpy's and Python's global ones, and torch's when torch is loaded)."""

import faulthandler
import math
import os
import random
import sys
import zlib

import numpy as np
import pytest

import dnngraph as cudnn


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "aten_fallback: the test runs dnngraph.torch ops on ATen on purpose (fallback policy 'warn')",
    )
    # Read by libdnngraph_torch when it first needs its policy, and inherited by the processes a
    # test starts (examples, DistributedDataParallel workers).
    os.environ["DNNGRAPH_TORCH_FALLBACK"] = os.environ.get("DNNGRAPH_TEST_FALLBACK_POLICY", "error")
    # The compile backend's tests check the numbers of fused graphs: on a GPU its measure option
    # would leave a partition that is not faster than ATen's ops out of the rewrite (and out of
    # the test). Tests of that option turn it on themselves.
    os.environ.setdefault("DNNGRAPH_COMPILE_MEASURE", "0")


def _runs_on_a_gpu(item):
    params = getattr(getattr(item, "callspec", None), "params", {})
    reasons = " ".join(str(m.kwargs.get("reason", "")) for m in item.iter_markers("skipif")).lower()
    return (item.path.name.startswith("test_gpu_")
            or any(word in item.name.lower() for word in ("cuda", "gpu"))
            or any(str(v).startswith("cuda") for v in params.values())
            or any(word in reasons for word in ("cuda", "gpu", "nccl")))


def pytest_collection_modifyitems(config, items):
    """DNNGRAPH_TEST_ON=cuda keeps only the tests that may run on a GPU (the test_gpu_* files, a
    test named for CUDA or a GPU, a case parametrized with a CUDA device, a test skipped without
    CUDA, a GPU or NCCL): the GPU machine's run, whose CPU cases the CPU run already covers."""
    if os.environ.get("DNNGRAPH_TEST_ON", "all") != "cuda":
        return
    keep, drop = [], []
    for item in items:
        (keep if _runs_on_a_gpu(item) else drop).append(item)
    config.hook.pytest_deselected(items=drop)
    items[:] = keep


# DNNGRAPH_TEST_REPORT=FILE (the GPU machine's runs, scripts/run-tests-resumable.py): each
# failure is appended to FILE with its traceback as it happens, so a run cut short still says
# why; FILE.running names the test under way (removed at the end of the session: if it remains,
# that test hung or crashed the process). DNNGRAPH_TEST_HANG_S=N: a test still running after N
# seconds dumps every thread's stack into FILE and ends the process (a hang in C++ cannot be
# interrupted from Python).
def _report_path():
    return os.environ.get("DNNGRAPH_TEST_REPORT")


def pytest_runtest_logreport(report):
    path = _report_path()
    if path and report.failed:
        with open(path, "a") as f:
            f.write(f"==== FAILED {report.nodeid} ({report.when})\n{report.longreprtext}\n\n")


_hang_file = None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    global _hang_file
    path = _report_path()
    if not path:
        return (yield)
    with open(path + ".running", "w") as f:
        f.write(item.nodeid + "\n")
    hang_s = float(os.environ.get("DNNGRAPH_TEST_HANG_S", "0") or 0)
    if hang_s > 0:
        if _hang_file is None:
            _hang_file = open(path, "a")
        faulthandler.dump_traceback_later(hang_s, exit=True, file=_hang_file)
    try:
        return (yield)
    finally:
        if hang_s > 0:
            faulthandler.cancel_dump_traceback_later()


def _fallback_policy_of(item):
    # DNNGRAPH_TEST_FALLBACK_POLICY=warn: every test under "warn" (docs/testing.md, "The ATen
    # paths"), to run the suite with every plan refused.
    if os.environ.get("DNNGRAPH_TEST_FALLBACK_POLICY") == "warn":
        return "warn"
    if item.get_closest_marker("aten_fallback") or getattr(item, "_dnngraph_fallback_allowed", None):
        return "warn"
    return "error"


@pytest.fixture
def allow_aten_fallback(request):
    """For a parametrized case the engine cannot plan by design (e.g. fp32 attention on cuDNN):
    ``allow_aten_fallback("why")`` inside the test turns the policy to "warn" for that case."""

    def allow(why):
        assert why, "say why this case runs on ATen"
        request.node._dnngraph_fallback_allowed = why
        dt = sys.modules.get("dnngraph.torch")
        if dt is not None:
            dt.set_fallback_policy("warn")

    return allow


@pytest.fixture(autouse=True)
def _dnngraph_computed_it(request, monkeypatch):
    """The fallback policy of this test (module-level imports of dnngraph.torch are done by now;
    one imported inside the test reads the environment)."""
    policy = _fallback_policy_of(request.node)
    monkeypatch.setenv("DNNGRAPH_TORCH_FALLBACK", policy)
    dt = sys.modules.get("dnngraph.torch")
    previous = dt.set_fallback_policy(policy) if dt is not None else None
    yield
    if dt is not None:
        dt.set_fallback_policy(previous)


def _fallbacks_taken():
    dt = sys.modules.get("dnngraph.torch")
    return dt.fallback_count() if dt is not None else 0


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """A test (not marked aten_fallback) in which an op reached the ATen fallback fails, even if
    it caught the error the policy raised."""
    before = _fallbacks_taken()
    result = yield
    taken = _fallbacks_taken() - before
    if taken and _fallback_policy_of(item) == "error":
        raise AssertionError(
            f"dnngraph.torch ops fell back to ATen {taken} time(s) in this test: dnngraph did not "
            "compute the result. Mark the test @pytest.mark.aten_fallback if that is its purpose")
    return result


@pytest.fixture(autouse=True)
def _seeded(request):
    """Seeds the global generators from the test's id, so every run draws the same inputs."""
    seed = zlib.crc32(request.node.nodeid.encode())
    np.random.seed(seed)
    random.seed(seed)
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "manual_seed"):
        torch.manual_seed(seed)
    yield


@pytest.fixture(scope="session")
def handle():
    return cudnn.create_handle(device="cpu")


@pytest.fixture
def rng(request):
    # Random inputs per test, reproducible from the test's name.
    return np.random.default_rng(zlib.crc32(request.node.name.encode()))


def build(graph, heur=None, policy=None):
    """The tutorial's five-step pipeline."""
    graph.validate()
    graph.build_operation_graph()
    graph.create_execution_plans(heur or [cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    graph.check_support()
    if policy is None:
        graph.build_plans()
    else:
        graph.build_plans(policy)
    return graph


def workspace_for(graph):
    return np.empty(max(graph.get_workspace_size(), 1), dtype=np.uint8)


def poisoned(shape, dtype=np.float32, strides_order=None):
    """An output array filled with NaN (or a sentinel for integers)."""
    a = np.empty(shape, dtype=dtype)
    a.fill(np.nan if np.issubdtype(dtype, np.floating) else 77)
    return a


def assert_close(got, ref, rtol=1e-5, atol=None):
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    assert got.shape == ref.shape
    assert np.all(np.isfinite(got)), "output has NaN/inf (not written?)"
    scale = max(float(np.abs(ref).max()), 1e-6)
    if atol is None:
        atol = rtol * scale
    np.testing.assert_allclose(got, ref, rtol=rtol, atol=atol)


_erf = np.vectorize(math.erf)


def gelu(x):
    x = np.asarray(x, dtype=np.float64)
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def erf(x):
    return _erf(np.asarray(x, dtype=np.float64))


def conv2d_nchw(x, w, pad, stride, dil):
    """Naive fp64 cross-correlation: x [N,C,H,W], w [K,C,R,S] -> [N,K,P,Q]."""
    x = np.asarray(x, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    n, c, h, wd = x.shape
    k, _, r, s = w.shape
    p = (h + 2 * pad[0] - dil[0] * (r - 1) - 1) // stride[0] + 1
    q = (wd + 2 * pad[1] - dil[1] * (s - 1) - 1) // stride[1] + 1
    xp = np.zeros((n, c, h + 2 * pad[0], wd + 2 * pad[1]))
    xp[:, :, pad[0]:pad[0] + h, pad[1]:pad[1] + wd] = x
    y = np.zeros((n, k, p, q))
    for i in range(r):
        for j in range(s):
            patch = xp[:, :, i * dil[0]:i * dil[0] + stride[0] * (p - 1) + 1:stride[0],
                       j * dil[1]:j * dil[1] + stride[1] * (q - 1) + 1:stride[1]]
            y += np.einsum("nchw,kc->nkhw", patch, w[:, :, i, j])
    return y


def channels_last(a):
    """A copy of NCHW `a` laid out NHWC in memory (numpy strides like torch.channels_last)."""
    return np.ascontiguousarray(a.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)


def elem_strides(a):
    return [s // a.itemsize for s in a.strides]


def scalar_mul_graph(handle, dtype):
    """Y = X [2, 2] * s, s a [1, 1] pass-by-value scalar of dtype, all else FLOAT; not built.
    Returns the graph and X, S, Y."""
    g = cudnn.pygraph(handle=handle, io_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT)
    X = g.tensor(name="X", dim=[2, 2], data_type=cudnn.data_type.FLOAT)
    S = g.tensor(name="s", dim=[1, 1], data_type=dtype, is_pass_by_value=True)
    Y = g.mul(a=X, b=S)
    Y.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    return g, X, S, Y


# Array objects that offer execute() one protocol only (numpy arrays behind them).

class InterfaceArray:
    """Only __array_interface__ (or __cuda_array_interface__ with cuda=True)."""

    def __init__(self, a, cuda=False):
        self.a = a
        name = "__cuda_array_interface__" if cuda else "__array_interface__"
        setattr(self, name, dict(a.__array_interface__))


class DLPackArray:
    """Only the DLPack protocol."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, **kw):
        return self.a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


def tensor_of(graph, a, name):
    """Describes numpy array `a` (dims, strides in elements, dtype) as a graph tensor."""
    dt = {np.dtype(np.float32): cudnn.data_type.FLOAT, np.dtype(np.float16): cudnn.data_type.HALF,
          np.dtype(np.float64): cudnn.data_type.DOUBLE, np.dtype(np.int32): cudnn.data_type.INT32,
          np.dtype(np.int64): cudnn.data_type.INT64, np.dtype(np.int8): cudnn.data_type.INT8,
          np.dtype(np.uint8): cudnn.data_type.UINT8, np.dtype(np.bool_): cudnn.data_type.BOOLEAN}
    return graph.tensor(name=name, dim=list(a.shape), stride=elem_strides(a), data_type=dt[a.dtype])


def pytest_terminal_summary(terminalreporter):
    """The property suite's case count (python/tests/property/props.py)."""
    import sys
    props = sys.modules.get("props")
    if props is None or not props.CASES["n"]:
        return
    n, floor = props.CASES["n"], props.min_cases()
    terminalreporter.write_line(f"dnngraph property cases run: {n}")
    if floor and n < floor:
        terminalreporter.write_line(f"dnngraph property suite: {n} cases, expected >= {floor}")


def pytest_sessionfinish(session, exitstatus):
    path = _report_path()  # the session ended normally: no test hung or crashed it
    if path and os.path.exists(path + ".running"):
        os.remove(path + ".running")
    props = sys.modules.get("props")
    if props is not None and props.min_cases() and props.CASES["n"] < props.min_cases():
        session.exitstatus = 1
