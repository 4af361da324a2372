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


_FALLBACK_PROGRAM = r"""
import warnings
import torch
import dnngraph.torch as dt
from dnngraph.torch import functional as F
TF = torch.nn.functional
torch.manual_seed(0)
d = torch.float64

def check(ours, ref, *inputs):
    a = [t.detach().clone().requires_grad_() for t in inputs]
    b = [t.detach().clone().requires_grad_() for t in inputs]
    ya, yb = ours(*a), ref(*b)
    torch.testing.assert_close(ya, yb)
    g = torch.randn_like(yb)
    ya.backward(g)
    yb.backward(g)
    for x, y in zip(a, b):
        torch.testing.assert_close(x.grad, y.grad)

with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    x, wt, bs = torch.randn(3, 8, dtype=d), torch.randn(8, dtype=d), torch.randn(8, dtype=d)
    check(lambda x, w, b: F.layer_norm(x, [8], w, b), lambda x, w, b: TF.layer_norm(x, [8], w, b), x, wt, bs)
    check(lambda x, w: F.rms_norm(x, [8], w, 1e-6), lambda x, w: TF.rms_norm(x, [8], w, 1e-6), x, wt)
    W, B = torch.randn(5, 8, dtype=d), torch.randn(5, dtype=d)
    check(lambda x, W, B: F.linear(x, W, B, "gelu"), lambda x, W, B: TF.gelu(TF.linear(x, W, B)), x, W, B)
    a3, b3 = torch.randn(2, 3, 4, dtype=d), torch.randn(2, 4, 5, dtype=d)
    check(lambda a, b: F.matmul_epilogue(a, b, None, 0.5, "relu"), lambda a, b: TF.relu(0.5 * a @ b), a3, b3)
    xc, wc, bc = torch.randn(1, 4, 6, 6, dtype=d), torch.randn(6, 2, 3, 3, dtype=d), torch.randn(6, dtype=d)
    check(lambda x, w, b: F.conv2d_bias_act(x, w, b, 1, 1, 1, 2, "silu"),
          lambda x, w, b: TF.silu(TF.conv2d(x, w, b, 1, 1, 1, 2)), xc, wc, bc)
    q, k, v = torch.randn(1, 4, 5, 8, dtype=d), torch.randn(1, 2, 6, 8, dtype=d), torch.randn(1, 2, 6, 8, dtype=d)
    check(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True),
          lambda q, k, v: TF.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True), q, k, v)
    m = torch.randn(1, 1, 5, 6, dtype=d)
    check(lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m, enable_gqa=True),
          lambda q, k, v, m: TF.scaled_dot_product_attention(q, k, v, attn_mask=m, enable_gqa=True), q, k, v, m)
msgs = [str(x.message) for x in w if "runs on ATen" in str(x.message)]
ops = sorted({m.split(":")[2] for m in msgs})  # "dnngraph::<op>: ..."
print("warned:", ops)
assert len(msgs) == len(ops), "warned more than once per op"
assert dt.cache_info()["size"] > 0
taken = dt.fallback_count()
assert taken >= 7, taken  # every forward above (and the backwards) ran on ATen
# Under the "error" policy the same call raises, naming the op and why, and is counted.
assert dt.set_fallback_policy("error") == "warn"
try:
    F.linear(x, W, B, "relu")
except RuntimeError as e:
    assert "dnngraph::linear_act" in str(e) and "DNNGRAPH_TORCH_FORCE_FALLBACK" in str(e), e
else:
    raise AssertionError("the error policy let linear run on ATen")
assert dt.fallback_count() == taken + 1
print("FALLBACKS OK")
"""


