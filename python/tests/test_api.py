"""Module surface, tensors, pipeline methods, variant packs, errors, serialization."""

import json
import os
import re

import numpy as np
import pytest

import dnngraph as cudnn
from conftest import (DLPackArray, InterfaceArray, assert_close, build, poisoned, tensor_of,
                      workspace_for)


def small_graph(handle, rng, name="g", uids=False):
    """Y = relu(A @ B) with numpy inputs; returns (graph, tensors, arrays, reference)."""
    a = rng.standard_normal((1, 3, 4)).astype(np.float32)
    b = rng.standard_normal((1, 4, 2)).astype(np.float32)
    g = cudnn.pygraph(handle=handle, name=name, io_data_type=cudnn.data_type.FLOAT)
    A, B = tensor_of(g, a, "A"), tensor_of(g, b, "B")
    Y = g.relu(input=g.matmul(A=A, B=B), name="act")
    Y.set_output(True)
    if uids:
        A.set_uid(1)
        B.set_uid(2)
        Y.set_uid(3)
    ref = np.maximum(np.matmul(a.astype(np.float64), b), 0)
    return g, (A, B, Y), (a, b), ref


def built_small_graph(handle, rng):
    """small_graph() built, with a workspace for it."""
    g, tensors, arrays, ref = small_graph(handle, rng)
    build(g)
    return g, tensors, arrays, ref, workspace_for(g)


# ---------------------------------------------------------------- module surface

def test_enums_and_versions():
    for n in ("HALF BFLOAT16 FLOAT DOUBLE INT8 UINT8 INT32 INT64 BOOLEAN FP8_E4M3 FP8_E5M2 "
              "NOT_SET").split():
        assert hasattr(cudnn.data_type, n)
    assert {m.name for m in cudnn.heur_mode} == {"A", "B", "FALLBACK"}
    assert {m.name for m in cudnn.build_plan_policy} == {"HEURISTICS_CHOICE", "ALL"}
    assert {m.name for m in cudnn.diagonal_alignment} == {"TOP_LEFT", "BOTTOM_RIGHT"}
    assert cudnn.reduction_mode.AMAX.name == "AMAX"
    assert cudnn.pointwise_mode.GELU.name == "GELU"
    assert cudnn.norm_forward_phase.TRAINING != cudnn.norm_forward_phase.INFERENCE
    assert isinstance(cudnn.backend_version(), int) and cudnn.backend_version() >= 0
    assert isinstance(cudnn.backend_version_string(), str)
    assert re.match(r"\d+\.\d+\.\d+", cudnn.__version__)
    assert cudnn.Graph is cudnn.wrapper.Graph  # the frontend's wrapper class, not pygraph
    assert issubclass(cudnn.NotSupportedError, RuntimeError)


def test_handles_and_streams(handle):
    assert handle.device == "cpu"
    h = cudnn.create_handle(device="cpu")
    assert cudnn.get_stream(h) == 0
    cudnn.set_stream(handle=h, stream=1234)
    assert cudnn.get_stream(handle=h) == 1234
    cudnn.destroy_handle(h)
    with pytest.raises(ValueError, match="destroyed"):
        cudnn.get_stream(h)
    with pytest.raises(ValueError, match="unknown device 'tpu'"):
        cudnn.create_handle(device="tpu")


def _gpu_present():
    try:
        import torch
    except ImportError:
        return os.path.exists("/dev/nvidia0")
    return torch.cuda.is_available()


@pytest.mark.skipif(_gpu_present(), reason="a CUDA GPU is present: the default handle is made")
def test_default_handle_without_gpu_raises_runtime_error():
    with pytest.raises(RuntimeError) as e:
        cudnn.create_handle()
    # No GPU (or no CUDA in this build): "no engine/device can do this", with the reason.
    assert isinstance(e.value, cudnn.NotSupportedError)
    assert "cuda" in str(e.value).lower()
    # A graph without a handle falls back to the default one and says how to use the CPU.
    g = cudnn.pygraph()
    g.tensor(name="x", dim=[2], data_type=cudnn.data_type.FLOAT)
    with pytest.raises(RuntimeError, match='device="cpu"'):
        g.build_operation_graph()


