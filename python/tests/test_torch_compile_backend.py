"""torch.compile(backend="dnngraph") on the CPU (reference engine): ATen FX patterns fused into
dnngraph graphs, forward and backward against eager, partition boundaries, fallback to the inner
compiler, dynamic shapes, graph breaks, explain()."""

import copy
import json
import operator
import os

import pytest
from torch_util import (  # noqa: F401  (skips without dnngraph.torch; fresh_dynamo: a fixture)
    assert_close, assert_no_worse_than_eager, fresh_dynamo, needs_cuda, rand, torch)

import torch.nn as nn
import torch.nn.functional as F

import dnngraph.torch as dt
from dnngraph.torch.compile import _backend, _fxpass, explain, make_backend

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def _run_graph_calls(fn):
    """(result, number of run_graph calls) of fn()."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        out = fn()
    calls = sum(1 for e in prof.events() if _is_run_graph(e) and not _nested(e))
    return out, calls


def _is_run_graph(e):
    return e.name.endswith("::run_graph")


def _nested(e):
    """A run_graph event inside another (a dispatch mode re-dispatching the same call)."""
    p = e.cpu_parent
    while p is not None:
        if _is_run_graph(p):
            return True
        p = p.cpu_parent
    return False


def _grads(model, inputs):
    leaves = [t for t in inputs if isinstance(t, torch.Tensor) and t.requires_grad]
    if isinstance(model, nn.Module):
        leaves += [p for p in model.parameters() if p.requires_grad]
    return leaves


def _float64_run(model, inputs, backward):
    """(output, gradients) of a float64 copy of ``model`` on float64 copies of ``inputs``."""
    import copy

    exact = copy.deepcopy(model).double() if isinstance(model, nn.Module) else model
    wide = [t.detach().double().requires_grad_(t.requires_grad)
            if isinstance(t, torch.Tensor) and t.is_floating_point() else t for t in inputs]
    out = exact(*wide)
    if backward:
        w = torch.linspace(0.5, 1.5, out.numel(), device=out.device).view(out.shape)
        (out * w.double()).sum().backward()
    return out, [t.grad for t in _grads(exact, wide)] if backward else []


def check(model, *inputs, inner="eager", backward=True, dtype=torch.float32, scale=1.0,
          fused=True, pointwise=False, against_float64=False, blocks=True, **compile_kw):
    """Runs ``model`` eagerly and compiled with the dnngraph backend, compares outputs (and
    gradients of every input and parameter), and returns the reports and run_graph call count
    of the compiled run. ``against_float64``: both runs are compared with a float64 run instead
    (assert_no_worse_than_eager: bf16 ReLU masks flip on a few elements in either)."""
    exact = _float64_run(model, inputs, backward) if against_float64 else None
    leaves = _grads(model, inputs)
    for t in leaves:
        t.grad = None
    ref = model(*inputs)
    if backward:
        w = torch.linspace(0.5, 1.5, ref.numel(), device=ref.device).view(ref.shape)
        (ref.float() * w).sum().backward()
    ref_grads = [t.grad.clone() for t in leaves] if backward else []
    for t in leaves:
        t.grad = None
    backend = make_backend(inner, fuse_pointwise=pointwise, blocks=blocks)
    compiled = torch.compile(model, backend=backend, **compile_kw)

    def step():
        out = compiled(*inputs)
        if backward:
            w = torch.linspace(0.5, 1.5, out.numel(), device=out.device).view(out.shape)
            (out.float() * w).sum().backward()
        return out

    with _backend.collect_reports() as reports:
        out, calls = _run_graph_calls(step)
    if exact is not None:
        assert_no_worse_than_eager(out, ref, exact[0], "output")
        for k, (t, g, g64) in enumerate(zip(leaves, ref_grads, exact[1])):
            assert t.grad is not None
            assert_no_worse_than_eager(t.grad, g, g64, f"gradient {k}")
    else:
        assert_close(out, ref, dtype, device=out.device.type, scale=scale)
        for t, g in zip(leaves, ref_grads):
            assert t.grad is not None
            assert_close(t.grad, g, dtype, device=out.device.type, scale=scale)
    if fused:
        assert calls > 0, "no dnngraph graph ran"
    return list(reports), calls


def _fused_ops(reports, graph_prefix=""):
    return [
        d.op for r in reports if r.graph.startswith(graph_prefix)
        for d in r.decisions if d.partition is not None
    ]


# ---- patterns ------------------------------------------------------------------------------


class ConvBiasRelu(nn.Module):
    def __init__(self, cin=4, cout=8):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=1)

    def forward(self, x):
        return F.relu(self.conv(x))


def test_conv_bias_relu_forward_backward():
    x = rand(2, 4, 8, 8, grad=True)
    reports, calls = check(ConvBiasRelu(), x)
    fw = _fused_ops(reports, "forward")
    assert "aten.convolution.default" in fw and "aten.relu.default" in fw
    bw = _fused_ops(reports, "backward")
    assert "aten.convolution_backward.default" in bw
    assert "aten.threshold_backward.default" in bw
    assert calls == 2


def test_conv_channels_last_and_stride():
    m = nn.Sequential(nn.Conv2d(4, 8, 3, stride=2, padding=1), nn.SiLU())
    m = m.to(memory_format=torch.channels_last)
    x = rand(2, 4, 9, 9).contiguous(memory_format=torch.channels_last).requires_grad_(True)
    check(m, x)


def test_linear_gelu_2d():
    m = nn.Sequential(nn.Linear(16, 32), nn.GELU())
    reports, _ = check(m, rand(4, 16, grad=True))
    fw = _fused_ops(reports, "forward")
    assert "aten.addmm.default" in fw and "aten.gelu.default" in fw


def test_linear_gelu_tanh_3d_through_views():
    # [B, S, D] linear: view -> addmm -> view -> gelu: the views stay inside the partition.
    m = nn.Sequential(nn.Linear(16, 32), nn.GELU(approximate="tanh"), nn.Linear(32, 16))
    reports, _ = check(m, rand(2, 5, 16, grad=True))
    fw = _fused_ops(reports, "forward")
    assert fw.count("aten.addmm.default") == 2 and "aten.gelu.default" in fw
    assert "aten.gelu_backward.default" in _fused_ops(reports, "backward")


def test_addmm_alpha_beta_epilogue():
    def f(b, x, w):
        return torch.relu(torch.addmm(b, x, w, beta=0.5, alpha=2.0)) * 3.0

    reports, _ = check(f, rand(8, grad=True), rand(4, 6, grad=True), rand(6, 8, grad=True))
    assert "aten.addmm.default" in _fused_ops(reports, "forward")


def test_bmm_baddbmm_scale():
    def f(a, b, c):
        return torch.sigmoid(torch.baddbmm(c, a, b, alpha=0.5)) + torch.bmm(a, b) / 4.0

    check(f, rand(3, 4, 5, grad=True), rand(3, 5, 6, grad=True), rand(3, 4, 6, grad=True))


def test_layer_norm_forward_backward_residual():
    ln = nn.LayerNorm(32)
    with torch.no_grad():
        ln.weight.uniform_(0.5, 1.5)
        ln.bias.uniform_(-0.5, 0.5)

    def f(x, r):
        return ln(x + r) * 2.0 + x

    reports, _ = check(f, rand(2, 7, 32, grad=True), rand(2, 7, 32, grad=True))
    assert "aten.native_layer_norm.default" in _fused_ops(reports, "forward")
    assert "aten.native_layer_norm_backward.default" in _fused_ops(reports, "backward")


def test_layer_norm_backward_unused_gradient_bf16():
    # No gradient for the bias: the norm backward's dbias is written and dropped.
    ln = nn.LayerNorm(32).to(torch.bfloat16)
    ln.bias.requires_grad_(False)
    lin = nn.Linear(32, 32).to(torch.bfloat16)
    reports, _ = check(lambda x: lin(ln(x)) + 1.0, rand(4, 32, dtype=torch.bfloat16, grad=True),
                       dtype=torch.bfloat16)
    assert "aten.native_layer_norm_backward.default" in _fused_ops(reports, "backward")


def test_rms_norm_forward_backward():
    norm = nn.RMSNorm(32, eps=1e-6)
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
    lin = nn.Linear(32, 32)

    def f(x):
        return lin(norm(x))

    reports, _ = check(f, rand(3, 5, 32, grad=True))
    fw = _fused_ops(reports, "forward")
    assert "rms_norm_pattern" in fw


def test_sdpa_causal_forward_backward():
    def f(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True) * 2.0

    q, k, v = (rand(2, 3, 8, 16, grad=True) for _ in range(3))
    reports, _ = check(f, q, k, v)
    fw = _fused_ops(reports, "forward")
    assert any("scaled_dot_product" in op for op in fw)
    assert any("scaled_dot_product" in op for op in _fused_ops(reports, "backward"))


def test_attention_block_with_projections():
    class Attn(nn.Module):
        def __init__(self, d=32, h=4):
            super().__init__()
            self.h, self.qkv, self.o = h, nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.ln = nn.LayerNorm(d)

        def forward(self, x):
            b, s, d = x.shape
            q, k, v = self.qkv(self.ln(x)).split(d, dim=-1)
            q, k, v = (t.view(b, s, self.h, d // self.h).transpose(1, 2) for t in (q, k, v))
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return x + self.o(a.transpose(1, 2).reshape(b, s, d))

    check(Attn(), rand(2, 8, 32, grad=True))


def test_residual_adds_and_scalars():
    def f(x, y):
        h = x + y * 0.5
        h = h - 1.0 + torch.relu(h) / 3.0
        return torch.tanh(h) + x

    reports, calls = check(f, rand(4, 8, grad=True), rand(4, 8, grad=True), pointwise=True)
    assert "aten.tanh_backward.default" in _fused_ops(reports, "backward")


def test_pointwise_only_left_to_inner_compiler():
    def f(x, y):
        return torch.tanh(x + y * 0.5) + x

    reports, calls = check(f, rand(4, 8, grad=True), rand(4, 8, grad=True), fused=False)
    assert calls == 0
    reasons = {d.reason for r in reports for d in r.decisions if d.op == "aten.tanh.default"}
    assert reasons == {"pointwise/reduction ops only: left to the inner compiler, which fuses them"}


def test_broadcast_operands():
    def f(x, b, c):
        return torch.sigmoid(x * b + c) * x

    check(f, rand(2, 3, 8, grad=True), rand(8, grad=True), rand(3, 1, grad=True), pointwise=True)


def test_reductions_without_keepdim():
    def f(x):
        m = x.mean(dim=-1)
        s = x.sum(dim=(0, 2))
        a = torch.amax(x, dim=1, keepdim=True)
        return (x - m.unsqueeze(-1)) * a + s.view(1, -1, 1)

    check(f, rand(2, 3, 4, grad=True), backward=False, pointwise=True)


def test_where_with_a_mask_made_inside():
    def f(x, y):
        return torch.where(x > 0.25, x * 2.0, y) + torch.where(y <= x, y, x)

    # Forward only: in training the backward saves the masks, which then leave the graph (a
    # torch bool tensor cannot be written: dnngraph's BOOLEAN is bit-packed) and stay in ATen.
    reports, _ = check(f, rand(4, 8), rand(4, 8), backward=False, pointwise=True)
    assert "aten.where.self" in _fused_ops(reports)


def test_where_with_a_mask_from_outside_stays():
    def f(x, y, m):
        return torch.where(m, x, y) * 2.0 + torch.relu(x @ y.t())[:, :1]

    reports, _ = check(f, rand(4, 8), rand(4, 8), torch.rand(4, 8) > 0.5, backward=False,
                       pointwise=True)
    (d,) = [d for d in reports[0].decisions if d.op == "aten.where.self"]
    assert d.partition is None and "bit-packed" in d.reason


def test_silu_sigmoid_and_casts_bf16():
    def f(x, w):
        h = F.silu(x @ w)
        return (torch.sigmoid(h.float()) * 2.0).to(torch.bfloat16)

    x = rand(4, 16, dtype=torch.bfloat16, grad=True)
    w = rand(16, 8, dtype=torch.bfloat16, grad=True)
    check(f, x, w, dtype=torch.bfloat16)


def test_conv_resnet_block():
    class Basic(nn.Module):
        def __init__(self, c=8):
            super().__init__()
            self.c1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
            self.c2 = nn.Conv2d(c, c, 3, padding=1)

        def forward(self, x):
            return F.relu(x + self.c2(F.relu(self.c1(x))))

    # The ATen-level partitions (the block rewrite, tested in test_torch_compile_blocks.py, off)
    check(Basic(), rand(2, 8, 6, 6, grad=True), blocks=False)


@pytest.mark.parametrize("bias", [True, False])
def test_batch_norm_inference_joins_conv(bias):
    """The batch norm's scale folds into the convolution's weight (and bias): the graph is the
    convolution, one add and the ReLU; the per-channel constants and the scaled weight are
    computed in ATen."""
    m = nn.Sequential(nn.Conv2d(4, 8, 3, bias=bias), nn.BatchNorm2d(8), nn.ReLU()).eval()
    with torch.no_grad():
        m[1].weight.uniform_(0.5, 1.5)
        m[1].bias.uniform_(-0.5, 0.5)
        m[1].running_mean.uniform_(-1, 1)
        m[1].running_var.uniform_(0.5, 2)
        reports, calls = check(m, rand(2, 4, 8, 8), backward=False)
    assert calls == 1
    assert sorted(_fused_ops(reports)) == [
        "aten.add.Tensor", "aten.convolution.default", "aten.relu.default"]
    kept = {d.reason for d in reports[0].decisions if d.op in ("aten.rsqrt.default", "aten.mul.Tensor")}
    # Computed from parameters alone: once, then kept (test_torch_compile_prologue.py).
    assert kept == {"per-channel batch-norm constants: computed in ATen" + _backend.KEPT}


def test_batch_norm_inference_after_shared_conv_keeps_scale():
    """A convolution whose output another op reads too keeps its weight: the batch norm stays
    ``x * scale + shift`` in the convolution's graph."""
    class Two(nn.Module):
        def __init__(self):
            super().__init__()
            self.c, self.bn = nn.Conv2d(4, 8, 3), nn.BatchNorm2d(8)

        def forward(self, x):
            y = self.c(x)
            return F.relu(self.bn(y)) * y.sigmoid()

    m = Two().eval()
    with torch.no_grad():
        m.bn.weight.uniform_(0.5, 1.5)
        m.bn.running_var.uniform_(0.5, 2)
        reports, calls = check(m, rand(2, 4, 8, 8), backward=False)
    fused = _fused_ops(reports)
    assert fused.count("aten.convolution.default") == 1 and "aten.mul.Tensor" in fused