@pytest.mark.aten_fallback
def test_aten_fallbacks_match_torch_and_warn_once():
    import os
    import subprocess
    import sys

    env = dict(os.environ, DNNGRAPH_TORCH_FORCE_FALLBACK="1", PYTHONPATH=os.pathsep.join(sys.path))
    assert env["DNNGRAPH_TORCH_FALLBACK"] == "warn"  # the aten_fallback marker's policy
    r = subprocess.run([sys.executable, "-c", _FALLBACK_PROGRAM], capture_output=True, text=True,
                       env=env, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "FALLBACKS OK" in r.stdout
    # Where a C++ warning surfaces depends on torch: a Python warning (seen on torch 2.15), or,
    # raised inside autograd's forward, torch's own stderr handler (torch 2.11 on the H200).
    for op in ("layer_norm", "rms_norm", "linear_act", "conv2d_bias_act", "sdpa", "sdpa_backward"):
        n_err = r.stderr.count(f"dnngraph::{op}:")
        assert f"'{op}'" in r.stdout or n_err > 0, r.stdout + r.stderr
        assert n_err <= 1, f"{op} warned {n_err} times: " + r.stderr


def test_fallback_policy_controls():
    # conftest.py runs every test under "error"; the setter returns the previous policy.
    assert dt.fallback_policy() == "error"
    assert dt.set_fallback_policy("warn") == "error"
    try:
        assert dt.fallback_policy() == "warn"
        with pytest.raises(ValueError, match="the fallback policy is 'ignore'; expected 'warn'"):
            dt.set_fallback_policy("ignore")
        assert dt.fallback_policy() == "warn"
    finally:
        dt.set_fallback_policy("error")
    # The CPU engine has a plan for every op: computing counts no fallback.
    before = dt.fallback_count()
    F.layer_norm(rand(2, 8), [8])
    assert dt.fallback_count() == before


def test_fallback_policy_from_the_environment():
    import os
    import subprocess
    import sys

    prog = ("import dnngraph.torch as dt; print(dt.fallback_policy()); "
            "dt.functional.layer_norm(__import__('torch').ones(2, 4), [4])")
    base = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    for value, out in (("error", "error"), ("warn", "warn"), ("", "warn")):
        r = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True,
                           env=dict(base, DNNGRAPH_TORCH_FALLBACK=value), timeout=300)
        assert r.returncode == 0 and r.stdout.split() == [out], r.stdout + r.stderr
    r = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True,
                       env=dict(base, DNNGRAPH_TORCH_FALLBACK="loud"), timeout=300)
    assert r.returncode != 0
    assert "DNNGRAPH_TORCH_FALLBACK is 'loud'; expected 'warn'" in r.stderr, r.stderr


_CAUGHT_FALLBACK_TESTS = r"""
import pytest
import torch
from dnngraph.torch import functional as F

def test_catches_the_fallback_error():
    with pytest.raises(RuntimeError, match="fallback policy is 'error'"):
        F.layer_norm(torch.ones(2, 4), [4])

@pytest.mark.aten_fallback
def test_falls_back_on_purpose():
    torch.testing.assert_close(F.layer_norm(torch.ones(2, 4), [4]), torch.zeros(2, 4))
"""


def test_conftest_fails_a_test_that_caught_the_fallback(tmp_path):
    """The guard itself: with every op forced onto ATen, a test that swallows the policy's error
    still fails, and a test marked aten_fallback runs on ATen and passes."""
    import os
    import subprocess
    import sys

    (tmp_path / "test_inner.py").write_text(_CAUGHT_FALLBACK_TESTS)
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, DNNGRAPH_TORCH_FORCE_FALLBACK="1",
               PYTHONPATH=os.pathsep.join([here] + sys.path))
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p",
                        "conftest", "-rA", "--rootdir", str(tmp_path), "-c", os.devnull,
                        str(tmp_path / "test_inner.py")],
                       capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path)
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    assert "FAILED test_inner.py::test_catches_the_fallback_error" in out, out
    assert "fell back to ATen 1 time(s) in this test" in out, out
    assert "PASSED test_inner.py::test_falls_back_on_purpose" in out, out


# ---------------------------------------------------------------- the direct entries (_fast)