def exp_with_cache(handle, rng, kc, shape, before_build=lambda: None):
    """exp(X) in a dynamic-shape graph given the cache kc; before_build() runs between the
    graph's making and its build. Checks Y against numpy."""
    g = cudnn.pygraph(handle=handle, kernel_cache=kc, is_dynamic_shape_enabled=True,
                      io_data_type=cudnn.data_type.FLOAT)
    x = rng.standard_normal(shape).astype(np.float32)
    X = tensor_of(g, x, "X")
    Y = g.exp(input=X)
    Y.set_output(True)
    before_build()
    build(g)
    y = poisoned(shape)
    g.execute({X: x, Y: y}, None)
    assert_close(y, np.exp(x.astype(np.float64)))


def test_kernel_cache_is_accepted(handle, rng):
    kc = cudnn.create_kernel_cache()
    exp_with_cache(handle, rng, kc, (2, 3))
    # The reference engine compiles nothing: the cache stays unused and has nothing to give.
    assert not kc.in_use
    with pytest.raises(ValueError, match="dynamic shapes"):
        kc.serialize()


def test_kernel_cache_bytes_and_files(tmp_path):
    # Bytes that are not a saved cache, or damaged ones, are refused up front (cuDNN itself
    # accepts garbage as a kernel cache).
    with pytest.raises(ValueError, match="header"):
        cudnn.KernelCache.from_bytes(b'{"kernels": []}')
    with pytest.raises(ValueError, match="cannot open"):
        cudnn.KernelCache.load(str(tmp_path / "missing.bin"))
    bad = tmp_path / "bad.bin"
    bad.write_bytes(b"not a kernel cache")
    with pytest.raises(ValueError, match="bad.bin"):
        cudnn.KernelCache.load(str(bad))


def test_kernel_cache_deserialize_in_place(handle, rng):
    # The frontend's form: a fresh cache filled in place. A str is cuDNN's own JSON (what the
    # cuDNN frontend's serialize() returns); serialize() gives it back wrapped in checked bytes,
    # which another fresh cache (or from_bytes) takes as they are.
    json_text = '{"kernels": [{"id": 7}]}'
    kc = cudnn.create_kernel_cache()
    assert kc.deserialize(json_text) is None
    data = kc.serialize()
    assert isinstance(data, bytes) and data.endswith(json_text.encode())
    assert not kc.in_use
    other = cudnn.create_kernel_cache()
    other.deserialize(data)
    assert other.serialize() == data
    assert cudnn.KernelCache.from_bytes(data).serialize() == data

    # A graph given the cache before it is filled builds and runs with it; the reference engine
    # compiles nothing, so the kernels stay as loaded, for a GPU engine.
    held = cudnn.create_kernel_cache()
    exp_with_cache(handle, rng, held, (3, 4), lambda: held.deserialize(data))
    assert not held.in_use and held.serialize() == data


def test_kernel_cache_deserialize_refusals():
    kc = cudnn.create_kernel_cache()
    with pytest.raises(ValueError, match="header"):
        kc.deserialize(b"not a kernel cache")
    with pytest.raises(ValueError, match="not JSON"):
        kc.deserialize("not a kernel cache")
    with pytest.raises(ValueError, match="not JSON"):
        kc.deserialize("")
    with pytest.raises(TypeError, match="deserialize\\(\\): incompatible function arguments"):
        kc.deserialize(42)
    # The refusals left it empty; a first load is taken, a second one refused.
    with pytest.raises(ValueError, match="dynamic shapes"):
        kc.serialize()
    kc.deserialize("[]")
    data = kc.serialize()
    with pytest.raises(ValueError, match="already holds kernels of engine 'cudnn'"):
        kc.deserialize(data)
    with pytest.raises(ValueError, match="already holds"):
        cudnn.KernelCache.from_bytes(data).deserialize("[]")
    with pytest.raises(ValueError, match="truncated"):
        cudnn.create_kernel_cache().deserialize(data[:-1])
    assert kc.serialize() == data


# ---------------------------------------------------------------- tensors