@pytest.mark.parametrize("bias_first", [True, False])
def test_residual_added_before_the_bias(bias_first):
    """``conv + bias + residual`` becomes ``conv + residual + bias`` (the form cuDNN runs as a
    GEMM with the residual as its C matrix); written the other way round it stays so. Either way
    the whole is one fused graph and the result is eager's."""
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.aot_autograd import make_boxed_func

    from dnngraph.torch.compile._canonical import canonicalize

    firsts, reports = [], []

    def fw(gm, example_inputs):
        canonicalize(gm)
        (conv,) = [n for n in gm.graph.nodes if n.target is torch.ops.aten.convolution.default]
        (add,) = conv.users
        firsts.append([a.op for a in add.args])  # the residual is a placeholder, the bias a view
        reports.append(_fxpass.run_pass(gm))
        return make_boxed_func(gm.forward)

    def f(x, w, r, b):
        y = F.conv2d(x, w)
        y = (y + b.view(1, -1, 1, 1)) + r if bias_first else (y + r) + b.view(1, -1, 1, 1)
        return torch.relu(y)

    args = (rand(2, 4, 5, 5), rand(8, 4, 1, 1), rand(2, 8, 5, 5), rand(8))
    with torch.no_grad():
        got = torch.compile(f, backend=aot_autograd(fw_compiler=fw))(*args)
    assert_close(got, f(*args), torch.float32)
    (first,) = firsts
    assert first == ["call_function", "placeholder"]
    (report,) = reports
    assert len(report.partitions) == 1 and len(report.partitions[0]) == 4, report.partitions


