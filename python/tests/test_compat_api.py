"""The frontend's Python names and call forms (docs/compatibility.md), on the CPU engine."""

import json

import numpy as np
import pytest

import dnngraph as cudnn


def graph(handle, **kw):
    kw.setdefault("io_data_type", cudnn.data_type.FLOAT)
    kw.setdefault("compute_data_type", cudnn.data_type.FLOAT)
    return cudnn.pygraph(handle=handle, **kw)


def test_native_graph_is_the_base_class():
    assert issubclass(cudnn.pygraph, cudnn.NativeGraph) and cudnn.pygraph is not cudnn.NativeGraph
    assert cudnn.Graph is cudnn.wrapper.Graph


def test_exception_names():
    assert cudnn.cudnnGraphNotSupportedError is cudnn.NotSupportedError
    assert issubclass(cudnn.cudnnGraphNotSupportedError, Exception)
    with pytest.raises(cudnn.cudnnGraphNotSupportedError, match="no dnngraph data_type"):
        cudnn.datatypes._library_type("float17")


def test_module_names_exist():
    for name in ("jit", "graph", "graph_cache", "Graph", "datatypes", "experimental",
                 "tensor_reordering", "behavior_note", "numerical_note", "knob_type",
                 "attention_implementation", "create_device_properties", "sdpa_capabilities",
                 "get_last_error_string", "tensor", "Node", "NodeType", "GraphContext"):
        assert hasattr(cudnn, name), name
    assert cudnn.tensor_reordering.NONE.name == "NONE"
    assert cudnn.sdpa_capabilities() == frozenset()
    with pytest.raises(cudnn.NotSupportedError, match="causal_conv1d_forward"):
        cudnn.causal_conv1d_forward()
    import dnngraph.experimental.ops as ops

    assert ops is cudnn.experimental.ops
    with pytest.raises(cudnn.NotSupportedError, match="swiglu_mlp"):
        ops.swiglu_mlp()


def test_numpy_and_torch_dtypes_convert(handle):
    assert cudnn.datatypes._library_type(np.dtype("float16")) == cudnn.data_type.HALF
    assert cudnn.datatypes._library_type(np.float32) == cudnn.data_type.FLOAT
    torch = pytest.importorskip("torch")
    assert cudnn.datatypes.torch_to_cudnn_data_type(torch.bfloat16) == cudnn.data_type.BFLOAT16
    assert cudnn.datatypes._cudnn_to_torch_data_type(cudnn.data_type.HALF) is torch.float16
    g = cudnn.pygraph(handle=handle, io_data_type=torch.float16,
                      compute_data_type=torch.float32)
    t = g.tensor(dim=[2, 3], data_type=torch.bfloat16)
    assert t.get_data_type() == cudnn.data_type.BFLOAT16
    assert t.set_data_type(torch.float32) is t and t.get_data_type() == cudnn.data_type.FLOAT
    assert cudnn.datatypes.torch_to_cudnn_data_type(torch.complex64) is None


def test_tensor_like_copy_form_and_host_scalars(handle):
    g = graph(handle)
    a = np.zeros((2, 3, 4), np.float32)[:, :, ::2]
    A = g.tensor_like(a, name="A")
    B = g.tensor_like(A, name="B")  # the copy form
    assert (B.get_dim(), B.get_stride(), B.get_data_type()) == (
        A.get_dim(), A.get_stride(), A.get_data_type())
    assert not A.get_is_pass_by_value()  # a host array on a CPU handle is ordinary data
    s = g.tensor_like(np.array(2.0, np.float32))  # a single host value: pass-by-value
    assert s.get_is_pass_by_value() and s.get_dim() == [1]


def test_frontend_keywords_and_leaky_relu_backward(handle, rng):
    x = rng.standard_normal((2, 5)).astype(np.float32)
    dy = rng.standard_normal((2, 5)).astype(np.float32)
    g = graph(handle)
    X, DY = g.tensor_like(x), g.tensor_like(dy)
    mask = g.cmp_lt(input=X, comparison=0.5)
    mx = g.max(input0=X, input1=DY)
    dx = g.leaky_relu_backward(DY, X, 0.3)
    Y = g.binary_select(input0=mx, input1=dx, mask=mask)
    Y.set_output(True)
    g.build()  # no arguments: the whole pipeline
    y = np.full((2, 5), np.nan, np.float32)
    g.execute({X: x, DY: dy, Y: y})  # workspace=None: the graph allocates one
    dx_ref = np.where(x > 0, dy, 0.3 * dy)
    np.testing.assert_allclose(y, np.where(x < 0.5, np.maximum(x, dy), dx_ref), rtol=1e-6)


