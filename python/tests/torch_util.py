"""Helpers of the dnngraph.torch tests: skip without torch or the op library (fail instead when
DNNGRAPH_REQUIRE_TORCH=1, as CI sets it), devices to run on, dtype-fit tolerances.

conftest.py sets the ATen fallback to an error for every test, so a result these tests compare
with torch's was computed by dnngraph."""

import os

import pytest

REQUIRE_TORCH = os.environ.get("DNNGRAPH_REQUIRE_TORCH") == "1"


def _missing(what):
    if REQUIRE_TORCH:
        # An error at collection: the run fails instead of going green without the torch tests.
        raise ImportError(f"{what}, and DNNGRAPH_REQUIRE_TORCH=1 requires the dnngraph.torch "
                          "tests to run: install torch and build with -DDNNGRAPH_BUILD_TORCH=ON")
    pytest.skip(what, allow_module_level=True)


try:
    import torch
except ImportError as e:
    _missing(f"torch is not installed ({e})")
try:
    import dnngraph.torch as dt  # noqa: F401
    from dnngraph.torch import functional  # noqa: F401  (a bare folder imports as a namespace)
except ImportError as e:  # built without torch
    _missing(f"dnngraph.torch not built: {e}")

# GPU tests run whenever torch sees a GPU: a GPU whose dnngraph handle cannot be made fails them.
CUDA = torch.cuda.is_available()
DEVICES = ["cpu"] + (["cuda"] if CUDA else [])
needs_cuda = pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU")
needs_2gpus = pytest.mark.skipif(
    not CUDA or torch.cuda.device_count() < 2, reason="needs 2 CUDA GPUs"
)

TOL = {
    torch.float64: dict(atol=1e-10, rtol=1e-10),
    torch.float32: dict(atol=1e-5, rtol=1e-5),
    torch.bfloat16: dict(atol=2e-2, rtol=2e-2),
    torch.float16: dict(atol=1e-2, rtol=1e-2),
}


def tol(dtype, device="cpu", scale=1.0):
    t = dict(TOL[dtype])
    if device != "cpu" and dtype == torch.float32:
        # cuDNN may use TF32 tensor cores and other summation orders.
        t = dict(atol=5e-3, rtol=5e-3)
    return {k: v * scale for k, v in t.items()}


def relative_error(actual, exact):
    """||actual - exact|| / ||exact|| in float64 (L2 over every element)."""
    a, e = actual.detach().double(), exact.detach().double()
    return float((a - e).norm() / e.norm().clamp_min(1e-300))


def assert_no_worse_than_eager(actual, eager, exact, what, factor=2.0, floor=2e-3):
    """Low-precision results, where an elementwise comparison with eager fails on a few
    elements for no fault (a ReLU near 0 rounds to the other side in one of them, and the
    gradient there differs by a whole term): both against the float64 result ``exact``,
    ``actual``'s relative L2 error at most ``factor`` times eager's plus ``floor``."""
    assert actual.shape == exact.shape, f"{what}: shape {actual.shape} != {exact.shape}"
    ours, theirs = relative_error(actual, exact), relative_error(eager, exact)
    assert ours <= factor * theirs + floor, (
        f"{what}: relative error {ours:.3g} against float64, eager's {theirs:.3g}")


def rand(*shape, dtype=torch.float32, device="cpu", grad=False, scale=1.0):
    t = (torch.randn(*shape, dtype=torch.float32) * scale).to(dtype=dtype, device=device)
    return t.requires_grad_(grad)


def assert_close(actual, expected, dtype, device="cpu", scale=1.0):
    torch.testing.assert_close(actual, expected.to(actual.dtype), **tol(dtype, device, scale))


def assert_module_close(model, ref, x):
    """model and its reference ref on copies of the fp32 input x: the outputs, then x's
    gradients for the loss mean(out^2)."""
    xo, xr = x.clone().requires_grad_(), x.clone().requires_grad_()
    out, outr = model(xo), ref(xr)
    assert_close(out, outr, torch.float32, scale=4)
    out.square().mean().backward()
    outr.square().mean().backward()
    assert_close(xo.grad, xr.grad, torch.float32, scale=20)