def test_cuda_attention_forms_rewritten(monkeypatch):
    # The CUDA flash-attention ops, traced on fake CUDA tensors: forward and backward become
    # one run_graph; the kernel's random-number state the backward reads becomes empty tensors.
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx

    aten = torch.ops.aten

    def f(q, k, v):
        r = aten._scaled_dot_product_flash_attention.default(q, k, v, 0.0, True)
        o = r[0] * 2.0
        dq, dk, dv = aten._scaled_dot_product_flash_attention_backward.default(
            o, q, k, v, r[0], r[1], r[2], r[3], r[4], r[5], 0.0, True, r[6], r[7])
        return o, r[1], r[6], r[7], dq + 1.0, dk, dv

    with FakeTensorMode(allow_non_fake_inputs=True):
        qkv = [torch.empty(2, 4, 16, 64, dtype=torch.bfloat16, device="cuda") for _ in range(3)]
        gm = make_fx(f, tracing_mode="fake")(*qkv)
    monkeypatch.setattr(_fxpass, "device_of", lambda nodes: torch.device("cpu"))
    report = _fxpass.run_pass(gm)
    assert len(report.partitions) == 1
    targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert sum(1 for t in targets if "run_graph" in str(t)) == 1
    assert not any("flash_attention" in str(t) for t in targets)
    assert targets.count(torch.ops.aten.empty_strided.default) == 2


