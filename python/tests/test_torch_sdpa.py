"""dnngraph.torch sdpa: forward/backward vs torch's scaled_dot_product_attention (causal,
additive and boolean masks with bias grads, GQA, custom scale, BSHD strides), gradcheck,
opcheck, torch.compile, the attention module, errors."""

import pytest

from torch_util import (DEVICES, assert_close, assert_grads_close, needs_cuda, rand, ref_dtype,
                        run_without_plans, torch)

import dnngraph.torch as dt
from dnngraph.torch import functional as F

TF = torch.nn.functional


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("gqa", [False, True])
def test_sdpa_forward_backward(device, dtype, causal, gqa, allow_aten_fallback):
    if device == "cuda" and dtype == torch.float32:
        allow_aten_fallback("cuDNN has no fp32 attention: ATen's runs it")
    hk = 2 if gqa else 4
    q = rand(2, 4, 9, 16, dtype=dtype, device=device, grad=True)
    k = rand(2, hk, 11, 16, dtype=dtype, device=device, grad=True)
    v = rand(2, hk, 11, 8, dtype=dtype, device=device, grad=True)
    o = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa)
    rt = ref_dtype(dtype)
    qr, kr, vr = (t.detach().to(rt).requires_grad_() for t in (q, k, v))
    orf = TF.scaled_dot_product_attention(qr, kr, vr, is_causal=causal, enable_gqa=gqa)
    assert_close(o, orf, dtype, device)
    assert_grads_close(o, orf, (q, k, v), (qr, kr, vr), dtype, device, scale=4)


@pytest.mark.parametrize("device", DEVICES)
def test_sdpa_bias_grad_and_scale(device, allow_aten_fallback):
    if device == "cuda":
        allow_aten_fallback("cuDNN has no fp32 attention: ATen's runs it")
    q, k, v = (rand(2, 3, 7, 8, device=device, grad=True) for _ in range(3))
    bias = rand(1, 3, 7, 7, device=device, grad=True)
    o = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=0.2)
    qr, kr, vr, br = (t.detach().clone().requires_grad_() for t in (q, k, v, bias))
    orf = TF.scaled_dot_product_attention(qr, kr, vr, attn_mask=br, scale=0.2)
    assert_close(o, orf, torch.float32, device)
    assert_grads_close(o, orf, (q, k, v, bias), (qr, kr, vr, br), torch.float32, device, scale=4)


def test_bool_mask_and_bshd_strides():
    # [B, S, H, D] storage seen as [B, H, S, D]: the usual projection layout.
    q, k, v = (rand(2, 6, 4, 8).transpose(1, 2) for _ in range(3))
    assert not q.is_contiguous()
    mask = torch.rand(6, 6, generator=torch.Generator().manual_seed(6)) > 0.3
    mask[:, 0] = True  # no fully masked row
    assert_close(
        F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
        TF.scaled_dot_product_attention(q, k, v, attn_mask=mask),
        torch.float32,
    )


def test_logsumexp_output():
    q, k, v = (rand(1, 2, 5, 4, dtype=torch.float64) for _ in range(3))
    out, lse = torch.ops.dnngraph.sdpa(q, k, v, None, 0.0, False, None, False)
    s = q @ k.transpose(-2, -1) / 2.0
    torch.testing.assert_close(lse, torch.logsumexp(s, -1))
    torch.testing.assert_close(out, torch.softmax(s, -1) @ v)


def test_gradcheck_fp64():
    d = torch.float64
    q = rand(1, 4, 5, 6, dtype=d, grad=True)
    k, v = rand(1, 2, 7, 6, dtype=d, grad=True), rand(1, 2, 7, 3, dtype=d, grad=True)
    assert torch.autograd.gradcheck(
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True), (q, k, v)
    )
    bias = rand(1, 1, 5, 7, dtype=d, grad=True)
    assert torch.autograd.gradcheck(
        lambda q, k, v, b: F.scaled_dot_product_attention(q, k, v, attn_mask=b, enable_gqa=True),
        (q, k, v, bias),
    )


def test_opcheck_every_sdpa_op():
    d = torch.float64
    q, k, v = (rand(1, 2, 5, 4, dtype=d, grad=True) for _ in range(3))
    bias = rand(1, 2, 5, 5, dtype=d, grad=True)
    torch.library.opcheck(torch.ops.dnngraph.sdpa.default, (q, k, v, None, 0.0, True, None, False))
    torch.library.opcheck(torch.ops.dnngraph.sdpa.default, (q, k, v, bias, 0.0, False, 0.3, False))
    qd, kd, vd = q.detach(), k.detach(), v.detach()
    out, lse = torch.ops.dnngraph.sdpa(qd, kd, vd, None, 0.0, True, None, False)
    torch.library.opcheck(
        torch.ops.dnngraph.sdpa_backward.default,
        (rand(1, 2, 5, 4, dtype=d), qd, kd, vd, out, lse, None, 0.0, True, None, False),
    )