def _functional_cases():
    x, w, b = rand(3, 8, grad=True), rand(8, grad=True), rand(8, grad=True)
    W = rand(5, 8, grad=True)
    a3, b3 = rand(2, 3, 8, grad=True), rand(2, 8, 4, grad=True)
    xc, wc, bc = rand(1, 2, 5, 5, grad=True), rand(3, 2, 3, 3, grad=True), rand(3, grad=True)
    q = rand(1, 2, 4, 8, grad=True)
    ops = torch.ops.dnngraph
    return [
        (lambda: F.layer_norm(x, (8,), w, b), lambda: ops.layer_norm.default(x, [8], w, b, 1e-5)[0]),
        (lambda: F.rms_norm(x, 8, w), lambda: ops.rms_norm.default(x, [8], w, None)[0]),
        (lambda: F.linear(x, W, None, "silu"), lambda: ops.linear_act.default(x, W, None, "silu")),
        (lambda: F.matmul_epilogue(a3, b3, None, 2, "gelu", amax=True)[0],
         lambda: ops.matmul_epilogue.default(a3, b3, None, 2.0, "gelu", True)[0]),
        (lambda: F.conv2d_bias_act(xc, wc, bc, 1, (1, 1), [1, 1], 1, "relu"),
         lambda: ops.conv2d_bias_act.default(xc, wc, bc, [1, 1], [1, 1], [1, 1], 1, "relu")),
        (lambda: F.scaled_dot_product_attention(q, q, q, is_causal=True, scale=0.3),
         lambda: ops.sdpa.default(q, q, q, None, 0.0, True, 0.3, False)[0]),
    ]


def test_direct_entries_equal_torch_ops_with_autograd():
    from dnngraph.torch import _fast  # built with the op library

    assert _fast.layer_norm(rand(2, 4), [4], None, None, 1e-5) is not NotImplemented
    for fast, boxed in _functional_cases():
        y, yr = fast(), boxed()
        torch.testing.assert_close(y, yr, rtol=0, atol=0)
        leaves = [t for t in y.grad_fn.next_functions if t[0] is not None]
        assert leaves, "the direct entry must record autograd like the op"
        g = rand(*y.shape)
        ins = [t for t in _inputs_of(y)]
        ga = torch.autograd.grad(y, ins, g)
        gb = torch.autograd.grad(yr, ins, g)
        for u, v in zip(ga, gb):
            torch.testing.assert_close(u, v, rtol=0, atol=0)


def _inputs_of(y):
    """The leaf tensors y depends on (AccumulateGrad nodes' variables)."""
    seen, out, stack = set(), [], [y.grad_fn]
    while stack:
        fn = stack.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        if hasattr(fn, "variable"):
            out.append(fn.variable)
        stack.extend(f for f, _ in fn.next_functions)
    return out