# ---- boundaries, fallback, explain ------------------------------------------------------------


def test_graph_break_both_sides_fused():
    def f(x):
        h = torch.relu(x * 2.0 + 1.0)
        torch._dynamo.graph_break()
        return torch.sigmoid(h - 0.5) * 3.0

    reports, calls = check(f, rand(4, 8, grad=True), pointwise=True)
    fw = [r for r in reports if r.graph.startswith("forward")]
    assert len(fw) == 2 and all(r.partitions for r in fw)
    assert calls == 4  # two forward graphs, two backward graphs


def test_unmapped_op_splits_partitions():
    def f(x):
        h = torch.relu(x * 2.0 + 1.0)
        h = torch.cumsum(h, dim=-1)  # not mapped: stays in ATen between two partitions
        return torch.sigmoid(h - 0.5) * 3.0

    reports, _ = check(f, rand(4, 8, grad=True), backward=False, pointwise=True)
    (r,) = reports
    assert len(r.partitions) == 2
    (cumsum,) = [d for d in r.decisions if "cumsum" in d.op]
    assert cumsum.partition is None and cumsum.reason == "op not mapped"


def test_single_op_stays_in_aten():
    reports, calls = check(lambda x, y: x + y, rand(4, 8), rand(4, 8), backward=False,
                           fused=False)
    assert calls == 0
    (d,) = [d for d in reports[0].decisions if d.op == "aten.add.Tensor"]
    assert d.partition is None and d.reason.startswith("single op")


