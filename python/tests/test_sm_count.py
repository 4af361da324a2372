"""The SM count target (the frontend's pygraph(sm_count=...)): it reaches the native graph, its
JSON form and key(); validation refuses counts that are not counts; the CPU reference engine
ignores it (results equal to numpy and to the graph without it, on fresh random inputs). The
last test runs only on a GPU: a bf16 matmul with sm_count=8 against torch, and the target as
cuDNN reports it."""

import os

import numpy as np
import pytest

import dnngraph as cudnn
from conftest import build, poisoned, workspace_for


def matmul_relu(handle, a, b, **kw):
    g = cudnn.pygraph(handle=handle, name="mm_relu", io_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT, **kw)
    A, B = g.tensor_like(a, "A"), g.tensor_like(b, "B")
    Y = g.relu(input=g.matmul(A=A, B=B, compute_data_type=cudnn.data_type.FLOAT))
    Y.set_output(True).set_name("Y")
    return g, A, B, Y


def shapes_only(**kw):
    """The same graph without data or handle (dims and strides given)."""
    g = cudnn.pygraph(name="mm_relu", io_data_type=cudnn.data_type.FLOAT, **kw)
    A = g.tensor(name="A", dim=[2, 8, 16], stride=[128, 16, 1])
    B = g.tensor(name="B", dim=[2, 16, 4], stride=[64, 4, 1])
    g.relu(input=g.matmul(A=A, B=B)).set_output(True)
    return g


def test_constructor_keyword_and_position_reach_the_native_graph():
    assert shapes_only().sm_count is None
    assert shapes_only(sm_count=8).sm_count == 8
    assert shapes_only(sm_count=-1).sm_count is None  # the frontend's "unset"
    assert shapes_only(sm_count=np.int64(16)).sm_count == 16
    # The frontend's positional order: name, io, intermediate, compute, handle, sm_count,
    # sm_version.
    g = cudnn.pygraph("pos", None, None, None, None, 24, 90)
    assert (g.sm_count, g.sm_version) == (24, 90)


def test_property_sets_and_unsets():
    g = shapes_only()
    g.sm_count = 32
    assert g.sm_count == 32
    assert g.inspect()["sm_count"] == 32
    g.sm_count = None
    assert g.sm_count is None
    assert "sm_count" not in g.inspect()  # written only when set


def test_key_differs_with_and_without_and_between_values():
    keys = {n: shapes_only(sm_count=n).key() for n in (None, 8, 32)}
    assert len(set(keys.values())) == 3, keys
    assert shapes_only(sm_count=8).key() == keys[8]
    g = shapes_only(sm_count=8)
    g.sm_count = None
    assert g.key() == keys[None]


def test_json_form_round_trips():
    g = shapes_only(sm_count=12)
    doc = g.inspect()
    assert doc["sm_count"] == 12
    assert "sm_count" not in shapes_only().inspect()


@pytest.mark.parametrize("bad", [0, -2, -132])
def test_zero_and_negative_counts_are_refused_at_validate(bad):
    g = shapes_only(sm_count=bad)
    with pytest.raises(ValueError, match=rf"graph 'mm_relu': sm_count {bad} is not a number of SMs"):
        g.validate()
    g.sm_count = 4
    g.validate()


@pytest.mark.parametrize("bad,exc", [("8", TypeError), (8.0, TypeError), (True, TypeError),
                                     (2**31, ValueError), (-2**31 - 1, ValueError)])
def test_values_that_are_not_int32_are_refused_at_construction(bad, exc):
    with pytest.raises(exc, match="sm_count"):
        cudnn.pygraph(sm_count=bad)


def test_cpu_results_do_not_depend_on_the_target(handle):
    seed = int.from_bytes(os.urandom(4), "little")  # fresh inputs each run
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1, 1, (3, 17, 29)).astype(np.float32)
    b = rng.uniform(-1, 1, (3, 29, 11)).astype(np.float32)
    ref = np.maximum(a.astype(np.float64) @ b.astype(np.float64), 0)
    outs = {}
    for n in (None, 1, 8, 100000):  # 100000: more SMs than any GPU; the CPU ignores it
        g, A, B, Y = matmul_relu(handle, a, b, sm_count=n)
        build(g)
        assert all(c["sm_count_target"] == -1 for c in g.candidates())
        y = poisoned((3, 17, 11))
        g.execute({A: a, B: b, Y: y}, workspace_for(g))
        np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max(),
                                   err_msg=f"seed {seed}, sm_count {n}")
        outs[n] = y
    for n in (1, 8, 100000):
        assert np.array_equal(outs[n].view(np.uint32), outs[None].view(np.uint32)), \
            f"seed {seed}: sm_count={n} changed the CPU result"


