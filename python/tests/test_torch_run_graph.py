"""torch.ops.dnngraph.run_graph: any graph in the JSON graph format as one op. Inputs bind by
ascending uid to the non-virtual tensors no op produces; outputs are the non-virtual tensors ops
produce, by ascending uid. Numbers against torch with NaN-poisoned outputs, the graph cache, the
fake kernel under torch.compile, opcheck, and the refusals. The GPU test skips without CUDA."""

import json
import os

import pytest

from torch_util import needs_cuda, rand, tol, torch

import dnngraph as cudnn
import dnngraph.torch as dt

HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(HERE, "data", "run_graph_matmul_relu.json")) as f:
    MATMUL_RELU = f.read()

run_graph = torch.ops.dnngraph.run_graph.default


@pytest.fixture(autouse=True)
def _poisoned_outputs():
    previous = torch.ops.dnngraph._run_graph_poison_outputs(True)
    yield
    torch.ops.dnngraph._run_graph_poison_outputs(previous)


def reference(a, b):
    return torch.relu(torch.matmul(a.double(), b.double())).float()


def test_matmul_relu_matches_torch():
    a, b = rand(2, 3, 4), rand(2, 4, 5)
    (y,) = dt.run_graph(MATMUL_RELU, [a, b])
    assert y.shape == (2, 3, 5) and y.stride() == (15, 5, 1) and y.dtype == torch.float32
    assert not torch.isnan(y).any()
    torch.testing.assert_close(y, reference(a, b), **tol(torch.float32))
    assert (y == 0).any() and (y > 0).any()  # the relu did something either way


def test_poisoning_is_on():
    # The fixture's switch: outputs start as NaN, so a graph that wrote nothing would fail above.
    assert torch.ops.dnngraph._run_graph_poison_outputs(True) is True


def test_second_call_is_one_cache_hit():
    dt.clear_cache()
    a, b = rand(2, 3, 4), rand(2, 4, 5)
    run_graph(MATMUL_RELU, [a, b])
    (y,) = run_graph(MATMUL_RELU, [a * 2, b])
    info = dt.cache_info()
    assert (info["size"], info["misses"], info["hits"]) == (1, 1, 1)
    torch.testing.assert_close(y, reference(a * 2, b), **tol(torch.float32))


def test_an_input_in_another_layout_is_read_as_the_graph_says():
    a = rand(2, 4, 3).transpose(1, 2)  # [2,3,4] with strides (12, 1, 3)
    b = rand(2, 4, 5)
    (y,) = run_graph(MATMUL_RELU, [a, b])
    torch.testing.assert_close(y, reference(a, b), **tol(torch.float32))


def graph_json(handle):
    """Z = conv(X, W) * 0.5 (a constant) + Bias, Y = gelu(Z): Z and Y both outputs, NHWC."""
    g = cudnn.pygraph(handle=handle, name="conv_gelu", io_data_type=cudnn.data_type.FLOAT)
    X = g.tensor(name="X", dim=[2, 3, 6, 6], stride=[108, 1, 18, 3], data_type=cudnn.data_type.FLOAT)
    W = g.tensor(name="W", dim=[4, 3, 3, 3], stride=[27, 1, 9, 3], data_type=cudnn.data_type.FLOAT)
    B = g.tensor(name="Bias", dim=[1, 4, 1, 1], stride=[4, 1, 4, 4],
                 data_type=cudnn.data_type.FLOAT)
    conv = g.conv_fprop(image=X, weight=W, padding=[1, 1], stride=[1, 1], dilation=[1, 1])
    Z = g.bias(input=g.mul(a=conv, b=0.5), bias=B)
    Z.set_output(True).set_name("Z")
    Y = g.gelu(input=Z)
    Y.set_output(True).set_name("Y")
    g.validate()
    uids = {t["name"]: t["uid"] for t in json.loads(g.to_json())["tensors"]}
    return g.to_json(), uids


def test_multi_output_graph_with_a_constant(handle):
    text, uids = graph_json(handle)
    x = rand(2, 3, 6, 6).to(memory_format=torch.channels_last)
    w = rand(4, 3, 3, 3).to(memory_format=torch.channels_last)
    bias = rand(1, 4, 1, 1)
    inputs = sorted([("X", x), ("W", w), ("Bias", bias)], key=lambda p: uids[p[0]])
    outs = run_graph(text, [t for _, t in inputs])
    names = sorted(["Z", "Y"], key=lambda n: uids[n])
    got = dict(zip(names, outs))
    z = torch.nn.functional.conv2d(x.double(), w.double(), padding=1) * 0.5 + bias.double()
    torch.testing.assert_close(got["Z"], z.float(), **tol(torch.float32))
    torch.testing.assert_close(got["Y"], torch.nn.functional.gelu(z).float(), **tol(torch.float32))
    assert got["Y"].is_contiguous(memory_format=torch.channels_last)  # the graph's strides