@pytest.mark.parametrize("merged", [False, True], ids=["torch-default", "horizontal-merge"])
def test_unmappable_nodes_of_separate_candidates_are_refused_in_one_round(monkeypatch, merged):
    """Two candidates that each fail to lower (a view the graph would need to reshape): both
    failures are found in one planning round and refused together, so the graph is planned
    twice, not once per failure; the results are eager's. "horizontal-merge": torch's
    partitioner merges the unconnected ops into one candidate (as torch without
    skip_horizontal_fusion does) and the backend splits it into its connected parts."""
    if merged:
        monkeypatch.setattr(_fxpass, "_NO_HORIZONTAL", {})
    rounds = []
    real = _fxpass._plan

    def counted(*args):
        rounds.append(1)
        return real(*args)

    monkeypatch.setattr(_fxpass, "_plan", counted)
    w = rand(16, 8)

    def f(x, y):
        a = (torch.relu(x) * 2.0).view(-1, 16) @ w
        b = (torch.sigmoid(y) * 3.0).view(-1, 16) @ w
        return a + 1.0, b - 1.0

    x, y = rand(2, 4, 16), rand(2, 4, 16)
    with torch.no_grad(), _backend.collect_reports() as reports:
        got = torch.compile(f, backend=make_backend("eager"))(x, y)
    for g, want in zip(got, f(x, y)):
        assert_close(g, want, torch.float32)
    assert len(rounds) == 2
    assert len({d.partition for r in reports for d in r.decisions if d.partition is not None}) == 2


def test_engine_refusal_keeps_ops_in_aten(monkeypatch):
    real = _fxpass.partition_graph

    class Refused:
        def __init__(self, p):
            self.ops, self.op_indices = p.ops, p.op_indices
            self.supported, self.built, self.reason = False, False, "test engine: no tanh"

    def picky(graph, handle, anchors=None):
        parts = real(graph, handle, anchors)
        return [Refused(p) if "tanh" in graph.to_json() else p for p in parts]

    monkeypatch.setattr(_fxpass, "partition_graph", picky)
    reports, calls = check(lambda x: torch.tanh(x * 2.0) + 1.0, rand(4, 8), backward=False,
                           fused=False, pointwise=True)
    assert calls == 0
    reasons = {d.reason for d in reports[0].decisions if d.op == "aten.tanh.default"}
    assert reasons == {"engine refused: test engine: no tanh"}


def test_engine_split_into_partitions(monkeypatch):
    # An engine that takes each candidate as two partitions (the first half of its ops in
    # topological order, then the rest): the second reads the first's outputs.
    real = _fxpass.partition_graph

    class Part:
        def __init__(self, ops):
            self.ops, self.supported, self.built, self.reason = ops, True, True, ""

    def halves(graph, handle, anchors=None):
        out = []
        for p in real(graph, handle, anchors):
            if p.supported and len(p.ops) >= 4:
                k = len(p.ops) // 2
                out += [Part(p.ops[:k]), Part(p.ops[k:])]
            else:
                out.append(p)
        return out

    monkeypatch.setattr(_fxpass, "partition_graph", halves)
    m = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 16), nn.LayerNorm(16))
    reports, calls = check(m, rand(2, 5, 16, grad=True))
    fw = [r for r in reports if r.graph.startswith("forward")]
    assert len(fw[0].partitions) == 2
    assert calls >= 3