def assert_grads_close(y, yr, leaves, ref_leaves, dtype, device="cpu", scale=1.0):
    """Backpropagates one seeded upstream gradient through y and through its reference yr (in
    yr's dtype), then compares each leaf's gradient with its reference leaf's."""
    dy = rand(*y.shape, dtype=dtype, device=device)
    y.backward(dy)
    yr.backward(dy.to(yr.dtype))
    for t, tr in zip(leaves, ref_leaves, strict=True):
        assert_close(t.grad, tr.grad, dtype, device, scale=scale)


def ref_dtype(dtype):
    """Reference computations of low-precision cases run in fp32 on the same inputs."""
    return torch.float32 if dtype in (torch.bfloat16, torch.float16) else dtype


# The eager form of each activation name the ops take.
TF = torch.nn.functional
ACTS = {
    "none": lambda z: z,
    "relu": TF.relu,
    "gelu": TF.gelu,
    "gelu_tanh": lambda z: TF.gelu(z, approximate="tanh"),
    "silu": TF.silu,
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
}


def run_python(code, **env_vars):
    """Runs `code` in a fresh Python with this one's path and `env_vars` set; asserts that it
    printed OK and returns its stderr."""
    import subprocess
    import sys

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), **env_vars)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       timeout=300)
    assert r.returncode == 0 and "OK" in r.stdout, r.stderr[-3000:]
    return r.stderr


def run_without_plans(code, log=False):
    """Runs `code` in a fresh Python with no engine plan for any graph
    (DNNGRAPH_TORCH_FORCE_FALLBACK: the ATen paths a GPU takes where cuDNN has no engine, on the
    CPU), fallbacks warned rather than raised, info logging with `log`; asserts that it printed OK
    and returns its stderr."""
    return run_python(code, DNNGRAPH_TORCH_FORCE_FALLBACK="1", DNNGRAPH_TORCH_FALLBACK="warn",
                      **({"DNNGRAPH_LOG": "info"} if log else {}))


def run_without_fused_plans(k, *files):
    """Runs the tests of `files` (names in this folder) selected by the -k expression `k` in a
    pytest process where every graph of more than one op is refused
    (DNNGRAPH_TORCH_MAX_FUSED_NODES=1), as an engine without a fused plan for them would, with
    info logging on. Asserts that they passed (under conftest.py's "error" fallback policy, so
    no op fell back to ATen) and returns their output (stdout + stderr)."""
    import subprocess
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, DNNGRAPH_TORCH_MAX_FUSED_NODES="1", DNNGRAPH_LOG="info",
               PYTHONPATH=os.pathsep.join(sys.path))
    env.pop("DNNGRAPH_TEST_REPORT", None)
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "-k", k,
         *(os.path.join(here, f) for f in files)],
        capture_output=True, text=True, env=env, timeout=900)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-4000:]
    assert " passed" in r.stdout and " failed" not in r.stdout, out[-2000:]
    return out


class GeluMlp(torch.nn.Module):
    """x + fc2(gelu_tanh(fc1(layer_norm(x)))): a transformer MLP of stock modules, the compile
    backend tests' small model with a GEMM epilogue, a norm and a residual add."""

    def __init__(self, d=16, ff=32):
        super().__init__()
        nn = torch.nn
        self.ln, self.fc1, self.fc2 = nn.LayerNorm(d), nn.Linear(d, ff), nn.Linear(ff, d)

    def forward(self, x):
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln(x)), approximate="tanh"))


@pytest.fixture
def fresh_dynamo():
    """torch.compile's caches reset around the test (compile backend tests: each test's graphs
    compiled afresh). Use: import it and ``pytestmark = pytest.mark.usefixtures("fresh_dynamo")``."""
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()
