"""Call forms the cuDNN frontend's own test suite uses (issue 14, /work/notes/fe-audit.md), each
checked against numpy on the CPU engine. Written from the frontend's documented behaviour."""

import numpy as np
import pytest

import dnngraph as cudnn


def f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def fgraph(handle):
    return cudnn.pygraph(handle=handle, io_data_type=cudnn.data_type.FLOAT,
                         intermediate_data_type=cudnn.data_type.FLOAT,
                         compute_data_type=cudnn.data_type.FLOAT)


def pipeline(g):
    g.validate()
    g.build_operation_graph()
    g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    g.check_support()
    g.build_plans()


def ws(g):
    return np.empty(g.get_workspace_size(), np.uint8)


# ---- execute: None keys (optional tensors left out), raw addresses -----------------------------
def test_execute_skips_none_keys(handle, rng):
    # rmsnorm without bias: the frontend's tests key the pack with the None they got for BIAS.
    x, s = f32(rng, 6, 5, 1, 1), f32(rng, 1, 5, 1, 1)
    g = fgraph(handle)
    X, S = g.tensor_like(x), g.tensor_like(s)
    bias = None
    eps = g.tensor(dim=[1, 1, 1, 1], is_pass_by_value=True, data_type=cudnn.data_type.FLOAT)
    Y, iv = g.rmsnorm(input=X, scale=S, bias=bias, epsilon=eps,
                      norm_forward_phase=cudnn.norm_forward_phase.TRAINING)
    Y.set_output(True)
    iv.set_output(True)
    pipeline(g)
    y, inv = np.full_like(x, np.nan), np.full((6, 1, 1, 1), np.nan, np.float32)
    g.execute({X: x, S: s, bias: np.ones_like(s), eps: 1e-5, Y: y, iv: inv}, ws(g))
    r = 1 / np.sqrt((x.astype(np.float64) ** 2).mean(axis=(1, 2, 3), keepdims=True) + 1e-5)
    np.testing.assert_allclose(inv, r, rtol=1e-5)
    np.testing.assert_allclose(y, x * r * s, rtol=1e-5, atol=1e-6)


def test_execute_takes_raw_addresses(handle, rng):
    # {tensor: x.data_ptr()} and an int workspace: addresses of buffers laid out as declared.
    a, b = f32(rng, 3, 4), f32(rng, 3, 4)
    g = fgraph(handle)
    A, B = g.tensor_like(a), g.tensor_like(b)
    C = g.add(a=A, b=B)
    C.set_output(True)
    g.build()
    c = np.full_like(a, np.nan)
    w = ws(g)
    g.execute({A: a.ctypes.data, B: b, C: c.ctypes.data}, w.ctypes.data if w.size else 0)
    np.testing.assert_allclose(c, a + b, rtol=1e-6)
    c[:] = np.nan
    g.execute({A.get_uid(): a.ctypes.data, B.get_uid(): b.ctypes.data, C.get_uid(): c}, None)
    np.testing.assert_allclose(c, a + b, rtol=1e-6)


def test_execute_refuses_bad_raw_addresses(handle, rng):
    a = f32(rng, 3, 4)
    g = fgraph(handle)
    A = g.tensor_like(a)
    C = g.relu(input=A)
    C.set_output(True)
    g.build()
    c = np.full_like(a, np.nan)
    with pytest.raises(ValueError, match=r"tensor '.*' .*is the address 0"):
        g.execute({A: 0, C: c}, ws(g))
    with pytest.raises(ValueError, match=r"address -8 is not a non-negative 64-bit integer"):
        g.execute({A: a, C: -8}, ws(g))
    with pytest.raises(ValueError, match=r"address 18446744073709551616 is not"):
        g.execute({A: a, C: 1 << 64}, ws(g))
    g.execute({A: a.ctypes.data, C: c, None: a, A.get_uid() + 1000: None}, 0)  # None skipped
    np.testing.assert_allclose(c, np.maximum(a, 0), rtol=1e-6)


def test_execute_pass_by_value_int_stays_a_value(handle, rng):
    a = f32(rng, 2, 3)
    g = fgraph(handle)
    A = g.tensor_like(a)
    k = g.tensor(dim=[1, 1], is_pass_by_value=True, data_type=cudnn.data_type.FLOAT)
    C = g.mul(a=A, b=k)
    C.set_output(True)
    g.build()
    c = np.full_like(a, np.nan)
    g.execute({A: a, k: 3, C: c}, None)
    np.testing.assert_allclose(c, 3 * a, rtol=1e-6)