def test_tensor_methods(handle):
    g = cudnn.pygraph(handle=handle)
    t = g.tensor(name="T", dim=[2, 3, 4], data_type=cudnn.data_type.HALF)
    assert t.get_stride() == [12, 4, 1]  # packed row-major by default
    assert t.get_dim() == [2, 3, 4] and t.get_name() == "T"
    assert t.get_data_type() == cudnn.data_type.HALF
    same = t.set_dim([2, 3, 5]).set_stride([15, 5, 1]).set_data_type(cudnn.data_type.FLOAT)
    assert same is t
    assert t.set_uid(7).set_name("U").set_is_virtual(False).set_output(True) is t
    assert (t.get_uid(), t.get_name(), t.get_dim(), t.get_stride()) == (7, "U", [2, 3, 5],
                                                                          [15, 5, 1])
    assert "'U'" in repr(t) and "uid=7" in repr(t)
    d = {t: 1}
    assert d[t] == 1 and hash(t) == hash(t)
    assert t.get_is_output() and not t.get_is_virtual()
    assert t.set_is_pass_by_value(True).get_is_pass_by_value()
    u = g.tensor(name="V", dim=[1], uid=9, is_pass_by_value=True, is_virtual=False)
    assert u.get_uid() == 9 and u.get_is_pass_by_value()
    v = g.exp(input=u)
    assert v.get_is_virtual() and not v.get_is_output()
    assert g.handle.device == "cpu"


def test_tensor_like_numpy(handle):
    g = cudnn.pygraph(handle=handle)
    a = np.zeros((2, 3, 4), dtype=np.float16).transpose(0, 2, 1)
    t = g.tensor_like(a, name="a")
    assert t.get_dim() == [2, 4, 3]
    assert t.get_stride() == [12, 1, 4]
    assert t.get_data_type() == cudnn.data_type.HALF
    assert g.tensor_like(np.zeros(5, dtype=np.int64)).get_data_type() == cudnn.data_type.INT64
    with pytest.raises(TypeError, match="cannot read the layout"):
        g.tensor_like(object())


def test_tensor_like_torch(handle):
    torch = pytest.importorskip("torch")
    g = cudnn.pygraph(handle=handle)
    x = torch.zeros(2, 3, 4, 5, dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    t = g.tensor_like(x)
    assert t.get_dim() == [2, 3, 4, 5]
    assert t.get_stride() == list(x.stride())
    assert t.get_data_type() == cudnn.data_type.BFLOAT16


def test_execute_with_torch_cpu_tensors(handle):
    torch = pytest.importorskip("torch")
    gen = torch.Generator().manual_seed(11)
    a, b = torch.randn(1, 3, 4, generator=gen), torch.randn(1, 4, 2, generator=gen)
    y = torch.full((1, 3, 2), float("nan"))
    g = cudnn.pygraph(handle=handle, io_data_type=cudnn.data_type.FLOAT)
    A, B = g.tensor_like(a, "A"), g.tensor_like(b, "B")
    S = g.tensor_like(torch.ones(1, 1, 1), "s").set_is_pass_by_value(True)
    Y = g.scale(input=g.matmul(A=A, B=B), scale=S)
    Y.set_output(True)
    build(g)
    ws = torch.empty(max(g.get_workspace_size(), 1), dtype=torch.uint8)
    g.execute({A: a, B: b, Y: y, S: torch.full((1, 1, 1), 2.0)}, ws)
    # Against the float64 product: the reference engine accumulates in float64 and rounds once,
    # while torch's float32 matmul rounds on the way, which on an element that cancels to near
    # zero differed by more than 1e-5 relative (seen once in CI).
    assert torch.allclose(y.double(), 2 * (a.double() @ b.double()), rtol=1e-5)


# ---------------------------------------------------------------- pipeline

def test_pipeline_methods_and_repr(handle, rng):
    g, (A, B, Y), (a, b), ref = small_graph(handle, rng, name="pipe")
    g.build(heur_modes=[cudnn.heur_mode.A], policy=cudnn.build_plan_policy.HEURISTICS_CHOICE)
    assert g.get_execution_plan_count() >= 1
    assert g.get_workspace_size() >= 0
    assert g.name == "pipe"
    key = g.key()  # an int, as the frontend's key()
    assert isinstance(key, int) and 0 <= key < 2**128 and key == g.key()
    text = repr(g)
    assert "act" in text and "A" in text
    assert '"act"' in g.to_json() or "act" in g.to_json()

    cands = g.candidates()
    assert cands and cands[0]["engine"] == "reference"
    y = poisoned((1, 3, 2))
    g.execute({A: a, B: b, Y: y}, workspace_for(g), handle=handle)
    assert_close(y, ref)


def test_op_names_in_the_order_added(handle, rng):
    g, _, _, _ = small_graph(handle, rng)
    names = g.op_names()
    assert len(names) == 2 and names[1] == "act" and names[0] != "act"
    assert names == [n["name"] for n in json.loads(g.to_json())["nodes"]]


def test_policy_all_and_execute_plan_at_index(handle, rng):
    g, (A, B, Y), (a, b), ref = small_graph(handle, rng)
    g.validate()
    g.build_operation_graph()
    g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.B, cudnn.heur_mode.FALLBACK])
    g.check_support()
    g.build_plans(cudnn.build_plan_policy.ALL)
    n = g.get_execution_plan_count()
    assert n >= 1
    assert 0 <= g.selected_plan_index() < n
    g.select_plan(n - 1)
    assert g.selected_plan_index() == n - 1
    y = poisoned((1, 3, 2))
    g.execute({A: a, B: b, Y: y}, np.empty(max(g.get_workspace_size(), 1), np.uint8))
    assert_close(y, ref)
    for i in range(n):
        g.build_plan_at_index(i)
        ws = np.empty(max(g.get_workspace_size_plan_at_index(i), 1), dtype=np.uint8)
        y = poisoned((1, 3, 2))
        g.execute_plan_at_index({A: a, B: b, Y: y}, ws, i)
        assert_close(y, ref)
    with pytest.raises(ValueError, match="plan"):
        g.execute_plan_at_index({A: a, B: b, Y: poisoned((1, 3, 2))}, None, n + 5)