def test_positional_frontend_order_for_norms(handle, rng):
    x = rng.standard_normal((4, 8, 1, 1)).astype(np.float32)
    s = rng.standard_normal((1, 8, 1, 1)).astype(np.float32)
    g = graph(handle)
    X, S = g.tensor_like(x), g.tensor_like(s)
    # The frontend's positional order (input, scale, bias, epsilon), phase by keyword.
    Y, inv = g.rmsnorm(X, S, None, 1e-5, norm_forward_phase=cudnn.norm_forward_phase.INFERENCE)
    assert inv is None
    Y.set_output(True)
    y = np.full(x.shape, np.nan, np.float32)
    g.execute({X: x, S: s, Y: y})
    ref = x / np.sqrt((x.astype(np.float64) ** 2).mean(axis=1, keepdims=True) + 1e-5) * s
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-6)


def test_sdpa_backward_dbias_forms(handle, rng):
    # The frontend's form: dBias= a tensor the caller made; the call returns three gradients.
    g = graph(handle)
    q = rng.standard_normal((1, 2, 4, 8)).astype(np.float32)
    Q, K, V, O, dO = (g.tensor_like(q) for _ in range(5))
    ST = g.tensor(dim=[1, 2, 4, 1], stride=[8, 4, 1, 1], data_type=cudnn.data_type.FLOAT)
    B = g.tensor(name="B", dim=[1, 2, 4, 4], stride=[32, 16, 4, 1])
    dB = g.tensor(name="dB", dim=[1, 2, 4, 4], stride=[32, 16, 4, 1])
    out = g.sdpa_backward(Q, K, V, O, dO, ST, bias=B, dBias=dB)
    assert len(out) == 3
    dB.set_output(True)
    for t in out:
        t.set_output(True)
    g.validate()
    desc = json.loads(g.to_json())
    (node,) = desc["nodes"]
    dbias = node["outputs"]["DBIAS"]
    assert (desc["tensors"][dbias]["name"] if isinstance(dbias, int) else dbias) == "dB"
    # Without dBias the frontend computes no bias gradient: three outputs, no DBIAS port.
    g2 = graph(handle)
    Q, K, V, O, dO = (g2.tensor_like(q) for _ in range(5))
    ST = g2.tensor(dim=[1, 2, 4, 1], stride=[8, 4, 1, 1], data_type=cudnn.data_type.FLOAT)
    B = g2.tensor(name="B", dim=[1, 2, 4, 4], stride=[32, 16, 4, 1])
    assert len(g2.sdpa_backward(Q, K, V, O, dO, ST, bias=B)) == 3
    assert "DBIAS" not in g2.to_json()
    with pytest.raises(TypeError, match="dBias"):
        g2.sdpa(Q, K, V, dBias=B)


def test_lacking_ops_raise_not_supported(handle):
    g = graph(handle)
    X = g.tensor(dim=[2, 3])
    for op in ("rope", "mamba2",
               "sdpa_mxfp8"):
        with pytest.raises(cudnn.cudnnGraphNotSupportedError, match=op):
            getattr(g, op)(X)
    with pytest.raises(cudnn.NotSupportedError, match="matmul\\(padding"):
        g.matmul(X, X, padding=1.0)
    with pytest.raises(ValueError, match="contradict"):
        g.sdpa(X, X, X, generate_stats=True, is_inference=True)