# ---- tensors no op uses --------------------------------------------------------------------------
def test_unused_tensor_is_set_aside_and_its_buffer_ignored(handle, rng):
    a = f32(rng, 2, 3)
    g = fgraph(handle)
    A = g.tensor_like(a)
    unused = g.tensor_like(np.full((1, 1), 1e-5, np.float32))
    Y = g.relu(input=A)
    Y.set_output(True)
    pipeline(g)
    y = np.full_like(a, np.nan)
    g.execute({A: a, unused: np.zeros((1, 1), np.float32), Y: y}, ws(g))
    np.testing.assert_allclose(y, np.maximum(a, 0))
    assert g.allow_unused_tensors


def test_native_graph_still_refuses_unused_tensors(handle):
    g = cudnn.NativeGraph(handle=handle, io_data_type=cudnn.data_type.FLOAT)
    a = g.tensor(name="a", dim=[2, 3])
    g.tensor(name="lonely", dim=[1])
    g.relu(a).set_output(True)
    with pytest.raises(ValueError, match="'lonely' is neither produced nor read"):
        g.validate()
    g.allow_unused_tensors = True
    g.validate()


# ---- layernorm: the normalized dims come from SCALE --------------------------------------------
def test_layernorm_normalizes_the_dims_where_scale_is_not_one(handle, rng):
    B, S, E = 3, 4, 8
    x = (3 * f32(rng, B, S, E) - 0.5)
    sc, bi = f32(rng, 1, 1, E), f32(rng, 1, 1, E)
    g = fgraph(handle)
    X, SC, BI = g.tensor_like(x), g.tensor_like(sc), g.tensor_like(bi)
    eps = g.tensor(dim=[1, 1, 1], is_pass_by_value=True, data_type=cudnn.data_type.FLOAT)
    Y, M, IV = g.layernorm(input=X, scale=SC, bias=BI, epsilon=eps,
                           norm_forward_phase=cudnn.norm_forward_phase.TRAINING)
    for t in (Y, M, IV):
        t.set_output(True)
    pipeline(g)
    assert M.get_dim() == [B, S, 1] and IV.get_dim() == [B, S, 1]
    y, m, iv = (np.full(sh, np.nan, np.float32) for sh in ((B, S, E), (B, S, 1), (B, S, 1)))
    g.execute({X: x, SC: sc, BI: bi, eps: 1e-3, Y: y, M: m, IV: iv}, ws(g))
    x64 = x.astype(np.float64)
    mean = x64.mean(-1, keepdims=True)
    r = 1 / np.sqrt(x64.var(-1, keepdims=True) + 1e-3)
    np.testing.assert_allclose(m, mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(iv, r, rtol=1e-5)
    np.testing.assert_allclose(y, (x64 - mean) * r * sc + bi, rtol=1e-4, atol=1e-5)

    # Backward with the same statistics: dx = r (g - <g> - xhat <g xhat>), g = dy * scale.
    dy = f32(rng, B, S, E)
    bg = fgraph(handle)
    DY, Xb, Sb = bg.tensor_like(dy), bg.tensor_like(X, name="X"), bg.tensor_like(SC, name="s")
    Mb, IVb = bg.tensor_like(M, name="mean"), bg.tensor_like(IV, name="inv_var")
    DX, DS, DB = bg.layernorm_backward(grad=DY, input=Xb, scale=Sb, mean=Mb, inv_variance=IVb)
    for t in (DX, DS, DB):
        t.set_output(True)
    pipeline(bg)
    dx, ds, db = np.full_like(x, np.nan), np.full_like(sc, np.nan), np.full_like(bi, np.nan)
    bg.execute({DY: dy, Xb: x, Sb: sc, Mb: m, IVb: iv, DX: dx, DS: ds, DB: db}, ws(bg))
    xhat = (x64 - m) * iv
    gr = dy * sc.astype(np.float64)
    want = iv * (gr - gr.mean(-1, keepdims=True) - xhat * (gr * xhat).mean(-1, keepdims=True))
    np.testing.assert_allclose(dx, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ds, (dy * xhat).sum(axis=(0, 1), keepdims=True), rtol=1e-4,
                               atol=1e-5)
    np.testing.assert_allclose(db, dy.sum(axis=(0, 1), keepdims=True), rtol=1e-5, atol=1e-5)


def test_layernorm_scale_that_fits_no_rule_is_refused(handle):
    g = fgraph(handle)
    X = g.tensor(dim=[2, 3, 4])
    SC, BI = g.tensor(dim=[1, 2, 4]), g.tensor(dim=[1, 2, 4])
    eps = g.tensor(dim=[1, 1, 1], is_pass_by_value=True, data_type=cudnn.data_type.FLOAT)
    Y, _, _ = g.layernorm(input=X, scale=SC, bias=BI, epsilon=eps,
                          norm_forward_phase=cudnn.norm_forward_phase.TRAINING)
    Y.set_output(True)
    with pytest.raises(ValueError, match="SCALE"):
        g.validate()


# ---- pointwise outputs keep a strided input's layout ---------------------------------------------
def test_pointwise_writes_a_strided_slice_in_place(handle, rng):
    # The frontend's RoPE test: inputs are slices of one array, outputs are bound to the same
    # slices; the output's strides are the input's, so the rest of the array stays untouched.
    x = f32(rng, 4, 10)
    before = x.copy()
    x1, x2 = x[:, :3], x[:, 3:6]
    g = fgraph(handle)
    X1, X2 = g.tensor_like(x1), g.tensor_like(x2)
    Y1 = g.sub(a=g.mul(a=X1, b=X1), b=X2)
    Y1.set_output(True)
    pipeline(g)
    assert Y1.get_stride() == [10, 1]
    g.execute({X1: x1, X2: x2, Y1: x1}, ws(g))
    np.testing.assert_allclose(x[:, :3], before[:, :3] ** 2 - before[:, 3:6], rtol=1e-5)
    np.testing.assert_array_equal(x[:, 3:], before[:, 3:])


def test_pointwise_output_of_overlapping_input_is_packed(handle):
    g = fgraph(handle)
    A = g.tensor(dim=[3, 4], stride=[1, 1])  # rows overlap
    Y = g.relu(input=A)
    Y.set_output(True)
    g.validate()
    assert Y.get_stride() == [4, 1]


# ---- plans: known after create_execution_plans; engines and knobs ------------------------------
def test_notes_and_plan_count_right_after_create_execution_plans(handle):
    g = fgraph(handle)
    a, b = g.tensor(dim=[1, 4, 8]), g.tensor(dim=[1, 8, 2])
    g.matmul(a, b).set_output(True)
    g.validate()
    g.build_operation_graph()
    g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    assert g.get_execution_plan_count() >= 1
    assert isinstance(g.get_behavior_notes_for_plan_at_index(0), list)
    g.check_support()
    g.build_plans()
    assert g.get_behavior_notes() == g.get_behavior_notes_for_plan_at_index(0)


def test_engine_count_and_knobs(handle, rng):
    g = fgraph(handle)
    x = f32(rng, 2, 3)
    X = g.tensor_like(x)
    Y = g.relu(input=X)
    Y.set_output(True)
    g.validate()
    g.build_operation_graph()
    n = g.get_engine_count()
    assert n >= 1
    assert all(g.get_knobs_for_engine(i) == [] for i in range(n))
    with pytest.raises(ValueError, match="get_engine_count"):
        g.get_knobs_for_engine(n)
    for i in range(n):
        g.create_execution_plan(i, {})
    g.check_support()
    g.build_plans()
    y = np.full_like(x, np.nan)
    g.execute({X: x, Y: y}, ws(g))
    np.testing.assert_allclose(y, np.maximum(x, 0))


# ---- sdpa keywords -------------------------------------------------------------------------------
def test_sdpa_takes_the_implementation_keyword(handle, rng):
    b, h, s, d = 1, 2, 4, 8
    q, k, v = (f32(rng, b, h, s, d) for _ in range(3))
    g = fgraph(handle)
    Q, K, V = g.tensor_like(q), g.tensor_like(k), g.tensor_like(v)
    O, _ = g.sdpa(q=Q, k=K, v=V, generate_stats=False, attn_scale=0.5,
                  implementation=cudnn.attention_implementation.AUTO, unfuse_fma=False,
                  stats_use_log2=False)
    O.set_output(True)
    pipeline(g)
    o = np.full((b, h, s, d), np.nan, np.float32)
    g.execute({Q: q, K: k, V: v, O: o}, ws(g))
    sc = np.einsum("bhqd,bhkd->bhqk", q.astype(np.float64), k) * 0.5
    p = np.exp(sc - sc.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    np.testing.assert_allclose(o, np.einsum("bhqk,bhkd->bhqd", p, v), rtol=1e-4, atol=1e-5)
    g2 = fgraph(handle)
    with pytest.raises(cudnn.NotSupportedError, match="stats_use_log2"):
        o2, s2 = g2.sdpa(q=g2.tensor_like(q), k=g2.tensor_like(k), v=g2.tensor_like(v),
                         generate_stats=True, stats_use_log2=True)
        o2.set_output(True)
        s2.set_output(True)
        g2.validate()


def test_in_place_outputs_read_the_inputs_as_they_were(handle, rng):
    # The frontend's RoPE test binds two outputs to the two input slices they are computed
    # from: every output element must come from the inputs before the graph ran.
    x = f32(rng, 3, 8)
    c, s = f32(rng, 1, 4), f32(rng, 1, 4)
    before = x.copy()
    x1, x2 = x[:, :4], x[:, 4:]
    g = fgraph(handle)
    X1, X2, C, S = (g.tensor_like(a) for a in (x1, x2, c, s))
    Y1 = g.sub(a=g.mul(a=X1, b=C), b=g.mul(a=X2, b=S))
    Y2 = g.add(a=g.mul(a=X2, b=C), b=g.mul(a=X1, b=S))
    Y1.set_output(True)
    Y2.set_output(True)
    pipeline(g)
    g.execute({X1: x1, X2: x2, C: c, S: s, Y1: x1, Y2: x2}, ws(g))
    b1, b2 = before[:, :4].astype(np.float64), before[:, 4:].astype(np.float64)
    np.testing.assert_allclose(x[:, :4], b1 * c - b2 * s, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(x[:, 4:], b2 * c + b1 * s, rtol=1e-5, atol=1e-6)


def test_build_plans_without_check_support(handle, rng):
    # The frontend checks the candidates as it builds: validate, build_operation_graph,
    # create_execution_plans, build_plans is a complete pipeline there.
    a, b = f32(rng, 1, 4, 8), f32(rng, 1, 8, 3)
    g = fgraph(handle)
    A, B = g.tensor_like(a), g.tensor_like(b)
    C = g.matmul(A=A, B=B)
    C.set_output(True)
    g.validate()
    g.build_operation_graph()
    g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    g.build_plans()
    c = np.full((1, 4, 3), np.nan, np.float32)
    g.execute({A: a, B: b, C: c}, ws(g))
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-6)
    assert g._variant_pack_uids() == sorted([A.get_uid(), B.get_uid(), C.get_uid()])
    with pytest.raises(ValueError, match=f"missing a buffer for tensor uid {C.get_uid()}"):
        g.execute({A: a, B: b}, ws(g))


def _wrapper_matmul(handle, **kw):
    with cudnn.Graph(handle=handle, io_data_type=cudnn.data_type.FLOAT,
                     compute_data_type=cudnn.data_type.FLOAT, inputs=["X", "W"], outputs=["Y"],
                     **kw) as graph:
        X = graph.tensor(name="X", dim=[1, 4, 8], stride=[32, 8, 1])
        W = graph.tensor(name="W", dim=[1, 8, 3], stride=[24, 3, 1])
        graph.matmul(name="mm", A=X, B=W).set_output(True).set_name("Y")
    return graph


def test_wrapper_workspace_is_the_frontends_private_attribute(handle, rng):
    # The frontend's own tests read Graph.__workspace (mangled: _Graph__workspace).
    x, w = f32(rng, 1, 4, 8), f32(rng, 1, 8, 3)
    g = _wrapper_matmul(handle)
    assert g._Graph__workspace is not None and g._Graph__workspace is not False
    np.testing.assert_allclose(g(x, w), x @ w, rtol=1e-5, atol=1e-6)
    g = _wrapper_matmul(handle, workspace_alloc=False)
    assert g._Graph__workspace is False
    with pytest.raises(RuntimeError, match="Need to specify workspace"):
        g(x, w)
    out = g(x, w, workspace=np.empty(max(g.get_workspace_size(), 1), np.uint8))
    np.testing.assert_allclose(out, x @ w, rtol=1e-5, atol=1e-6)


def test_handle_functions_refuse_a_raw_int_by_name():
    handle = cudnn.create_handle(device="cpu")  # its own: the test destroys it
    for call in (lambda: cudnn.set_stream(handle=1, stream=100), lambda: cudnn.get_stream(1),
                 lambda: cudnn.destroy_handle(1)):
        with pytest.raises(TypeError, match="cudnn.Handle"):
            call()
    cudnn.set_stream(handle=handle, stream=0)
    assert cudnn.get_stream(handle) == 0
    cudnn.destroy_handle(handle)


def test_kernel_cache_counters_are_refused_by_name():
    kc = cudnn.create_kernel_cache()
    for name in ("revision", "size"):
        with pytest.raises(cudnn.NotSupportedError, match="9.27"):
            getattr(kc, name)()
