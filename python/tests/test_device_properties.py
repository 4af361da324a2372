"""Device properties and deviceless (ahead-of-time) builds from Python: the frontend's
create_device_properties / DeviceProperties.serialize / deserialize and
pygraph(device_property=...). The GPU case (build deviceless, serialize, deserialize with a
handle, execute, compare with numpy) is skipped where torch sees no GPU."""

import json
import os

import numpy as np
import pytest

import dnngraph as cudnn

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data", "devprop_h200.json")


def h200_text():
    with open(FIXTURE) as f:
        return f.read().strip()


def h200():
    p = cudnn.DeviceProperties()
    p.deserialize(h200_text())
    return p


def test_properties_round_trip_in_every_serialized_form():
    text = h200_text()
    p = h200()
    assert (p.device_name, p.compute_capability, p.sm_count, p.device_id) == \
        ("NVIDIA H200", "9.0", 132, 0)
    assert p.serialize() == text
    assert json.loads(p.serialize())["deviceVer"] == 900
    for form in (text.encode(), list(text.encode())):
        q = cudnn.DeviceProperties()
        q.deserialize(form)
        assert q.serialize() == text
    assert "compute capability 9.0, 132 SMs" in repr(p)


def test_bad_properties_are_clear_errors():
    with pytest.raises(ValueError, match="does not parse"):
        cudnn.DeviceProperties().deserialize("{\"deviceVer\": 900,")
    with pytest.raises(ValueError, match="'multiProcessorCount' is missing"):
        cudnn.DeviceProperties().deserialize("{\"deviceVer\": 900}")
    with pytest.raises(TypeError, match="str, bytes or a list"):
        cudnn.DeviceProperties().deserialize(900)
    with pytest.raises(ValueError, match="empty"):
        cudnn.DeviceProperties().serialize()
    with pytest.raises(TypeError, match="DeviceProperties"):
        cudnn.pygraph(device_property=h200_text())
    with pytest.raises(ValueError, match="not both"):
        cudnn.pygraph(device_property=h200(), handle=cudnn.create_handle(device="cpu"))


def gpu_visible():
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def test_create_device_properties_needs_the_gpu():
    if gpu_visible():
        p = cudnn.create_device_properties(0)
        assert json.loads(p.serialize())["deviceVer"] == int(p.compute_capability.replace(".", "")) * 10
    else:
        with pytest.raises(cudnn.NotSupportedError, match="cuda:0"):
            cudnn.create_device_properties(0)


def test_create_device_properties_from_the_json_text():
    # The frontend's form: create_device_properties(serialized) reads the properties (no GPU).
    text = h200_text()
    for form in (text, text.encode(), list(text.encode())):
        p = cudnn.create_device_properties(form)
        assert (p.device_name, p.compute_capability, p.sm_count) == ("NVIDIA H200", "9.0", 132)
        assert p.serialize() == text
    g, _ = deviceless_graph(cudnn.create_device_properties(text))
    g.validate()


def test_create_device_properties_bad_json_names_the_field():
    broken = json.loads(h200_text())
    del broken["multiProcessorCount"]
    with pytest.raises(ValueError, match="'multiProcessorCount' is missing"):
        cudnn.create_device_properties(json.dumps(broken))
    broken = json.loads(h200_text())
    broken["deviceVer"] = "nine hundred"
    with pytest.raises(ValueError, match="deviceVer"):
        cudnn.create_device_properties(json.dumps(broken))
    with pytest.raises(ValueError, match="does not parse"):
        cudnn.create_device_properties("{\"deviceVer\": 900,")
    with pytest.raises(TypeError, match="device id \\(int\\) or the JSON text"):
        cudnn.create_device_properties(0.5)


def matmul(g):
    A = g.tensor(name="A", dim=[2, 64, 32], stride=[2048, 32, 1], data_type=cudnn.data_type.HALF)
    B = g.tensor(name="B", dim=[2, 32, 48], stride=[1536, 48, 1], data_type=cudnn.data_type.HALF)
    Y = g.relu(g.matmul(A, B))
    Y.set_output(True).set_data_type(cudnn.data_type.HALF)
    return A, B, Y


def deviceless_graph(props):
    g = cudnn.pygraph(device_property=props, io_data_type=cudnn.data_type.HALF,
                      intermediate_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT)
    return g, matmul(g)


def test_deviceless_build_of_an_h200_plan_succeeds_or_says_why():
    g, _ = deviceless_graph(h200())
    g.validate()
    try:
        g.build_operation_graph()
    except cudnn.NotSupportedError as e:
        # No cuDNN, or no CUDA driver library: cuDNN 9.19 finalizes no engine config without it.
        assert "cuDNN" in str(e) or "libcuda.so.1" in str(e), str(e)
        return
    g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    g.check_support()
    g.build_plans()
    data = g.serialize()
    assert b"NVIDIA H200" in bytes(data)


@pytest.mark.skipif(not gpu_visible(), reason="no CUDA device visible to torch")
def test_deviceless_build_then_deserialize_on_the_gpu_runs():
    import torch

    props = cudnn.DeviceProperties()
    props.deserialize(cudnn.create_device_properties(0).serialize())  # as if saved and read back
    g, (A, B, Y) = deviceless_graph(props)
    g.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    rng = np.random.default_rng(7)
    a = torch.tensor(rng.uniform(-1, 1, (2, 64, 32)), dtype=torch.float16, device="cuda")
    b = torch.tensor(rng.uniform(-1, 1, (2, 32, 48)), dtype=torch.float16, device="cuda")
    y = torch.full((2, 64, 48), float("nan"), dtype=torch.float16, device="cuda")
    with pytest.raises(ValueError, match="built without a device"):
        g.execute({A: a, B: b, Y: y})
    uids = (A.get_uid(), B.get_uid(), Y.get_uid())
    data = g.serialize()
    handle = cudnn.create_handle(device="cuda")
    g2 = cudnn.pygraph(handle=handle)
    g2.deserialize(handle, data)
    ws = torch.empty(max(g2.get_workspace_size(), 1), dtype=torch.uint8, device="cuda")
    g2.execute({uids[0]: a, uids[1]: b, uids[2]: y}, ws)
    torch.cuda.synchronize()
    ref = np.maximum(a.double().cpu().numpy() @ b.double().cpu().numpy(), 0)
    np.testing.assert_allclose(y.double().cpu().numpy(), ref, rtol=1e-2, atol=1e-2)