def test_execute_forms_serialize_and_key(handle, rng):
    a = rng.standard_normal((1, 3, 4)).astype(np.float32)
    g = graph(handle, name="forms")
    A = g.tensor_like(a, name="A")
    Y = g.exp(input=A, name="e")
    Y.set_output(True)
    g.build([cudnn.heur_mode.A])
    assert isinstance(g.key(), int)
    assert g._get_variant_pack_uids_sorted() == sorted([A.get_uid(), Y.get_uid()])
    y1, y2, y3 = (np.full((1, 3, 4), np.nan, np.float32) for _ in range(3))
    g.execute({"A": a, Y.get_uid(): y1, 12345: None})  # names, uids; None entries ignored
    g.execute((a, y2), tensor_uids=[A.get_uid(), Y.get_uid()])
    g._execute_with_ptrs({A.get_uid(): a.ctypes.data, Y.get_uid(): y3.ctypes.data}, 0)
    for y in (y1, y2, y3):
        np.testing.assert_allclose(y, np.exp(a), rtol=1e-6)
    blob = g.serialize(as_bytes=True)
    g2 = cudnn.pygraph(handle=handle)
    g2.deserialize(list(blob))  # the frontend's list-of-byte-values form
    y4 = np.full((1, 3, 4), np.nan, np.float32)
    g2.execute({A.get_uid(): a, Y.get_uid(): y4})
    np.testing.assert_allclose(y4, np.exp(a), rtol=1e-6)
    with pytest.raises(KeyError, match="no tensor named 'nope'"):
        g.execute({"nope": a})
    with pytest.raises(cudnn.NotSupportedError, match="override"):
        g.execute({A: a, Y: y1}, override_uids=[A.get_uid()], override_shapes=[[1, 3, 4]])


def test_tensor_attributes_read_and_assign_as_the_frontend_dataclass(handle, rng):
    a = rng.standard_normal((1, 4, 8)).astype(np.float32)
    b = rng.standard_normal((1, 8, 3)).astype(np.float32)
    g = graph(handle, name="attrs")
    A = g.tensor(name="A", dim=[1, 4, 8], stride=[32, 8, 1], data_type=cudnn.data_type.FLOAT)
    B = g.tensor_like(b)
    assert (A.dim, A.stride, A.name, A.data_type) == ([1, 4, 8], [32, 8, 1], "A",
                                                      cudnn.data_type.FLOAT)
    assert (A.is_virtual, A.is_pass_by_value, A.ragged_offset) == (False, False, None)
    assert A.ragged_offset_multiplier == 1 and A.reordering_type == cudnn.tensor_reordering.NONE
    B.name = "B"
    B.uid = 77
    C = g.matmul(A, B)
    assert C.is_virtual
    C.is_virtual = False
    C.name, C.data_type = "C", np.float32
    assert (C.get_name(), C.get_is_virtual(), C.get_uid()) == ("C", False, C.uid)
    g.build([cudnn.heur_mode.A])
    assert C.dim == [1, 4, 3] and C.stride == [12, 3, 1]  # inferred
    assert B.uid == 77 and isinstance(A.uid, int)
    c = np.full((1, 4, 3), np.nan, np.float32)
    g.execute({A.uid: a, B.uid: b, C.uid: c})
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-6)
    with pytest.raises(cudnn.NotSupportedError, match="reordering"):
        A.reordering_type = cudnn.tensor_reordering.INT8x32


def test_introspection(handle):
    g = graph(handle)
    A = g.tensor(name="A", dim=[1, 4, 4])
    C = g.matmul(A, A, name="mm")
    Y = g.relu(input=C, name="r")
    Y.set_output(True)
    g.build()
    assert g.find_tensor("A") is A and g.find_tensor(Y.get_uid()) is Y
    assert g.get_inputs() == [A] and g.get_outputs() == [Y]
    assert [n.name for n in g.nodes] == ["mm", "r"]
    assert g.get_node("mm").node_type == cudnn.NodeType.MATMUL
    assert g.get_node("r").inputs == {"IN_0": C.get_name()}
    assert g.context.io_data_type == cudnn.data_type.FLOAT
    # The frontend's meaning: None means cuDNN's backend serves the plan; the CPU engine is named.
    assert g.selected_engine.name == g.get_plan_name_at_index(0) == "reference"
    assert isinstance(g.get_behavior_notes_for_plan_at_index(0), list)
    with pytest.raises(IndexError, match="out of range"):
        g.get_plan_name_at_index(99)


def test_graph_helpers(handle, rng):
    calls = []

    @cudnn.graph_cache(key_fn=lambda n: n, maxsize=2)
    @cudnn.jit(heur_modes=cudnn.heur_mode.A)
    def make(n):
        calls.append(n)
        with cudnn.graph(handle, io_data_type=cudnn.data_type.FLOAT) as (g, extra):
            assert extra == []
            X = g.tensor(name="X", dim=[n])
            Y = g.neg(input=X)
            Y.set_output(True)
            return g, [X, Y]

    g, (xu, yu) = make(3)
    assert make(3)[0] is g and calls == [3]
    make(4), make(5), make(3)  # maxsize 2: the oldest entry (3) was dropped
    assert calls == [3, 4, 5, 3]
    x = rng.standard_normal(3).astype(np.float32)
    y = np.full(3, np.nan, np.float32)
    g.execute({xu: x, yu: y})
    np.testing.assert_allclose(y, -x)