def test_a_dynamic_shape_graph_runs_at_each_shape():
    for m in (3, 7):
        desc = json.loads(MATMUL_RELU)
        desc["dynamic_shape"] = True
        for t in desc["tensors"]:
            if t["name"] in ("a", "ab", "y"):
                t["dim"][1] = m
                t["stride"] = [t["dim"][1] * t["dim"][2], t["dim"][2], 1]
        a, b = rand(2, m, 4), rand(2, 4, 5)
        (y,) = run_graph(json.dumps(desc), [a, b])
        torch.testing.assert_close(y, reference(a, b), **tol(torch.float32))


def test_a_pass_by_value_input_is_read_on_the_host():
    desc = json.loads(MATMUL_RELU)
    desc["tensors"][3]["output"] = False
    desc["tensors"][3]["virtual"] = True  # y is now relu's virtual output ...
    desc["tensors"] += [
        {"name": "s", "uid": 5, "dim": [1], "stride": [1], "data_type": "FLOAT",
         "pass_by_value": True},
        {"name": "z", "uid": 6, "dim": [2, 3, 5], "stride": [15, 5, 1], "data_type": "FLOAT",
         "output": True},
    ]
    desc["nodes"].append({"name": "scale", "kind": "pointwise", "attrs": {"mode": "MUL"},
                          "inputs": {"IN_0": "y", "IN_1": "s"}, "outputs": {"OUT_0": "z"}})
    a, b = rand(2, 3, 4), rand(2, 4, 5)
    (z,) = run_graph(json.dumps(desc), [a, b, torch.tensor(0.75)])  # ... times s, by uid
    torch.testing.assert_close(z, reference(a, b) * 0.75, **tol(torch.float32))
    with pytest.raises(ValueError, match=r"input 2 \('s'\) is a pass-by-value scalar.*2 elements"):
        run_graph(json.dumps(desc), [a, b, torch.ones(2)])


def test_compiles_with_the_fake_kernel():
    a, b = rand(2, 3, 4), rand(2, 4, 5)

    def f(a, b):
        (y,) = run_graph(MATMUL_RELU, [a * 1.5, b])
        return y + 1

    got = torch.compile(f, fullgraph=True, backend="aot_eager")(a, b)
    torch.testing.assert_close(got, reference(a * 1.5, b) + 1, **tol(torch.float32))


def test_meta_tensors_get_the_graph_shapes():
    a = torch.empty(2, 3, 4, device="meta")
    b = torch.empty(2, 4, 5, device="meta")
    (y,) = run_graph(MATMUL_RELU, [a, b])
    assert y.device.type == "meta" and y.shape == (2, 3, 5) and y.dtype == torch.float32


def test_opcheck():
    torch.library.opcheck(run_graph, (MATMUL_RELU, [rand(2, 3, 4), rand(2, 4, 5)]))


def test_no_autograd():
    a, b = rand(2, 3, 4, grad=True), rand(2, 4, 5)
    (y,) = run_graph(MATMUL_RELU, [a, b])
    with pytest.raises(RuntimeError, match="run_graph"):
        y.sum().backward()


def test_refusals_name_the_tensor():
    a, b = rand(2, 3, 4), rand(2, 4, 5)
    with pytest.raises(ValueError, match=r"input 1 \('b'\) has shape \[2, 4, 6\].*expects \[2, 4, 5\]"):
        run_graph(MATMUL_RELU, [a, rand(2, 4, 6)])
    with pytest.raises(ValueError, match=r"input 0 \('a'\) has dtype Double.*expects Float"):
        run_graph(MATMUL_RELU, [a.double(), b])
    with pytest.raises(ValueError, match="has 2 inputs.*but 1 tensors"):
        run_graph(MATMUL_RELU, [a])
    with pytest.raises(ValueError, match="not valid JSON"):
        run_graph("{nope", [a, b])
    broken = json.loads(MATMUL_RELU)
    broken["tensors"][1]["dim"] = [2, 5, 5]  # K no longer matches
    with pytest.raises(ValueError, match="mm"):
        run_graph(json.dumps(broken), [a, rand(2, 5, 5)])


@needs_cuda
def test_matmul_relu_on_cuda():
    a, b = rand(2, 3, 4, device="cuda"), rand(2, 4, 5, device="cuda")
    (y,) = run_graph(MATMUL_RELU, [a, b])
    assert y.device.type == "cuda"
    torch.testing.assert_close(y, reference(a, b), **tol(torch.float32, "cuda"))
    with pytest.raises(ValueError, match="is on cpu"):
        run_graph(MATMUL_RELU, [a, b.cpu()])


@needs_cuda
def test_conv_gelu_on_cuda(handle):
    text, uids = graph_json(handle)
    x = rand(2, 3, 6, 6, device="cuda").to(memory_format=torch.channels_last)
    w = rand(4, 3, 3, 3, device="cuda").to(memory_format=torch.channels_last)
    bias = rand(1, 4, 1, 1, device="cuda")
    inputs = sorted([("X", x), ("W", w), ("Bias", bias)], key=lambda p: uids[p[0]])
    outs = run_graph(text, [t for _, t in inputs])
    got = dict(zip(sorted(["Z", "Y"], key=lambda n: uids[n]), outs))
    z = torch.nn.functional.conv2d(x.double(), w.double(), padding=1) * 0.5 + bias.double()
    torch.testing.assert_close(got["Y"], torch.nn.functional.gelu(z).float(),
                               **tol(torch.float32, "cuda"))