def test_only_anchored_groups_are_built(monkeypatch):
    """The backend asks the engine to build only groups its gain rule can claim: a pointwise
    chain next to a GEMM comes back unbuilt, and stays with the inner compiler for the gain
    rule's reason."""
    real = _fxpass.partition_graph
    seen = []

    def spy(graph, handle, anchors=None):
        parts = real(graph, handle, anchors)
        seen.append((anchors, parts))
        return parts

    monkeypatch.setattr(_fxpass, "partition_graph", spy)

    def f(x, w, z):
        return torch.relu(x @ w) + 1.0, torch.tanh(torch.sigmoid(z) * 3.0)

    reports, calls = check(lambda x, w, z: torch.cat([t.flatten() for t in f(x, w, z)]),
                           rand(4, 8), rand(8, 3), rand(5), backward=False)
    assert seen and all(anchors is not None for anchors, _ in seen)
    for anchors, parts in seen:  # built: exactly the supported partitions holding an anchor
        for p in parts:
            assert p.built == (p.supported and bool(set(p.ops) & set(anchors))), (anchors, p)
    parts = [p for _, ps in seen for p in ps]
    assert any(p.built for p in parts)
    unbuilt = [p for p in parts if p.supported and not p.built]
    assert unbuilt and all("anchor" in p.reason for p in unbuilt)
    reasons = {d.reason for r in reports for d in r.decisions if d.op == "aten.tanh.default"}
    assert reasons == {"pointwise/reduction ops only: left to the inner compiler, which fuses them"}


def test_reports_time_each_phase():
    """Each compiled graph's report says what compiling it took: planning with the engine's
    plan builds, measure/verify, the inner compiler (bench/torch/compile_backend.py prints
    their sums for a first call)."""
    m = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.LayerNorm(32))
    reports, calls = check(m, rand(2, 5, 16, grad=True))
    graphs = [r for r in reports if r.graph.startswith(("forward", "backward"))]
    assert len(graphs) == 2 and calls > 0
    for r in graphs:
        assert set(r.seconds) == {"plan", "checks", "inner"}, r.seconds
        assert r.seconds["plan"] > 0 and all(v >= 0 for v in r.seconds.values()), r.seconds


def test_lone_anchor_is_not_built(monkeypatch):
    """A GEMM with nothing the backend could fuse around it (a lone matmul) is never handed to
    the engine (its plan would be built for nothing: no part of it can be claimed); it stays
    with the inner compiler as a single op, while a GEMM with an epilogue is built and claimed."""
    real = _fxpass.partition_graph
    asked = []

    def spy(graph, handle, anchors=None):
        asked.append(sorted(n["kind"] for n in json.loads(graph.to_json())["nodes"]))
        return real(graph, handle, anchors)

    monkeypatch.setattr(_fxpass, "partition_graph", spy)

    def f(x, w1, w2):
        a = x @ w1  # lone: a transpose (a view) stands between it and the next GEMM
        return torch.relu(a.t() @ w2 + 1.0)

    reports, calls = check(f, rand(4, 8), rand(8, 6), rand(4, 5), backward=False)
    assert calls == 1
    assert len(asked) == 1 and len(asked[0]) == 3 and "matmul" in asked[0], asked
    (r,) = reports
    lone = [d for d in r.decisions if d.op == "aten.mm.default" and d.partition is None]
    assert lone and all(d.reason.startswith("single op") for d in lone), r


def test_fallback_for_unsupported_arguments():
    def f(x, y):
        return torch.div(x, y, rounding_mode="floor") * 2.0 + torch.where(x > 0, x, y)

    reports, _ = check(f, rand(4, 8), rand(4, 8), backward=False, fused=False)
    reasons = {d.op: d.reason for d in reports[0].decisions}
    assert reasons["aten.div.Tensor_mode"] == "op not mapped"


def test_inner_inductor_default_backend_name():
    m = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.LayerNorm(32))
    x = rand(4, 16, grad=True)
    ref = m(x)
    ref.sum().backward()
    ref_grads = [p.grad.clone() for p in m.parameters()]
    m.zero_grad()
    compiled = torch.compile(m, backend="dnngraph")  # inner compiler: Inductor
    out, calls = _run_graph_calls(lambda: compiled(x))
    assert calls >= 1
    assert_close(out, ref, torch.float32)
    out.sum().backward()
    for p, g in zip(m.parameters(), ref_grads):
        assert_close(p.grad, g, torch.float32)


def test_options_inner_eager_and_bad_option():
    compiled = torch.compile(lambda x: torch.relu(x * 2.0) + 1.0, backend="dnngraph",
                             options={"inner": "eager", "fuse_pointwise": True})
    x = rand(3, 5)
    out, calls = _run_graph_calls(lambda: compiled(x))
    assert calls == 1
    assert_close(out, torch.relu(x * 2.0) + 1.0, torch.float32)
    with pytest.raises(ValueError, match="inner"):
        make_backend("tvm")
    bad = torch.compile(lambda x: x * 2.0 + 1.0, backend="dnngraph", options={"innr": "eager"})
    with pytest.raises(Exception, match="unknown options"):
        bad(x)