def test_wrapper_graph_numpy(handle, rng):
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    w = rng.standard_normal((1, 4, 5)).astype(np.float32)
    with cudnn.Graph(handle=handle, io_data_type=cudnn.data_type.FLOAT,
                     compute_data_type=cudnn.data_type.FLOAT) as g:
        y = g.matmul(A=x, B=w, name="mm")
        y.set_output(True)
        with pytest.raises(RuntimeError, match="not allowed"):
            g.build
    g.set_io_tuples(["mm::A", "mm::B"], [y])
    ref = x.astype(np.float64) @ w
    tol = dict(rtol=1e-5, atol=1e-5 * np.abs(ref).max())  # fp32: relative to the largest value
    np.testing.assert_allclose(g(x, w), ref, **tol)
    out = g({"mm::A": x, "mm::B": w})
    np.testing.assert_allclose(out["mm::C"], ref, **tol)
    with pytest.raises(RuntimeError, match="not found in variant pack"):
        g({"mm::A": x})
    with pytest.raises(ValueError, match="not found in tensor map"):
        g.set_io_tuples(["nope"], [y])


def test_wrapper_graph_boolean_output_is_bit_packed(handle):
    # 11 comparisons: the wrapper allocates 2 bytes (bits, LSB first), not 11 bools.
    x = np.array([1, -1, 1, 1, -1, -1, -1, 1, 1, -1, -1], np.float32).reshape(1, 1, 11)
    z = np.zeros((1, 1, 1), np.float32)
    with cudnn.Graph(handle=handle, io_data_type=cudnn.data_type.FLOAT,
                     compute_data_type=cudnn.data_type.FLOAT) as g:
        m = g.cmp_gt(input=x, comparison=z, name="gt")
        m.set_output(True).set_data_type(cudnn.data_type.BOOLEAN)
    g.set_io_tuples([x, z], [m])
    out = np.asarray(g(x, z))
    assert out.dtype == np.uint8 and out.shape == (2,)
    assert out[0] == 0x8D and out[1] & 0x07 == 0x01


def test_experimental_norm_ops_cpu():
    torch = pytest.importorskip("torch")
    ops = cudnn.experimental.ops
    gen = torch.Generator().manual_seed(13)
    x, w, b = (torch.randn(*s, generator=gen) for s in ((3, 5, 32), (32,), (32,)))
    ref = torch.nn.functional.rms_norm(x.double(), (32,), w.double(), 1e-5) + b.double()
    torch.testing.assert_close(ops.rms_norm(x, w, b, eps=1e-5).double(), ref, rtol=1e-5,
                               atol=1e-5)
    ref = torch.nn.functional.layer_norm(x.double(), (32,), w.double(), b.double(), 1e-5)
    torch.testing.assert_close(ops.layer_norm(x, (32,), w, b, 1e-5).double(), ref, rtol=1e-5,
                               atol=1e-5)
    with pytest.raises(ValueError, match="normalized_shape"):
        ops.layer_norm(x, (5, 32), w, b)


def test_plan_filters(handle, rng):
    def make():
        g = graph(handle)
        A = g.tensor(name="A", dim=[1, 4, 4])
        Y = g.relu(input=g.matmul(A, A))  # a virtual intermediate: the plan needs workspace
        Y.set_output(True)
        return g, A, Y

    g, A, Y = make()
    g.build()
    need = g.get_workspace_size()
    assert need > 0
    name = g.get_plan_name_at_index(0)
    for deselect in (lambda g: g.deselect_workspace_greater_than(need - 1),
                     lambda g: g.deselect_engines([name]),
                     lambda g: g.select_numeric_notes([cudnn.numerical_note.FFT]),
                     lambda g: g.select_behavior_notes(["RUNTIME_COMPILATION"])):
        g, A, Y = make()
        assert deselect(g) is g
        with pytest.raises(cudnn.cudnnGraphNotSupportedError, match="deselected"):
            g.build()
    g, A, Y = make()
    g.deselect_workspace_greater_than(need).deselect_numeric_notes([cudnn.numerical_note.FFT])
    g.validate()
    g.build_operation_graph()
    g.create_execution_plans([cudnn.heur_mode.A])
    g.check_support()
    g.build_plans(cudnn.build_plan_policy.ALL)
    a = rng.standard_normal((1, 4, 4)).astype(np.float32)
    y = np.full((1, 4, 4), np.nan, np.float32)
    g.execute({A: a, Y: y})
    np.testing.assert_allclose(y, np.maximum(a @ a, 0), rtol=1e-5, atol=1e-6)