def test_compile_fullgraph_attention_module():
    ref = torch.nn.MultiheadAttention(16, 4, batch_first=True)
    ours = dt.MultiheadAttention(16, 4)
    ours.load_state_dict(ref.state_dict())
    x = rand(2, 5, 16, grad=True)
    f = torch.compile(lambda x: ours(x, x, x, is_causal=True)[0].sum(), fullgraph=True)
    loss = f(x)
    loss.backward()
    xr = x.detach().clone().requires_grad_()
    mask = torch.nn.Transformer.generate_square_subsequent_mask(5)
    ref_loss = ref(xr, xr, xr, attn_mask=mask, is_causal=True, need_weights=False)[0].sum()
    ref_loss.backward()
    assert_close(loss, ref_loss, torch.float32, scale=4)
    assert_close(x.grad, xr.grad, torch.float32, scale=4)


def test_aten_paths_keep_the_layouts_the_meta_kernels_promise():
    """Where the engine has no plan (fp32 attention on cuDNN, a head dim it lacks), ATen computes
    the attention: its results come back in the layouts of the graph path, which the Meta
    kernels promise, so torch.compile (it checks them) and the heads merge (a view) still work."""
    code = """
import torch, dnngraph.torch as dt
ops = torch.ops.dnngraph
q, k, v = (torch.randn(2, 5, 4, 8).transpose(1, 2) for _ in "qkv")  # heads inside: [B, S, H, D]
out, lse = ops.sdpa(q, k, v, None, 0.0, True)
fake = ops.sdpa(*(t.to("meta") for t in (q, k, v)), None, 0.0, True)
assert out.stride() == fake[0].stride() and lse.stride() == fake[1].stride(), (out.stride(), fake[0].stride())
grads = ops.sdpa_backward(torch.randn_like(out), q, k, v, out, lse, None, 0.0, True, None, False)
fake = ops.sdpa_backward(*(t.to("meta") for t in (out, q, k, v, out, lse)), None, 0.0, True, None, False)
assert [g.stride() for g in grads[:3]] == [f.stride() for f in fake[:3]]
torch.library.opcheck(ops.sdpa.default, (q, k, v, None, 0.0, True))
mha = dt.MultiheadAttention(16, 4)
x = torch.randn(2, 5, 16, requires_grad=True)
torch.compile(lambda x: mha(x, x, x, is_causal=True)[0].sum(), fullgraph=True)(x).backward()
assert torch.isfinite(x.grad).all()
print("OK")
"""
    run_without_plans(code)


@needs_cuda
def test_aten_flash_path_keeps_causal_top_left_when_queries_and_keys_differ():
    """ATen's flash attention masks causally from the bottom right; this op (as torch's is_causal)
    from the top left: with fewer queries than keys (a decode step) or more, the ATen path must
    not take flash. Checked with every plan refused, forward and backward, fp16 on the GPU."""
    code = """
import torch, dnngraph.torch
from dnngraph.torch import functional as F
torch.manual_seed(0)
for sq, skv in ((1, 16), (3, 16), (16, 5)):
    q = torch.randn(1, 2, sq, 64, device="cuda", dtype=torch.float16, requires_grad=True)
    k, v = (torch.randn(1, 2, skv, 64, device="cuda", dtype=torch.float16, requires_grad=True) for _ in "kv")
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    qr, kr, vr = (t.detach().double().requires_grad_() for t in (q, k, v))
    mask = torch.ones(sq, skv, dtype=torch.bool, device="cuda").tril()
    ref = torch.nn.functional.scaled_dot_product_attention(qr, kr, vr, attn_mask=mask)
    ok = mask.any(-1)  # rows with no key to see: torch's math gives NaN, skip them
    assert torch.allclose(out.double()[..., ok, :], ref[..., ok, :], atol=2e-2, rtol=2e-2), (sq, skv)
    dy = torch.randn_like(out)
    out.backward(dy)
    (ref[..., ok, :] * dy.double()[..., ok, :]).sum().backward()
    for g, gr in ((q.grad[..., ok, :], qr.grad[..., ok, :]), (k.grad, kr.grad), (v.grad, vr.grad)):
        assert torch.allclose(g.double(), gr, atol=5e-2, rtol=5e-2), (sq, skv)
print("OK")
"""
    run_without_plans(code)


