"""pygraph's engine-level API (get_engine_count, get_knobs_for_engine, create_execution_plan,
get_engine_and_knobs_at_index) on the CPU engine: one engine without knobs."""

import numpy as np
import pytest

import dnngraph as cudnn


def _graph(rng):
    h = cudnn.create_handle(device="cpu")
    a = rng.standard_normal((2, 4, 8)).astype(np.float32)
    b = rng.standard_normal((2, 8, 3)).astype(np.float32)
    g = cudnn.pygraph(handle=h, io_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT)
    A, B = g.tensor_like(a), g.tensor_like(b)
    C = g.matmul(A, B)
    C.set_output(True)
    return g, (A, a), (B, b), C


def test_knob_types_carry_the_frontends_values():
    assert cudnn.knob_type.KERNEL_CFG.value == 12
    assert cudnn.knob_type.TILE_CGA.value == 32
    assert cudnn.knob_type.SPLIT_KV.value == 1002
    assert cudnn.is_frontend_knob_type(cudnn.knob_type.SPLIT_KV.value)


def test_a_plan_from_engine_and_knobs_runs():
    rng = np.random.default_rng(7)
    g, (A, a), (B, b), C = _graph(rng)
    g.validate()
    g.build_operation_graph()
    assert g.get_engine_count() == 1
    assert g.get_knobs_for_engine(0) == []
    assert g.create_execution_plan(0, {}) is g
    g.check_support()
    g.build_plans()
    assert g.get_execution_plan_count() == 1
    assert g.get_engine_and_knobs_at_index(0) == (0, {})
    c = np.full((2, 4, 3), np.nan, np.float32)
    g.execute({A: a, B: b, C: c}, np.empty(max(g.get_workspace_size(), 1), np.uint8))
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


def test_bad_engine_knob_or_stage_is_a_clear_error():
    g, *_ = _graph(np.random.default_rng(8))
    with pytest.raises(Exception, match="build_operation_graph"):
        g.get_engine_count()
    g.validate()
    g.build_operation_graph()
    with pytest.raises(ValueError, match="get_engine_count"):
        g.get_knobs_for_engine(1)
    with pytest.raises(ValueError, match="KERNEL_CFG"):
        g.create_execution_plan(0, {cudnn.knob_type.KERNEL_CFG: 3})
    with pytest.raises(ValueError, match="TILE_SIZE"):
        g.create_execution_plan(0, {"TILE_SIZE": 1})
    with pytest.raises(TypeError, match="knob key"):
        g.create_execution_plan(0, {2.5: 1})