def test_last_error_string_and_query_by_uid(handle):
    g = graph(handle)
    X = g.tensor(name="X", dim=[2, 2])
    with pytest.raises(cudnn.NotSupportedError, match="the rope operation .* is not supported"):
        g.rope(X)  # a refusing stub: not recorded (no native call)
    with pytest.raises(TypeError, match="relu\\(\\): incompatible function arguments"):
        g.relu(X, nonsense=1)
    assert "nonsense" in cudnn.get_last_error_string()
    Y = g.relu(input=X)
    Y.set_output(True)
    g.build()
    assert g.query_tensor_attributes_of_uid(X.get_uid()) is X


def test_execute_is_the_native_method_and_takes_every_frontend_form():
    # No Python frame of its own: the compatible class inherits the native execute, which takes
    # None entries, name keys, a missing workspace and an unbuilt graph on one path into C++.
    assert cudnn.pygraph.execute is cudnn.NativeGraph.execute
    h = cudnn.create_handle("cpu")
    g = cudnn.pygraph(handle=h, io_data_type=cudnn.data_type.FLOAT)
    rng = np.random.default_rng(7)
    a = rng.standard_normal((1, 3, 5)).astype(np.float32)
    b = rng.standard_normal((1, 5, 2)).astype(np.float32)
    A, B = g.tensor_like(a, "A"), g.tensor_like(b, "B")
    Y = g.matmul(A, B)
    Y.set_output(True).set_name("Y")
    y = np.full((1, 3, 2), np.nan, np.float32)
    g.execute({A: a, B: b, Y: y, "unused": None})  # not built yet, None entry: slow path builds
    np.testing.assert_allclose(y, a @ b, rtol=1e-5, atol=1e-6)
    y[:] = np.nan
    g.execute({"A": a, "B": b, "Y": y}, None)  # name keys
    np.testing.assert_allclose(y, a @ b, rtol=1e-5, atol=1e-6)
    y[:] = np.nan
    ws = np.empty(max(g.get_workspace_size(), 1), np.uint8)
    g.execute({A.get_uid(): a, B: b, Y: y}, ws)  # the plain call
    np.testing.assert_allclose(y, a @ b, rtol=1e-5, atol=1e-6)
    with pytest.raises(TypeError, match="tensor_dict must be a mapping .*tensor_uids="):
        g.execute([a, b, y], ws)


def test_execute_forms_that_call_back_into_python(handle):
    # tensor_uids lists, non-dict mappings, the graph's own workspace and the overrides' error:
    # the native execute calls the small Python helpers for these and returns to its one path.
    import types

    g = graph(handle)
    rng = np.random.default_rng(11)
    a = rng.standard_normal((1, 3, 5)).astype(np.float32)
    b = rng.standard_normal((1, 5, 2)).astype(np.float32)
    A, B = g.tensor_like(a, "A"), g.tensor_like(b, "B")
    Y = g.relu(input=g.matmul(A, B))  # a virtual intermediate: the reference plan needs workspace
    Y.set_output(True)
    g.build()
    need = g.get_workspace_size()
    ref = np.maximum(a @ b, 0)
    y = np.full((1, 3, 2), np.nan, np.float32)
    g.execute({A: a, B: b, Y: y})  # no workspace: the graph's own, allocated once and kept
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-6)
    if need > 0:
        own = g.__dict__["_workspace"]
        assert own.nbytes >= need
        y[:] = np.nan
        g.execute({A: a, B: b, Y: y}, None)
        assert g.__dict__["_workspace"] is own
        np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-6)
        with pytest.raises(ValueError, match="workspace too small"):
            g.execute({A: a, B: b, Y: y}, np.empty(need - 1, np.uint8))
        assert "workspace too small" in cudnn.get_last_error_string()
    y[:] = np.nan
    g.execute([a, b, y], tensor_uids=[A.get_uid(), B.get_uid(), Y.get_uid()])
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-6)
    y[:] = np.nan
    g.execute(types.MappingProxyType({A: a, B: b, Y: y}))
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-6)
    with pytest.raises(cudnn.NotSupportedError, match="execute\\(override_uids"):
        g.execute({A: a, B: b, Y: y}, override_shapes=[[1, 3, 5]])
    assert "override_uids" in cudnn.get_last_error_string()
    with pytest.raises(ValueError, match=r"tensor 'A' .*but the array has shape \(1, 2, 5\)"):
        g.execute({A: a[:, :2], B: b, Y: y})  # a plain dict: the error is recorded too
    assert "but the array has shape (1, 2, 5)" in cudnn.get_last_error_string()