def test_direct_entries_defer_to_torch_function():
    from torch.overrides import TorchFunctionMode

    from dnngraph.torch import _fast

    seen = []

    class Record(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            seen.append(str(func))
            return func(*args, **(kwargs or {}))

    x, w = rand(2, 8), rand(8)
    with Record():
        assert _fast.layer_norm(x, [8], w, None, 1e-5) is NotImplemented
        y = F.layer_norm(x, [8], w)
    assert any("dnngraph.layer_norm" in s for s in seen), seen

    class Sub(torch.Tensor):
        pass

    xs = x.as_subclass(Sub)
    assert _fast.layer_norm(xs, [8], w, None, 1e-5) is NotImplemented
    torch.testing.assert_close(F.layer_norm(xs, [8], w).as_subclass(torch.Tensor), y)
    # Arguments of types the direct entries do not take go the torch.ops way too.
    assert _fast.matmul_epilogue(rand(2, 3), rand(3, 2), None, 1.0, "none", 1) is NotImplemented
    assert F.matmul_epilogue(rand(2, 3), rand(3, 2), None, 1.0, "none", 1)[1].dim() == 0


def test_direct_entries_raise_the_ops_errors():
    xi = torch.ones(2, 8, dtype=torch.int32)
    with pytest.raises(TypeError, match="dnngraph::layer_norm: tensor 'x' has dtype"):
        F.layer_norm(xi, [8])
    with pytest.raises(ValueError, match="unknown activation 'nope'"):
        F.linear(rand(2, 8), rand(3, 8), None, "nope")
    with pytest.raises(ValueError, match="does not end with normalized_shape"):
        F.layer_norm(rand(2, 8), [7])


def test_direct_entries_leave_unconvertible_numbers_to_torch_ops():
    # An int too large for a double: the direct entry must not leave a Python error pending
    # (that would surface as SystemError); it defers, and torch.ops raises its own error.
    from dnngraph.torch import _fast

    assert _fast.layer_norm(rand(2, 8), [8], None, None, 10**400) is NotImplemented
    assert _fast.layer_norm(rand(2, 8), [2**70], None, None, 1e-5) is NotImplemented
    with pytest.raises((TypeError, RuntimeError, OverflowError), match="eps"):
        F.layer_norm(rand(2, 8), [8], eps=10**400)


def test_backward_makes_no_zeros_for_unused_outputs():
    """The statistics outputs (logsumexp, mean, rstd, amax) get no gradient: backward runs with
    no zero tensor made and filled for them (an allocation and a kernel per op otherwise)."""
    torch.manual_seed(0)
    x = torch.randn(2, 3, 8, requires_grad=True)
    q, k, v = (torch.randn(1, 2, 4, 8, requires_grad=True) for _ in range(3))
    a, b = torch.randn(2, 4, 6, requires_grad=True), torch.randn(2, 6, 5, requires_grad=True)
    cases = {
        "sdpa": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True),
        "layer_norm": lambda: F.layer_norm(x, [8], torch.ones(8), torch.zeros(8)),
        "rms_norm": lambda: F.rms_norm(x, [8], torch.ones(8)),
        "add_rms_norm": lambda: F.add_rms_norm(x, x, [8], torch.ones(8))[1],
        "matmul_epilogue": lambda: F.matmul_epilogue(a, b, None, 1.0, "gelu", amax=True)[0],
    }
    for name, fn in cases.items():
        out = fn()
        g = torch.randn_like(out)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            out.backward(g)
        made = [e.name for e in prof.events() if e.name in ("aten::zeros", "aten::zeros_like", "aten::fill_", "aten::zero_")]
        assert not made, f"{name}: backward made zeros: {made}"


@needs_cuda
def test_training_steps_replay_recorded_cuda_graphs():
    """A training loop's steady state (the same buffers every step) replays each plan's recorded
    CUDA graph (set_cuda_graphs("repeated")) with the results of the first, directly executed
    step; the cache's counters say so."""
    previous = dt.set_cuda_graphs("repeated")
    try:
        replay_steps()
    finally:
        dt.set_cuda_graphs(previous)


def replay_steps():
    dt.clear_cache()
    x = rand(4, 16, 12, 12, device="cuda", dtype=torch.bfloat16).contiguous(
        memory_format=torch.channels_last)
    conv = dt.Conv2dBiasAct(16, 16, 3, padding=1, activation="relu").to("cuda", torch.bfloat16)
    conv = conv.to(memory_format=torch.channels_last)
    results = []
    for _ in range(8):
        conv.zero_grad(set_to_none=True)
        xg = x.detach().requires_grad_()
        y = conv(xg, residual=x)
        y.float().square().mean().backward()
        results.append([t.detach().clone() for t in (y, xg.grad, conv.weight.grad, conv.bias.grad)])
        del y, xg  # as a training loop lets go of a step's tensors
    torch.cuda.synchronize()
    for k, step in enumerate(results[1:], 1):
        for name, got, want in zip(("y", "dx", "dweight", "dbias"), step, results[0]):
            # The same kernels each step; cuDNN's weight gradient may sum in another order.
            err = ((got.float() - want.float()).norm() / want.float().norm()).item()
            assert err <= 1e-2, f"step {k}: {name} differs from the first step's by {err:.2e}"
    info = dt.cache_info()
    assert info["cuda_graph_replayed"] > 0 and info["cuda_graph_recorded"] > 0, info
    assert info["cuda_graph_direct"] > 0, info  # the first step ran directly
    with torch.no_grad():  # new values in the same buffers before each call: replays read them
        for k in range(4):
            x.copy_(rand(4, 16, 12, 12, device="cuda", dtype=torch.bfloat16))
            y = conv(x, residual=x)
            ref = torch.relu(TF.conv2d(x.float(), conv.weight.float(), conv.bias.float(),
                                       padding=1) + x.float())
            assert_close(y.float(), ref, torch.bfloat16, "cuda")
            del y
    assert dt.cache_info()["cuda_graph_replayed"] > info["cuda_graph_replayed"]


