"""dnngraph.partition(graph, handle): the largest groups of connected ops the handle's engine can
build as one graph (the CPU reference engine takes every graph), each with its standalone graph
in the JSON graph format. Refusals by an engine are covered by the C++ tests (a test engine);
here: the Python surface, the boundary tensors, and partitions run through run_graph."""

import json
import os

import numpy as np
import pytest

import dnngraph as cudnn
from conftest import assert_close, build, conv2d_nchw, poisoned, tensor_of, workspace_for

F32 = cudnn.data_type.FLOAT


def torch_ops():
    """(torch, dnngraph.torch), or a skip when either is missing. The op library is looked for
    before importing: a build tree without it has a bare dnngraph/torch folder, which would
    import as an empty namespace package."""
    torch = pytest.importorskip("torch")
    lib = os.path.join(os.path.dirname(cudnn.__file__), "torch", "libdnngraph_torch.so")
    if not os.path.exists(lib):
        pytest.skip("dnngraph.torch is not built")
    import dnngraph.torch as dt
    return torch, dt


def chain(handle, rng):
    """conv -> bias -> relu -> matmul; the relu's output R is also a graph output."""
    x = rng.standard_normal((1, 2, 5, 5)).astype(np.float32)
    w = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    b = rng.standard_normal((1, 3, 1, 1)).astype(np.float32)
    w2 = rng.standard_normal((1, 3, 5, 4)).astype(np.float32)
    g = cudnn.pygraph(handle=handle, name="chain", io_data_type=F32)
    X, W, B, W2 = (tensor_of(g, a, n) for a, n in ((x, "X"), (w, "W"), (b, "B"), (w2, "W2")))
    conv = g.conv_fprop(image=X, weight=W, padding=[1, 1], stride=[1, 1], dilation=[1, 1],
                        name="conv")
    R = g.relu(input=g.bias(input=conv, bias=B, name="bias"), name="relu")
    R.set_output(True).set_name("R")
    Y = g.matmul(A=R, B=W2, name="mm")
    Y.set_output(True).set_name("Y")
    return g, dict(X=x, W=w, B=b, W2=w2)


def test_a_chain_is_one_supported_partition(handle, rng):
    g, _ = chain(handle, rng)
    parts = cudnn.partition(g, handle)
    assert len(parts) == 1
    p = parts[0]
    assert isinstance(p, cudnn.Partition)
    assert p.ops == ["conv", "bias", "relu", "mm"]
    assert p.op_indices == [0, 1, 2, 3]
    assert p.supported and p.reason == ""
    assert "supported" in repr(p) and "conv" in repr(p)


def test_anchors_decide_what_is_built(handle, rng):
    g, _ = chain(handle, rng)
    (p,) = cudnn.partition(g, handle)
    assert p.supported and p.built
    (p,) = cudnn.partition(g, handle, anchors=["mm"])
    assert p.built and p.reason == ""
    (p,) = cudnn.partition(g, handle, anchors=[])  # given, but none: nothing is built
    assert p.supported and not p.built
    assert p.reason == "not built: it holds none of the anchor ops asked for"
    with pytest.raises(ValueError, match="anchors names op 'nope', which the graph does not have"):
        cudnn.partition(g, handle, anchors=["nope"])


def test_the_handle_defaults_to_the_graphs(handle, rng):
    g, _ = chain(handle, rng)
    assert [p.ops for p in cudnn.partition(g)] == [["conv", "bias", "relu", "mm"]]


