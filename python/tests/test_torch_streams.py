"""dnngraph.torch ops run on the device of their tensors and on that device's current stream:
every op family (forward and backward, and an out= form) under ``torch.cuda.device(1)``, on a
non-default stream of cuda:0 and of cuda:1, on cuda:1's side stream while cuda:0 is the current
device, and (two families) on cuda:1 tensors under ``torch.cuda.device(0)``.

The check is by ordering, not by timing: the expected stream is held closed by a spinning
kernel (``torch.cuda._sleep``), the op's inputs (NaN until then) are written behind it on that
stream and a CUDA event is recorded there; then the op runs and a second event is recorded on
the expected stream. The first event is still pending when the call returns (the op did not
make the host wait for the GPU), and once the second completes the results equal those of the
same op run ungated: an op that ran on any other stream would have read the NaN inputs.
Outputs and gradients are on the inputs' device. Two controls show the check failing: a
layer_norm run on another stream, and one that synchronizes the device.

The single-device cases need CUDA; those on cuda:1 need 2 GPUs. On the CPU, the cases are
checked against torch (the same functions the GPU checks call)."""

import contextlib

import pytest

from torch_util import assert_close, needs_2gpus, needs_cuda, rand, torch

import dnngraph.torch  # noqa: F401
from dnngraph.torch import functional as F

TF = torch.nn.functional
ops = torch.ops.dnngraph
# The gate's length in GPU clock cycles (0.1 s at 2 GHz, longer at lower clocks): much longer
# than enqueuing one case's forward and backward with its graphs already cached. It orders, it
# is not measured.
GATE_CYCLES = 200_000_000


def _swiglu_ref(x, w, b):
    g, u = TF.linear(x, w, b).chunk(2, dim=-1)
    return TF.silu(g) * u


def _rotate_half(x, cos, sin):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


def _rope_tables(dev):
    cos, sin = F.rope_cos_sin(8, 16, device=dev)
    return cos, sin


# name -> (make(dev) -> (inputs, which require grad, dtype), ours(*inputs), torch's(*inputs)).
# Each function returns a tuple of outputs; the gradients of the inputs that require grad are
# taken with random output gradients.
def _make(shapes, dev, grads=None, dtype=torch.float32):
    ts = [rand(*s, dtype=dtype, device=dev) for s in shapes]
    return ts, grads if grads is not None else [True] * len(ts), dtype


CASES = {
    "layer_norm": (
        lambda d: _make([(4, 8, 64), (64,), (64,)], d),
        lambda x, w, b: (F.layer_norm(x, [64], w, b),),
        lambda x, w, b: (TF.layer_norm(x, [64], w, b),),
    ),
    "rms_norm": (
        lambda d: _make([(4, 8, 64), (64,)], d),
        lambda x, w: (F.rms_norm(x, [64], w, 1e-6),),
        lambda x, w: (TF.rms_norm(x, [64], w, 1e-6),),
    ),
    "linear_act": (
        lambda d: _make([(4, 8, 64), (32, 64), (32,)], d),
        lambda x, w, b: (F.linear(x, w, b, "gelu"),),
        lambda x, w, b: (TF.gelu(TF.linear(x, w, b)),),
    ),
    "linear_act.out": (
        lambda d: _make([(4, 8, 64), (32, 64), (32,)], d, grads=[False] * 3),
        lambda x, w, b: (ops.linear_act.out(x, w, b, "relu", out=torch.empty(0, device=x.device)),),
        lambda x, w, b: (TF.relu(TF.linear(x, w, b)),),
    ),
    "matmul_epilogue": (
        lambda d: _make([(2, 8, 64), (2, 64, 16)], d),
        lambda a, b: (F.matmul_epilogue(a, b, None, 0.5, "relu"),),
        lambda a, b: (TF.relu(0.5 * (a @ b)),),
    ),
    "swiglu_linear": (
        lambda d: _make([(4, 8, 64), (32, 64), (32,)], d),
        lambda x, w, b: (F.linear(x, w, b, "swiglu"),),
        _swiglu_ref,
    ),
    "conv2d_bias_act": (
        lambda d: _make([(2, 8, 8, 8), (8, 8, 3, 3), (8,)], d),
        lambda x, w, b: (F.conv2d_bias_act(x, w, b, 1, 1, 1, 1, "relu"),),
        lambda x, w, b: (TF.relu(TF.conv2d(x, w, b, 1, 1)),),
    ),
    "conv2d_bias_add_act": (
        lambda d: _make([(2, 8, 8, 8), (8, 8, 3, 3), (8,), (2, 8, 8, 8)], d),
        lambda x, w, b, r: (F.conv2d_bias_act(x, w, b, 1, 1, 1, 1, "relu", residual=r),),
        lambda x, w, b, r: (TF.relu(TF.conv2d(x, w, b, 1, 1) + r),),
    ),
    "sdpa": (
        lambda d: _make([(1, 2, 16, 64)] * 3, d, dtype=torch.bfloat16),
        lambda q, k, v: (F.scaled_dot_product_attention(q, k, v, is_causal=True),),
        lambda q, k, v: (TF.scaled_dot_product_attention(q, k, v, is_causal=True),),
    ),
    "add_rms_norm": (
        lambda d: _make([(4, 8, 64), (4, 8, 64), (64,)], d),
        lambda x, r, w: F.add_rms_norm(x, r, 64, w, 1e-5),
        lambda x, r, w: (x + r, TF.rms_norm(x + r, [64], w, 1e-5)),
    ),
    "swiglu": (
        lambda d: _make([(4, 8, 64)], d),
        lambda z: (F.swiglu(z),),
        lambda z: (TF.silu(z[..., :32]) * z[..., 32:],),
    ),
    "rope": (
        lambda d: _make([(2, 4, 8, 16), (8, 8), (8, 8)], d, grads=[True, False, False]),
        lambda x, cos, sin: (F.rope(x, cos, sin),),
        _rotate_half,
    ),
}