def test_pack_keyed_by_uid(handle, rng):
    g, (A, B, Y), (a, b), ref = small_graph(handle, rng, uids=True)
    build(g)
    y = poisoned((1, 3, 2))
    g.execute({1: a, 2: b, 3: y}, workspace_for(g))
    assert_close(y, ref)
    y2 = poisoned((1, 3, 2))
    g.execute({A: a, 2: b, Y.get_uid(): y2}, workspace_for(g))  # mixed keys
    assert_close(y2, ref)


def test_serialize_round_trip(handle, rng):
    g, (A, B, Y), (a, b), ref = small_graph(handle, rng, name="ser", uids=True)
    build(g)
    blob = g.serialize()
    assert isinstance(blob, bytes) and len(blob) > 0
    for load in (lambda g2: g2.deserialize(handle, blob),
                 lambda g2: g2.deserialize(blob)):
        g2 = cudnn.pygraph(handle=handle)
        load(g2)
        assert g2.key() == g.key()
        y = poisoned((1, 3, 2))
        ws = np.empty(max(g2.get_workspace_size(), 1), dtype=np.uint8)
        g2.execute({1: a, 2: b, 3: y}, ws, handle=handle)
        assert_close(y, ref)
    with pytest.raises(ValueError, match="not a dnngraph built graph"):
        cudnn.pygraph(handle=handle).deserialize(handle, b"not a graph")


# ---------------------------------------------------------------- errors

def test_invalid_graph_raises_value_error_naming_tensor(handle):
    g = cudnn.pygraph(handle=handle, io_data_type=cudnn.data_type.FLOAT)
    A = g.tensor(name="lhs", dim=[1, 3, 4])
    B = g.tensor(name="rhs", dim=[1, 5, 2])
    g.matmul(A=A, B=B, name="mm").set_output(True)
    with pytest.raises(ValueError) as e:
        g.validate()
    assert "mm" in str(e.value) and ("lhs" in str(e.value) or "rhs" in str(e.value))