# ---- GPU (skips without one) ----------------------------------------------------------------

def test_gpu_eight_sms_conv_matches_torch_and_matmul_is_refused_or_matches():
    """On the H200 with cuDNN 9.19 (measured 2026-12-02) a convolution takes an SM target and no
    matmul engine does: the matmul must then be refused saying so, never run wrong."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device visible to torch")
    # A GPU is present: a handle that cannot be made fails the test (it is no reason to skip).
    gpu = cudnn.create_handle(device="cuda")
    torch.manual_seed(15)

    def graph(sm_count):
        return cudnn.pygraph(handle=gpu, io_data_type=cudnn.data_type.BFLOAT16,
                             intermediate_data_type=cudnn.data_type.FLOAT,
                             compute_data_type=cudnn.data_type.FLOAT, sm_count=sm_count)

    x = torch.randn(4, 32, 16, 16, device="cuda").to(torch.bfloat16)
    x = x.to(memory_format=torch.channels_last)
    w = torch.randn(64, 32, 3, 3, device="cuda").to(torch.bfloat16)
    w = w.to(memory_format=torch.channels_last)
    g = graph(8)
    X, W = g.tensor_like(x), g.tensor_like(w)
    Y = g.conv_fprop(image=X, weight=W, padding=[1, 1], stride=[1, 1], dilation=[1, 1])
    Y.set_output(True).set_data_type(cudnn.data_type.BFLOAT16)
    g.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    y = torch.full((4, 64, 16, 16), float("nan"), device="cuda").to(torch.bfloat16)
    y = y.to(memory_format=torch.channels_last)
    ws = torch.empty(max(g.get_workspace_size(), 1), dtype=torch.uint8, device="cuda")
    g.execute({X: x, W: w, Y: y}, ws)
    torch.cuda.synchronize()
    ref = torch.nn.functional.conv2d(x.float(), w.float(), padding=1)
    torch.testing.assert_close(y.float(), ref, rtol=2e-2, atol=2e-2 * ref.abs().max().item())
    reported = [c["sm_count_target"] for c in g.candidates() if c["built"]]
    # -1: this cuDNN does not report an engine's target; anything else must be the target given.
    assert reported and reported[0] in (-1, 8), reported

    a = torch.randn(4, 256, 512, device="cuda").to(torch.bfloat16)
    b = torch.randn(4, 512, 384, device="cuda").to(torch.bfloat16)
    g = graph(8)
    A, B = g.tensor_like(a), g.tensor_like(b)
    C = g.matmul(A=A, B=B, compute_data_type=cudnn.data_type.FLOAT).set_output(True)
    C.set_data_type(cudnn.data_type.BFLOAT16)
    try:
        g.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    except cudnn.NotSupportedError as e:
        assert "at most 8 SMs (sm_count)" in str(e) and "leave sm_count unset" in str(e), str(e)
    else:
        c = torch.full((4, 256, 384), float("nan"), device="cuda").to(torch.bfloat16)
        ws = torch.empty(max(g.get_workspace_size(), 1), dtype=torch.uint8, device="cuda")
        g.execute({A: a, B: b, C: c}, ws)
        torch.cuda.synchronize()
        ref = a.float() @ b.float()
        torch.testing.assert_close(c.float(), ref, rtol=2e-2, atol=2e-2 * ref.abs().max().item())

    too_many = torch.cuda.get_device_properties(0).multi_processor_count + 1
    g2 = graph(too_many)
    X2, W2 = g2.tensor_like(x), g2.tensor_like(w)
    g2.conv_fprop(image=X2, weight=W2, padding=[1, 1], stride=[1, 1],
                  dilation=[1, 1]).set_output(True)
    with pytest.raises(ValueError, match=f"sm_count {too_many}"):
        g2.build([cudnn.heur_mode.A])