def test_dynamic_batch_falls_back_then_static_shapes_fuse():
    m = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 8))
    # dynamic=True: symbolic sizes; the graph goes to the inner compiler unfused, correctly.
    reports, calls = check(m, rand(4, 8), backward=False, fused=False, dynamic=True)
    assert calls == 0
    assert any("symbolic" in d.reason for r in reports for d in r.decisions)
    # dynamic=False: one specialised graph per batch size, each fused.
    for batch in (3, 5):
        torch._dynamo.reset()
        _, calls = check(m, rand(batch, 8), backward=False, dynamic=False)
        assert calls == 1


def test_explain_table():
    m = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 8))
    x = rand(4, 16, grad=True)
    e = explain(m, x)
    assert isinstance(e, dt.compile.Explanation)
    text = str(e)
    assert "P0" in text and "aten.addmm.default" in text and "aten.gelu.default" in text
    assert "backward" in text  # the backward graph ran and is listed
    assert len(e.partitions) >= 2
    assert all(reason for _, _, _, reason in e.left_out)
    assert x.grad is None and all(p.grad is None for p in m.parameters())  # grads restored
    # Every call_function node of every graph is in the table, fused or with a reason.
    for r in e.reports:
        for d in r.decisions:
            assert d.partition is not None or d.reason


def test_explain_lists_refusal_reasons():
    e = explain(lambda x: torch.cumsum(torch.relu(x @ x), 0) + 1.0, rand(4, 4))
    rows = {op: reason for _, _, op, reason in e.left_out}
    assert rows["aten.cumsum.default"] == "op not mapped"


def test_registration_and_entry_point():
    assert "dnngraph" in torch._dynamo.list_backends(exclude_tags=())
    text = open(os.path.join(ROOT, "pyproject.toml")).read()
    assert "[project.entry-points.torch_dynamo_backends]" in text
    assert 'dnngraph = "dnngraph.torch.compile:dnngraph_backend"' in text


def test_rewritten_graph_holds_run_graph_nodes():
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.aot_autograd import make_boxed_func

    graphs = []

    def fw(gm, example_inputs):
        _fxpass.run_pass(gm)
        graphs.append(gm)
        return make_boxed_func(gm.forward)

    f = torch.compile(lambda x, w: torch.relu(x @ w) * 2.0, backend=aot_autograd(fw_compiler=fw))
    x, w = rand(4, 8), rand(8, 3)
    assert_close(f(x, w), torch.relu(x @ w) * 2.0, torch.float32)
    (gm,) = graphs
    targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    (call,) = [n for n in gm.graph.nodes if "run_graph" in str(n.target)]
    # The graph's JSON is a constant of the compiled code: one line (Inductor copies arguments
    # into comments of the code it writes).
    assert isinstance(call.args[0], str) and "\n" not in call.args[0]
    assert torch.ops.aten.mm.default not in targets and torch.ops.aten.relu.default not in targets
    assert operator.getitem in targets


def test_bench_cpu_smoke():
    import subprocess
    import sys

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    env.pop("DNNGRAPH_COMPILE_MEASURE", None)  # the backend as users get it
    r = subprocess.run(
        [sys.executable, os.path.join(ROOT, "bench", "torch", "compile_backend.py"),
         "--cpu-smoke"],
        capture_output=True, text=True, env=env, timeout=900,
    )
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    assert "MISMATCH" not in r.stdout
    for name in ("gpt_d1024", "gpt_d768", "llama", "resnet_c64", "resnet_c256", "resnet50"):
        assert f"| {name} " in r.stdout, r.stdout


def test_bench_first_calls_in_fresh_processes():
    """--isolate-compile: each compiler's first call timed in a process of its own."""
    import subprocess
    import sys

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run(
        [sys.executable, os.path.join(ROOT, "bench", "torch", "compile_backend.py"),
         "--cpu-smoke", "--blocks", "resnet_c64", "--isolate-compile"],
        capture_output=True, text=True, env=env, timeout=900,
    )
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    row = next(ln for ln in r.stdout.splitlines() if ln.startswith("| resnet_c64 "))
    compile_s, ours_s = (float(c) for c in row.split("|")[6:8])
    assert compile_s > 0 and ours_s > 0
    assert "each in a fresh process" in r.stdout


def test_docs_example_runs_as_written():
    text = open(os.path.join(ROOT, "docs", "torch.md")).read()
    section = text.split("## torch.compile backend", 1)[1].split("\n## ", 1)[0]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    exec(compile(code, "docs/torch.md", "exec"), {})