def test_bad_packs(handle, rng):
    g, (A, B, Y), (a, b), ref, ws = built_small_graph(handle, rng)
    y = poisoned((1, 3, 2))
    with pytest.raises(ValueError, match="'B'.*missing"):
        g.execute({A: a, Y: y}, ws)
    with pytest.raises(ValueError, match="'A'.*8-byte"):
        g.execute({A: a.astype(np.float64), B: b, Y: y}, ws)
    with pytest.raises(ValueError, match="'B'.*shape"):
        g.execute({A: a, B: b[:, :2], Y: y}, ws)
    ro = poisoned((1, 3, 2))
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="'act"):
        g.execute({A: a, B: b, Y: ro}, ws)
    with pytest.raises(ValueError, match="not pass-by-value"):
        g.execute({A: 1.0, B: b, Y: y}, ws)
    with pytest.raises(ValueError, match="uid 999"):
        g.execute({A: a, B: b, Y: y, 999: a}, ws)
    with pytest.raises(KeyError, match="no tensor named 'nope'"):
        g.execute({"nope": a, B: b, Y: y}, ws)
    with pytest.raises(ValueError, match="'A'.*got a object|'A'"):
        g.execute({A: object(), B: b, Y: y}, ws)
    assert np.isnan(y).all()  # nothing was written by the failed calls


def test_execute_before_build(handle, rng):
    # As the frontend's: execute() builds a graph that has no plan yet.
    g, (A, B, Y), (a, b), ref = small_graph(handle, rng)
    y = poisoned((1, 3, 2))
    g.execute({A: a, B: b, Y: y}, None)
    assert g.get_execution_plan_count() >= 1
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)


def test_workspace_too_small(handle, rng):
    # A graph with a virtual intermediate on the reference engine needs workspace.
    g, (A, B, Y), (a, b), ref = small_graph(handle, rng)
    build(g)
    need = g.get_workspace_size()
    if need == 0:
        pytest.skip("the reference plan needs no workspace here")
    with pytest.raises(ValueError, match="workspace"):
        g.execute({A: a, B: b, Y: poisoned((1, 3, 2))}, np.empty(need - 1, np.uint8))
    y = poisoned((1, 3, 2))
    g.execute({A: a, B: b, Y: y}, None)  # None: the graph allocates its own workspace
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- array objects in packs

class DataPtrArray:
    """Looks like a CPU torch tensor to execute(): data_ptr(), is_cuda, itemsize, nbytes."""

    def __init__(self, a, is_cuda=False):
        self.a, self.is_cuda = a, is_cuda
        self.itemsize, self.nbytes = a.itemsize, a.nbytes

    def data_ptr(self):
        return self.a.ctypes.data


def test_pack_values_through_every_protocol(handle, rng):
    g, (A, B, Y), (a, b), ref, ws = built_small_graph(handle, rng)
    for wrap in (DataPtrArray, InterfaceArray, DLPackArray):
        y = poisoned((1, 3, 2))
        g.execute({A: wrap(a), B: wrap(b), Y: wrap(y)}, wrap(ws))
        assert_close(y, ref)
    # memoryview / bytearray workspaces go through the buffer protocol.
    y = poisoned((1, 3, 2))
    g.execute({A: a, B: b, Y: y}, bytearray(max(g.get_workspace_size(), 1)))
    assert_close(y, ref)


def test_pack_protocol_checks(handle, rng):
    g, (A, B, Y), (a, b), ref, ws = built_small_graph(handle, rng)
    y = poisoned((1, 3, 2))
    with pytest.raises(ValueError, match="'A'.*CUDA device"):
        g.execute({A: InterfaceArray(a, cuda=True), B: b, Y: y}, ws)
    with pytest.raises(ValueError, match="'A'.*CUDA device"):
        g.execute({A: DataPtrArray(a, is_cuda=True), B: b, Y: y}, ws)
    with pytest.raises(ValueError, match="'B'.*8-byte"):
        g.execute({A: a, B: DataPtrArray(b.astype(np.float64)), Y: y}, ws)
    with pytest.raises(ValueError, match="'B'.*shape"):
        g.execute({A: a, B: InterfaceArray(b[:, :1]), Y: y}, ws)
    if g.get_workspace_size() > 0:
        with pytest.raises(ValueError, match="workspace"):
            g.execute({A: a, B: b, Y: y}, DataPtrArray(ws[:g.get_workspace_size() - 1]))
    with pytest.raises(ValueError, match="negative strides"):
        g.execute({A: a[:, ::-1], B: b, Y: y}, ws)
    assert np.isnan(y).all()