def test_the_subgraph_json_runs_like_the_graph(handle, rng):
    torch, dt = torch_ops()
    g, arrays = chain(handle, rng)
    (p,) = cudnn.partition(g, handle)
    desc = json.loads(p.subgraph_json())
    by_name = {t["name"]: t for t in desc["tensors"]}
    for name in ("X", "W", "B", "W2"):
        assert not by_name[name]["virtual"] and not by_name[name]["output"]
    assert by_name["R"]["output"] and by_name["Y"]["output"]
    # The whole graph on the reference engine ...
    build(g)
    r, y = poisoned((1, 3, 5, 5)), poisoned((1, 3, 5, 4))
    pack = {uid_of(g, n): a for n, a in arrays.items()}
    pack.update({uid_of(g, "R"): r, uid_of(g, "Y"): y})
    g.execute(pack, workspace_for(g))
    assert_close(r, np.maximum(conv2d_nchw(arrays["X"], arrays["W"], (1, 1), (1, 1), (1, 1))
                               + arrays["B"], 0), rtol=1e-4)
    # ... and the partition through run_graph: inputs by uid, outputs by uid.
    ins = sorted(("X", "W", "B", "W2"), key=lambda n: by_name[n]["uid"])
    outs = sorted(("R", "Y"), key=lambda n: by_name[n]["uid"])
    got = dt.run_graph(p.subgraph_json(), [torch.from_numpy(arrays[n]) for n in ins])
    got = dict(zip(outs, got))
    assert_close(got["R"].numpy(), r)
    assert_close(got["Y"].numpy(), y)


def uid_of(graph, name):
    for t in json.loads(graph.to_json())["tensors"]:
        if t["name"] == name:
            return t["uid"]
    raise KeyError(name)


def test_unconnected_ops_are_separate_partitions(handle, rng):
    g = cudnn.pygraph(handle=handle, name="two", io_data_type=F32)
    a = tensor_of(g, rng.standard_normal((2, 3)).astype(np.float32), "A")
    b = tensor_of(g, rng.standard_normal((2, 3)).astype(np.float32), "B")
    g.relu(input=a, name="ra").set_output(True)
    g.tanh(input=b, name="tb").set_output(True)
    parts = cudnn.partition(g, handle)
    assert [p.ops for p in parts] == [["ra"], ["tb"]]
    assert all(p.supported for p in parts)


def test_an_op_reading_two_groups_merges_them(handle, rng):
    # relu reads X and tanh X2: two groups, until the add reads both and merges them.
    g = cudnn.pygraph(handle=handle, name="merge", io_data_type=F32)
    x = tensor_of(g, rng.standard_normal((2, 3)).astype(np.float32), "X")
    x2 = tensor_of(g, rng.standard_normal((2, 3)).astype(np.float32), "X2")
    r = g.relu(input=x, name="r")
    t = g.tanh(input=x2, name="t")
    g.add(a=r, b=t, name="s").set_output(True)
    parts = cudnn.partition(g, handle)
    assert [p.ops for p in parts] == [["r", "t", "s"]]


def test_an_invalid_graph_is_a_value_error(handle):
    g = cudnn.pygraph(handle=handle, name="bad", io_data_type=F32)
    a = g.tensor(name="A", dim=[2, 3], stride=[3, 1], data_type=F32)
    b = g.tensor(name="B", dim=[5, 7], stride=[7, 1], data_type=F32)
    g.matmul(A=a, B=b, name="mm").set_output(True)
    with pytest.raises(ValueError, match="mm"):
        cudnn.partition(g, handle)


def partition_io(text):
    """(input uids, output uids) of a standalone graph, in run_graph's order."""
    desc = json.loads(text)
    tensors = desc["tensors"]
    made = {tensors[r]["uid"] for n in desc["nodes"] for r in n["outputs"].values()}
    ins, outs = [], []
    for t in tensors:
        if t["virtual"] or t.get("value") is not None:
            continue
        (outs if t["uid"] in made else ins).append(t["uid"])
    return sorted(ins), sorted(outs)


def run_partitions(parts, values):
    """Runs each partition through run_graph in order; `values` maps uid -> tensor and gains
    every partition's outputs."""
    _, dt = torch_ops()
    for p in parts:
        assert p.supported, p.reason
        ins, outs = partition_io(p.subgraph_json())
        for uid, t in zip(outs, dt.run_graph(p.subgraph_json(), [values[u] for u in ins])):
            values[uid] = t
    return values