def test_errors():
    q = rand(1, 2, 3, 4)
    with pytest.raises(NotImplementedError, match="dropout_p"):
        F.scaled_dot_product_attention(q, q, q, dropout_p=0.1)
    with pytest.raises(ValueError, match="enable_gqa"):
        F.scaled_dot_product_attention(rand(1, 4, 3, 4), q, q)
    with pytest.raises(ValueError, match="4-D"):
        F.scaled_dot_product_attention(rand(2, 3, 4), rand(2, 3, 4), rand(2, 3, 4))
    with pytest.raises(ValueError, match="attn_bias of shape"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=rand(3, 5))


# ---------------------------------------------------------------- the op's graphs vs the Python API's


def _canonical(graph_json):
    """A graph's JSON with tensor names and uids left out: each node's ports hold the tensors'
    attributes, the tensors' order is kept as (node, port) pairs."""
    import json

    j = json.loads(graph_json)
    ts = j["tensors"]
    where = {}
    nodes = []
    for n in j["nodes"]:
        node = {k: v for k, v in n.items() if k not in ("name", "inputs", "outputs")}
        for side in ("inputs", "outputs"):
            node[side] = {}
            for port, i in n[side].items():
                t = {k: v for k, v in ts[i].items() if k not in ("name", "uid")}
                node[side][port] = t
                where.setdefault(i, (n["kind"], port))
        nodes.append(node)
    g = {k: v for k, v in j.items() if k not in ("name", "tensors", "nodes")}
    return dict(g, nodes=nodes, tensor_order=[where.get(i) for i in range(len(ts))])


@pytest.mark.parametrize("causal", [True, False])
def test_backward_graph_is_the_python_apis(causal):
    """The graph sdpa_backward builds equals (modulo names and uids) the one the Python API
    builds with pygraph.sdpa_backward for the same tensors: dims, strides, data types (stats
    fp32 [B, H, S, 1]), io/intermediate/compute types, the scale as a value, the causal mask's
    attributes, virtual and output flags, the tensors' order."""
    import math

    import dnngraph as cudnn

    b, h, s, d = 2, 16, 128, 64
    q, k, v = (rand(b, h, s, d, dtype=torch.bfloat16, grad=True) for _ in range(3))
    dt.clear_cache()
    o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    do = rand(*o.shape, dtype=torch.bfloat16)
    o.backward(do)
    (ours,) = torch.ops.dnngraph._graph_json("sdpa_backward")
    (ours_fwd,) = torch.ops.dnngraph._graph_json("sdpa")

    qd, kd, vd = q.detach(), k.detach(), v.detach()
    out, lse = torch.ops.dnngraph.sdpa(qd, kd, vd, None, 0.0, causal, None, False)
    handle = cudnn.create_handle(device="cpu")

    def new_graph():
        return cudnn.pygraph(handle=handle, io_data_type=cudnn.data_type.BFLOAT16,
                             intermediate_data_type=cudnn.data_type.FLOAT,
                             compute_data_type=cudnn.data_type.FLOAT)

    scale = 1 / math.sqrt(d)
    g = new_graph()
    Q, K, V = g.tensor_like(qd, "Q"), g.tensor_like(kd, "K"), g.tensor_like(vd, "V")
    O, ST = g.sdpa(q=Q, k=K, v=V, is_inference=False, attn_scale=scale, use_causal_mask=causal)
    O.set_output(True).set_dim(list(out.shape)).set_stride(list(out.stride()))
    ST.set_output(True)
    g.validate()
    assert _canonical(ours_fwd) == _canonical(g.to_json())

    g = new_graph()
    Q, K, V = g.tensor_like(qd, "Q"), g.tensor_like(kd, "K"), g.tensor_like(vd, "V")
    O, DO = g.tensor_like(out, "O"), g.tensor_like(do, "dO")
    ST = g.tensor_like(lse.unsqueeze(-1), "stats")
    DQ, DK, DV = g.sdpa_backward(q=Q, k=K, v=V, o=O, dO=DO, stats=ST, attn_scale=scale,
                                 use_causal_mask=causal)
    for T, t in ((DQ, qd), (DK, kd), (DV, vd)):
        T.set_output(True).set_dim(list(t.shape)).set_stride(list(t.stride()))
    g.validate()
    theirs = _canonical(g.to_json())
    mine = _canonical(ours)
    assert mine == theirs
    attrs = mine["nodes"][0]["attrs"]
    assert attrs["causal"] is causal and attrs["attn_scale"] == scale
    assert mine["nodes"][0]["inputs"]["STATS"]["data_type"] == "FLOAT"
    # And it computes what torch computes.
    qr, kr, vr = (t.detach().double().requires_grad_() for t in (q, k, v))
    TF.scaled_dot_product_attention(qr, kr, vr, is_causal=causal).backward(do.double())
    for gr, ref in ((q.grad, qr.grad), (k.grad, kr.grad), (v.grad, vr.grad)):
        assert_close(gr, ref, torch.bfloat16, scale=4)