def test_pass_by_value_scalars(handle, rng):
    # A pass-by-value tensor fed with a Python float, a numpy scalar array and a graph constant.
    x = rng.standard_normal((2, 4)).astype(np.float32)
    g = cudnn.pygraph(handle=handle, io_data_type=cudnn.data_type.FLOAT)
    X = tensor_of(g, x, "X")
    S = g.tensor(name="s", dim=[1, 1], data_type=cudnn.data_type.FLOAT, is_pass_by_value=True)
    Y = g.add(a=g.mul(a=X, b=S), b=0.25)  # 0.25 becomes a constant of the graph
    Y.set_output(True)
    build(g)
    for s, val in ((3.0, 3.0), (np.full((1, 1), -2.0, np.float32), -2.0), (2, 2.0)):
        y = poisoned((2, 4))
        g.execute({X: x, S: s, Y: y}, workspace_for(g))
        assert_close(y, x.astype(np.float64) * val + 0.25)
    with pytest.raises(ValueError, match="'s'.*8-byte"):
        g.execute({X: x, S: np.full((1, 1), 1.0), Y: poisoned((2, 4))}, workspace_for(g))


def test_torch_bf16_matmul_and_device_checks(handle):
    torch = pytest.importorskip("torch")
    torch.manual_seed(3)
    a = torch.randn(2, 4, 8, dtype=torch.bfloat16)
    b = torch.randn(2, 8, 3, dtype=torch.bfloat16)
    y = torch.full((2, 4, 3), float("nan"), dtype=torch.bfloat16)
    g = cudnn.pygraph(handle=handle, io_data_type=cudnn.data_type.BFLOAT16)
    A, B = g.tensor_like(a, "A"), g.tensor_like(b, "B")
    Y = g.matmul(A=A, B=B)
    Y.set_output(True)
    build(g)
    ws = torch.empty(max(g.get_workspace_size(), 1), dtype=torch.uint8)
    g.execute({A: a, B: b, Y: y}, ws)
    ref = a.double() @ b.double()
    assert torch.allclose(y.double(), ref, rtol=1e-2, atol=1e-2 * ref.abs().max().item())
    with pytest.raises(ValueError, match="'A'.*4-byte"):
        g.execute({A: a.float(), B: b, Y: y}, ws)
    if g.get_workspace_size() > 0:
        with pytest.raises(ValueError, match="workspace"):
            g.execute({A: a, B: b, Y: y}, ws[:g.get_workspace_size() - 1])
    if torch.cuda.is_available():
        with pytest.raises(ValueError, match="'A'.*CUDA device"):
            g.execute({A: a.cuda(), B: b, Y: y}, ws)


class RaisingDataPtr(DataPtrArray):
    def data_ptr(self):
        raise RuntimeError("storage is gone")


def test_data_ptr_errors_are_not_swallowed(handle, rng):
    g, (A, B, Y), (a, b), ref = small_graph(handle, rng)
    build(g)
    with pytest.raises(RuntimeError, match="storage is gone"):
        g.execute({A: RaisingDataPtr(a), B: b, Y: poisoned((1, 3, 2))}, workspace_for(g))


def test_pack_reused_across_calls_with_other_keys(handle, rng):
    # The binding reuses its C++ pack between calls: a later call with other keys (uids instead
    # of tensors, a missing entry, then a full pack again) must see exactly its own entries.
    g, (A, B, Y), (a, b), ref, ws = built_small_graph(handle, rng)
    y = poisoned((1, 3, 2))
    g.execute({A: a, B: b, Y: y}, ws)
    assert_close(y, ref)
    with pytest.raises(ValueError, match="'B'"):
        g.execute({A: a, Y: poisoned((1, 3, 2))}, ws)
    a2, b2 = rng.standard_normal(a.shape).astype(a.dtype), rng.standard_normal(b.shape).astype(b.dtype)
    y2 = poisoned((1, 3, 2))
    g.execute({B.get_uid(): b2, A.get_uid(): a2, Y.get_uid(): y2}, ws)
    assert_close(y2, np.maximum(np.matmul(a2.astype(np.float64), b2), 0))
    y3 = poisoned((1, 3, 2))
    g.execute({A: a, B: b, Y: y3}, ws)
    assert_close(y3, ref)