def _tables(name, inputs):
    """rope's cos/sin are tables, not random numbers."""
    if name == "rope":
        inputs[1], inputs[2] = _rope_tables(inputs[0].device)
    return inputs


def forward_backward(fn, inputs, grads, out_grads=None):
    """fn's outputs, then the gradients of the inputs flagged in grads (output gradients:
    out_grads, or random ones made here). Returns (results, the output gradients used)."""
    outs = fn(*inputs)
    outs = outs if isinstance(outs, tuple) else (outs,)
    leaves = [t for t, g in zip(inputs, grads) if g]
    if not leaves:
        return list(outs), []
    if out_grads is None:
        out_grads = [rand(*o.shape, dtype=o.dtype, device=o.device) for o in outs]
    return list(outs) + list(torch.autograd.grad(outs, leaves, out_grads)), out_grads


def _leaves(tensors, grads):
    return [t.detach().clone().requires_grad_(g) for t, g in zip(tensors, grads)]


def reference(ref, inputs, grads, out_grads):
    """torch's results (ref) in fp32 on the same inputs."""
    wide = [t.detach().float() for t in inputs]
    res, _ = forward_backward(ref, _leaves(wide, grads), grads, [g.float() for g in out_grads])
    return res


def check(name, got, want, dtype, device, what):
    assert len(got) == len(want), f"{name}: {len(got)} results, expected {len(want)}"
    for i, (a, b) in enumerate(zip(got, want)):
        assert a.device == torch.device(device), (
            f"{name} {what}: result {i} on {a.device}, not {device}")
        # Gradients: longer sums. fp32 on a GPU: cuDNN's GEMMs run in TF32 (~1e-2 at the tail of
        # a 64-term sum), against torch's fp32 reference.
        scale = (1 if i == 0 else 4) * (2 if dtype == torch.float32 and device != "cpu" else 1)
        assert_close(a, b.to(a.device), dtype, str(a.device), scale=scale)


@pytest.mark.parametrize("name", sorted(CASES))
def test_cases_match_torch_on_cpu(name):
    """The cases the GPU checks run, on the CPU against torch: the functions and shapes work."""
    make, ours, _ = CASES[name]
    inputs, grads, dtype = make("cpu")
    inputs = _tables(name, inputs)
    got, out_grads = forward_backward(ours, _leaves(inputs, grads), grads)
    check(name, got, reference(CASES[name][2], inputs, grads, out_grads), dtype, "cpu",
          "on the CPU")


# Cases that block for good behind the gate on a GPU (docs/cudnn-engine.md, "Graphs cuDNN gets
# wrong"): the fused convolution backward waits inside cuDNN's runtime-compiled engine.
BLOCKED_BEHIND_A_GATE = {
    "conv2d_bias_act": "the fused convolution backward blocks inside cuDNN (cuKernelGetFunction) "
                       "when queued behind another kernel: a known cuDNN 9.19 hang",
}