def test_cpu_execute_refuses_torch_tensors_too_small_for_the_tensor(handle):
    # On a CPU handle the reference engine walks each tensor's extent itself: a torch tensor
    # whose storage is smaller is refused by name instead of read or written past its end.
    # BOOLEAN is bit-packed (eight elements per byte), on both engines.
    torch = pytest.importorskip("torch")
    base = torch.tensor([-1.0, 2.0, 0.0, 3.0, 4.0, -5.0, 6.0, -7.0])
    x = torch.cat([base, -base, 2 * base, -2 * base]).reshape(2, 16, 1, 1)  # 32 elements
    g = graph(handle)
    X = g.tensor_like(x)
    zero = g.tensor_like(torch.zeros(1, 1, 1, 1))
    mask = g.cmp_gt(name="mask", input=X, comparison=zero)
    mask.set_output(True).set_data_type(cudnn.data_type.BOOLEAN)
    y = g.relu(name="relu", input=X)
    y.set_output(True)
    g.build([cudnn.heur_mode.A])
    ws = torch.empty(g.get_workspace_size(), dtype=torch.uint8)
    z = torch.zeros(1, 1, 1, 1)

    packed = torch.empty(3, dtype=torch.uint8)  # 32 bits need 4 bytes
    with pytest.raises(ValueError, match=r"tensor 'mask.*needs 4 bytes.*holds 3.*eight elements per byte"):
        g.execute({X: x, zero: z, mask: packed, y: torch.empty_like(x)}, ws, handle=handle)
    # torch.bool (the frontend's tests bind such masks): taken as bytes, with a warning.
    mb = torch.zeros(2, 16, 1, 1, dtype=torch.bool)
    with pytest.warns(UserWarning, match=r"tensor 'mask.*torch.bool tensor.*read as bits"):
        g.execute({X: x, zero: z, mask: mb, y: torch.empty_like(x)}, ws, handle=handle)
    got = np.unpackbits(mb.view(torch.uint8).numpy().ravel()[:4], bitorder="little") == 1
    assert np.array_equal(got, (x > 0).numpy().ravel())
    assert not mb.view(torch.uint8)[0, 4:].any()  # past the 4 packed bytes: untouched
    short = torch.empty(31)
    with pytest.raises(ValueError, match=r"tensor 'relu.*needs 128 bytes.*holds 124"):
        g.execute({X: x, zero: z, mask: torch.empty(4, dtype=torch.uint8), y: short}, ws,
                  handle=handle)
    # A view into a larger storage: what lies past data_ptr() counts, the offset is subtracted.
    big = torch.full((40,), 7.0)
    with pytest.raises(ValueError, match=r"holds 120"):
        g.execute({X: x, zero: z, mask: torch.empty(4, dtype=torch.uint8),
                   y: big[10:]}, ws, handle=handle)
    out = big[8:40].view(2, 16, 1, 1)
    m = torch.full((4,), 0xA5, dtype=torch.uint8)
    g.execute({X: x, zero: z, mask: m, y: out}, ws, handle=handle)
    unpacked = np.unpackbits(m.numpy(), count=32, bitorder="little").reshape(2, 16, 1, 1)
    assert np.array_equal(unpacked == 1, (x > 0).numpy())
    assert torch.equal(out, torch.relu(x))
    assert torch.equal(big[:8], torch.full((8,), 7.0))  # nothing written before the view