def test_cuda_graph_mode_is_set_and_checked():
    dt.clear_cache()
    before = dt.cuda_graphs()
    assert before in ("off", "repeated", "always")
    try:
        assert dt.set_cuda_graphs("repeated") == before
        assert dt.cuda_graphs() == "repeated"
        F.layer_norm(rand(3, 8), [8], rand(8), rand(8))  # on the CPU the engine runs directly
        assert dt.set_cuda_graphs("always") == "repeated"
        with pytest.raises(ValueError, match="'sometimes' is not one of 'off', 'repeated', 'always'"):
            dt.set_cuda_graphs("sometimes")
        assert dt.cuda_graphs() == "always"
    finally:
        dt.set_cuda_graphs(before)
    info = dt.cache_info()
    assert info["cuda_graph_replayed"] == info["cuda_graph_recorded"] == 0


@pytest.fixture
def cudnn_benchmark():
    before = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = True
    dt.clear_cache()
    yield
    torch.backends.cudnn.benchmark = before
    dt.clear_cache()


@needs_cuda
def test_cudnn_benchmark_autotunes_new_graphs(cudnn_benchmark):
    """torch.backends.cudnn.benchmark: each graph built while it is set has its plan chosen by
    timing; the results are those of the heuristics' plan within bf16 tolerance."""
    x = rand(4, 16, 12, 12, device="cuda", dtype=torch.bfloat16).contiguous(
        memory_format=torch.channels_last)
    w = rand(24, 16, 3, 3, device="cuda", dtype=torch.bfloat16).contiguous(
        memory_format=torch.channels_last)
    b = rand(24, device="cuda", dtype=torch.bfloat16)
    y = F.conv2d_bias_act(x, w, b, padding=1, activation="relu")
    assert dt.cache_info()["autotuned"] == 1, dt.cache_info()
    ref = torch.relu(TF.conv2d(x.float(), w.float(), b.float(), padding=1))
    assert_close(y.float(), ref, torch.bfloat16, "cuda")
    torch.backends.cudnn.benchmark = False  # graphs built from now on keep the heuristics' plan
    F.layer_norm(rand(8, 64, device="cuda"), [64], rand(64, device="cuda"), rand(64, device="cuda"))
    assert dt.cache_info()["autotuned"] == 1 and dt.cache_info()["size"] == 2


@needs_cuda
def test_cudnn_benchmark_inside_a_capture_keeps_the_heuristics_plan(cudnn_benchmark):
    """A graph first built inside a CUDA-graph capture cannot be timed (that would end the
    capture): it warns, keeps the heuristics' plan, and the capture replays right."""
    x = rand(8, 64, device="cuda")
    w, b = rand(64, device="cuda"), rand(64, device="cuda")
    F.rms_norm(x, [64], w)  # another graph, built (and autotuned) before the capture
    tuned = dt.cache_info()["autotuned"]
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with pytest.warns(UserWarning, match="not autotuned although torch.backends.cudnn.benchmark"):
        with torch.cuda.graph(graph, capture_error_mode="relaxed"):
            y = F.layer_norm(x, [64], w, b)
    assert dt.cache_info()["autotuned"] == tuned == 1
    x.copy_(rand(8, 64, device="cuda"))
    y.fill_(float("nan"))
    graph.replay()
    assert_close(y, TF.layer_norm(x, [64], w, b), torch.float32, "cuda")