def _gated_run(name, device, stream, setting, case=None):
    """The case (CASES[name] unless given) on `device` under `setting` (a context manager
    factory), gated on `stream`."""
    if case is None and name in BLOCKED_BEHIND_A_GATE:
        pytest.skip(BLOCKED_BEHIND_A_GATE[name])
    make, ours, ref = case or CASES[name]
    inputs, grads, dtype = make(device)
    inputs = _tables(name, inputs)
    with setting():  # warm: the graphs built and cached, the expected results
        want, out_grads = forward_backward(ours, _leaves(inputs, grads), grads)
    torch.cuda.synchronize(device)  # those were made on the setting's stream
    # Both runs are checked against torch's results: cuDNN may pick another engine for the
    # gated run's buffers (fp32 GEMMs in TF32 then differ in the last bits).
    expected = reference(ref, inputs, grads, out_grads)
    check(name, want, expected, dtype, device, "ungated")
    torch.cuda.synchronize(device)
    sources = [t.detach() for t in inputs] + [g.detach() for g in out_grads]
    with torch.cuda.device(stream.device), torch.cuda.stream(stream):
        staged = [torch.full_like(t, float("nan")) for t in sources]
        torch.cuda.synchronize(device)  # the poison is in place before the gate closes
        torch.cuda._sleep(GATE_CYCLES)  # the gate
        for s, t in zip(staged, sources):
            s.copy_(t)  # behind the gate
        opened = torch.cuda.Event()
        opened.record(stream)  # completes once the gate has opened and the inputs are written
    n = len(inputs)
    leaves = [t.requires_grad_(g) for t, g in zip(staged[:n], grads)]
    with setting():
        got, _ = forward_backward(ours, leaves, grads, staged[n:] or None)
    still_closed = not opened.query()
    done = torch.cuda.Event()
    done.record(stream)  # after the op's work, if it went to this stream
    done.synchronize()
    assert still_closed, (
        f"{name}: the gate on {stream} had opened when the call returned: the op made the host "
        "wait for the GPU (or enqueuing took longer than the gate)")
    check(name, got, expected, dtype, device, f"on {stream} behind the gate")


def _side_stream(index):
    return torch.cuda.Stream(device=index)


@needs_cuda
@pytest.mark.parametrize("name", sorted(CASES))
def test_side_stream_on_cuda0(name):
    s = _side_stream(0)
    _gated_run(name, "cuda:0", s, lambda: torch.cuda.stream(s))


@needs_2gpus
@pytest.mark.parametrize("name", sorted(CASES))
def test_under_device_1_default_stream(name):
    with torch.cuda.device(0):  # the default stream of cuda:1, reached through the device guard
        _gated_run(name, "cuda:1", torch.cuda.default_stream(1), lambda: torch.cuda.device(1))


@needs_2gpus
@pytest.mark.parametrize("name", sorted(CASES))
def test_side_stream_on_cuda1(name):
    s = _side_stream(1)
    _gated_run(name, "cuda:1", s, lambda: torch.cuda.stream(s))


@contextlib.contextmanager
def _stream_then_device0(s):
    """cuda:1's current stream is s, and the current device is cuda:0."""
    with torch.cuda.stream(s), torch.cuda.device(0):
        assert torch.cuda.current_device() == 0 and torch.cuda.current_stream(1) == s
        yield


@needs_2gpus
@pytest.mark.parametrize("name", sorted(CASES))
def test_cuda1_side_stream_while_cuda0_is_current(name):
    s = _side_stream(1)
    _gated_run(name, "cuda:1", s, lambda: _stream_then_device0(s))


@needs_2gpus
@pytest.mark.parametrize("name", ["layer_norm", "sdpa"])
def test_tensors_on_cuda1_under_device_0(name):
    """The tensors' device wins over the current device: cuda:1's default stream."""
    _gated_run(name, "cuda:1", torch.cuda.default_stream(1), lambda: torch.cuda.device(0))



# Controls: the check fails for work on another stream and for a call that waits for the GPU.
def _layer_norm_on_another_stream(x, w, b):
    with torch.cuda.stream(torch.cuda.Stream(device=x.device)):
        return (TF.layer_norm(x, [64], w, b),)


def _layer_norm_then_a_device_sync(x, w, b):
    y = TF.layer_norm(x, [64], w, b)
    torch.cuda.synchronize(x.device)
    return (y,)


@needs_cuda
@pytest.mark.parametrize("op, error", [
    (_layer_norm_on_another_stream, "Mismatched elements|nan"),
    (_layer_norm_then_a_device_sync, "the op made the host wait"),
], ids=["another_stream", "device_sync"])
def test_the_check_catches_wrong_work(op, error):
    case = (lambda d: _make([(4, 8, 64), (64,), (64,)], d, grads=[False] * 3), op,
            lambda x, w, b: (TF.layer_norm(x, [64], w, b),))
    s = _side_stream(0)
    with pytest.raises(AssertionError, match=error):
        _gated_run("control", "cuda:0", s, lambda: torch.cuda.stream(s), case)