def test_unconnected_partitions_run_one_after_the_other(handle, rng):
    torch, _ = torch_ops()
    g = cudnn.pygraph(handle=handle, name="two", io_data_type=F32)
    a = rng.standard_normal((2, 3)).astype(np.float32)
    b = rng.standard_normal((2, 3)).astype(np.float32)
    A, B = tensor_of(g, a, "A"), tensor_of(g, b, "B")
    g.relu(input=A, name="ra").set_output(True).set_name("RA")
    g.tanh(input=B, name="tb").set_output(True).set_name("TB")
    parts = cudnn.partition(g, handle)
    values = run_partitions(parts, {uid_of(g, "A"): torch.from_numpy(a),
                                    uid_of(g, "B"): torch.from_numpy(b)})
    assert_close(values[uid_of(g, "RA")].numpy(), np.maximum(a, 0))
    assert_close(values[uid_of(g, "TB")].numpy(), np.tanh(b.astype(np.float64)))


def _cuda():
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


@pytest.mark.parametrize("device", ["cpu"] + (["cuda"] if _cuda() else []))
def test_bf16_partitions_run_like_torch(device):
    """conv -> bias -> relu (NHWC bf16) is one partition, and so is an unconnected matmul ->
    gelu (on cuDNN too); both run through run_graph on the device, against torch."""
    torch, _ = torch_ops()
    h = cudnn.create_handle(device=device)
    bf = cudnn.data_type.BFLOAT16
    g = cudnn.pygraph(handle=h, name="gpu_two", io_data_type=bf, intermediate_data_type=F32,
                      compute_data_type=F32)
    X = g.tensor(name="X", dim=[4, 32, 8, 8], stride=[2048, 1, 256, 32], data_type=bf)
    W = g.tensor(name="W", dim=[64, 32, 3, 3], stride=[288, 1, 96, 32], data_type=bf)
    B = g.tensor(name="B", dim=[1, 64, 1, 1], stride=[64, 1, 64, 64], data_type=bf)
    conv = g.conv_fprop(image=X, weight=W, padding=[1, 1], stride=[1, 1], dilation=[1, 1],
                        name="conv")
    R = g.relu(input=g.bias(input=conv, bias=B, name="bias"), name="relu")
    R.set_output(True).set_name("R").set_data_type(bf)
    M = g.tensor(name="M", dim=[2, 64, 32], stride=[2048, 32, 1], data_type=bf)
    N = g.tensor(name="N", dim=[2, 32, 48], stride=[1536, 48, 1], data_type=bf)
    Y = g.gelu(input=g.matmul(A=M, B=N, name="mm"), name="act")
    Y.set_output(True).set_name("Y").set_data_type(bf)
    parts = cudnn.partition(g, h)
    assert sorted(p.ops for p in parts) == [["conv", "bias", "relu"], ["mm", "act"]], parts
    x = torch.randn(4, 32, 8, 8, device=device).to(torch.bfloat16, memory_format=torch.channels_last)
    w = (torch.randn(64, 32, 3, 3, device=device) * 0.1).to(torch.bfloat16,
                                                           memory_format=torch.channels_last)
    b = torch.randn(1, 64, 1, 1, device=device).to(torch.bfloat16)
    m = torch.randn(2, 64, 32, device=device).to(torch.bfloat16)
    n = (torch.randn(2, 32, 48, device=device) * 0.2).to(torch.bfloat16)
    values = run_partitions(parts, {uid_of(g, "X"): x, uid_of(g, "W"): w, uid_of(g, "B"): b,
                                    uid_of(g, "M"): m, uid_of(g, "N"): n})
    r = torch.relu(torch.nn.functional.conv2d(x.float(), w.float(), padding=1) + b.float())
    torch.testing.assert_close(values[uid_of(g, "R")].float(), r, atol=5e-2, rtol=2e-2)
    y = torch.nn.functional.gelu(m.float() @ n.float())
    torch.testing.assert_close(values[uid_of(g, "Y")].float(), y, atol=5e-2, rtol=2e-2)