def test_time_execute_runs_the_plan(handle, rng):
    g, (A, B, Y), (a, b), ref = small_graph(handle, rng)
    build(g)
    y = poisoned((1, 3, 2))
    us = g._time_execute({A: a, B: b, Y: y}, workspace_for(g), 3)
    assert us > 0.0
    assert_close(y, ref)
    with pytest.raises(ValueError, match="calls"):
        g._time_execute({A: a, B: b, Y: y}, workspace_for(g), 0)


def test_cuda_handle_refuses_host_tensors_and_workspace():
    # On a CUDA handle the binding leaves the device check of device buffers to the cuDNN plan
    # (it runs whenever a pointer changes): a host tensor or workspace must still be refused,
    # naming it, with nothing launched.
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    h = cudnn.create_handle()
    torch.manual_seed(12)
    a = torch.randn(1, 16, 32, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(1, 32, 8, device="cuda", dtype=torch.bfloat16)
    y = torch.full((1, 16, 8), float("nan"), device="cuda", dtype=torch.bfloat16)
    g = cudnn.pygraph(handle=h, io_data_type=cudnn.data_type.BFLOAT16,
                      compute_data_type=cudnn.data_type.FLOAT)
    A, B = g.tensor_like(a, "A"), g.tensor_like(b, "B")
    Y = g.matmul(A=A, B=B)
    Y.set_output(True).set_data_type(cudnn.data_type.BFLOAT16)
    g.build()
    ws = torch.empty(max(g.get_workspace_size(), 256), device="cuda", dtype=torch.uint8)
    with pytest.raises(ValueError, match="'A'.*host memory"):
        g.execute({A: a.cpu(), B: b, Y: y}, ws)
    torch.cuda.synchronize()
    assert torch.isnan(y.float()).all()
    with pytest.raises(ValueError, match="workspace.*host memory"):
        g.execute({A: a, B: b, Y: y}, ws.cpu())
    torch.cuda.synchronize()
    assert torch.isnan(y.float()).all()
    g.execute({A: a, B: b, Y: y}, ws)
    torch.cuda.synchronize()
    ref = a.double() @ b.double()
    assert torch.allclose(y.double(), ref, rtol=1e-2, atol=1e-2 * ref.abs().max().item())


def test_data_ptr_class_changes_are_seen(handle, rng):
    # The binding caches, per class, how data_ptr() objects are read; a class modified after
    # the first call must be read anew (here: its itemsize and is_cuda change).
    class Wrapped:
        def __init__(self, a):
            self.a = a

        def data_ptr(self):
            return self.a.ctypes.data

        is_cuda = property(lambda self: False)
        itemsize = property(lambda self: self.a.itemsize)
        nbytes = property(lambda self: self.a.nbytes)

    g, (A, B, Y), (a, b), ref, ws = built_small_graph(handle, rng)
    y = poisoned((1, 3, 2))
    pack = {A: Wrapped(a), B: Wrapped(b), Y: Wrapped(y)}
    g.execute(pack, Wrapped(ws))
    assert_close(y, ref)
    Wrapped.itemsize = property(lambda self: 8)
    with pytest.raises(ValueError, match="8-byte"):
        g.execute(pack, Wrapped(ws))
    Wrapped.itemsize = property(lambda self: self.a.itemsize)
    Wrapped.is_cuda = property(lambda self: True)
    with pytest.raises(ValueError, match="CUDA device"):
        g.execute(pack, Wrapped(ws))


def test_one_version_everywhere():
    """The version the library reports is the one CMake, pyproject.toml and the newest
    CHANGELOG section give."""
    root = os.path.join(os.path.dirname(__file__), "..", "..")

    def find(path, pattern):
        with open(os.path.join(root, path)) as f:
            m = re.search(pattern, f.read(), re.M)
        assert m, f"{path}: no match for {pattern!r}"
        return m.group(1)

    v = cudnn.__version__
    assert find("CMakeLists.txt", r"project\(dnngraph VERSION (\d+\.\d+\.\d+)") == v
    assert find("pyproject.toml", r'^version = "(\d+\.\d+\.\d+)"') == v
    major, minor, _ = v.split(".")
    assert find("CHANGELOG.md", r"^## v(\d+\.\d+)") == f"{major}.{minor}"