# ---- GPU (cuDNN): skipped without CUDA -------------------------------------------------------


def _gpu(m):
    return m.to("cuda", torch.bfloat16)


@needs_cuda
def test_gpu_conv_bias_relu_bf16():
    m = _gpu(ConvBiasRelu(16, 32)).to(memory_format=torch.channels_last)
    x = rand(4, 16, 16, 16, dtype=torch.bfloat16, device="cuda")
    x = x.contiguous(memory_format=torch.channels_last).requires_grad_(True)
    reports, calls = check(m, x, dtype=torch.bfloat16, inner="inductor", against_float64=True)
    assert "aten.convolution.default" in _fused_ops(reports, "forward")


@needs_cuda
def test_gpu_gpt_block_bf16():
    import sys

    sys.path.insert(0, os.path.join(ROOT, "bench", "torch"))
    import compile_backend

    m = _gpu(compile_backend.GPTBlock(128, 2, 512))
    x = rand(2, 64, 128, dtype=torch.bfloat16, device="cuda", grad=True)
    reports, calls = check(m, x, dtype=torch.bfloat16, inner="inductor", against_float64=True)
    assert calls >= 1  # at least the forward's GEMM epilogues


@needs_cuda
def test_gpu_sdpa_layer_norm_rms_norm_bf16():
    ln, rms = _gpu(nn.LayerNorm(64)), _gpu(nn.RMSNorm(64, eps=1e-6))
    lin = _gpu(nn.Linear(64, 64))

    def f(q, k, v, x):
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True) * 2.0
        return a.sum() + lin(rms(ln(x) + x)).sum()

    q, k, v = (rand(2, 4, 128, 64, dtype=torch.bfloat16, device="cuda", grad=True)
               for _ in range(3))
    x = rand(2, 32, 64, dtype=torch.bfloat16, device="cuda", grad=True)

    def model(q, k, v, x):
        return f(q, k, v, x).reshape(1)

    check(model, q, k, v, x, dtype=torch.bfloat16, inner="inductor", scale=4.0, fused=False)
    e = explain(model, q, k, v, x)
    assert all(reason for _, _, _, reason in e.left_out)


@needs_cuda
def test_gpu_bench_smallest_blocks():
    import subprocess
    import sys

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    env.pop("DNNGRAPH_COMPILE_MEASURE", None)  # the backend as users get it
    r = subprocess.run(
        [sys.executable, os.path.join(ROOT, "bench", "torch", "compile_backend.py"),
         "--blocks", "resnet_c256,gpt_d768", "--iters", "3"],
        capture_output=True, text=True, env=env, timeout=900,
    )
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    assert "MISMATCH" not in r.stdout


@needs_cuda
def test_gpu_reduce_overhead_records_cuda_graphs():
    """mode="reduce-overhead": the inner Inductor captures the graphs, run_graph calls included
    (CUDA graph trees record them; nothing is skipped), and a training loop matches eager."""
    import sys

    from torch._dynamo.utils import counters
    from torch._inductor import cudagraph_trees

    sys.path.insert(0, os.path.join(ROOT, "bench", "torch"))
    import compile_backend

    torch.manual_seed(0)
    ref = _gpu(compile_backend.GPTBlock(128, 2, 512))
    x = rand(2, 64, 128, dtype=torch.bfloat16, device="cuda")
    torch._dynamo.reset()
    cudagraph_trees.reset_cudagraph_trees()
    counters.clear()
    compiled = torch.compile(ref, backend=make_backend(mode="reduce-overhead", measure=False))
    with _backend.collect_reports() as reports:
        for _ in range(3):  # fresh gradients each step, as CUDA graph trees take a training loop
            ref.zero_grad(set_to_none=True)
            compiled(x).float().square().mean().backward()
    grads = {n: p.grad.clone() for n, p in ref.named_parameters()}
    assert not counters["inductor"]["cudagraph_skips"], dict(counters["inductor"])
    manager = cudagraph_trees.get_manager(torch.cuda.current_device(), False)
    assert manager is not None and sum(len(v) for v in manager.roots.values()) >= 1
    assert _fused_ops(list(reports), "forward"), "no fused forward graph to capture"
    eager = {}
    for model, dtype in ((ref, torch.bfloat16), (copy.deepcopy(ref).double(), torch.float64)):
        model.zero_grad(set_to_none=True)
        model(x.to(dtype)).float().square().mean().backward()
        eager[dtype] = {n: p.grad.clone() for n, p in model.named_parameters()}
    for n, g in grads.items():
        assert_no_worse_than_eager(g, eager[torch.bfloat16][n], eager[torch.float64][n], n)
