"""The dnngraph backend's ``measure`` option: on a GPU each fused graph is timed at compile time
against the ATen ops it replaces; one that is not faster is left to the inner compiler and named
in explain(). On the CPU the timing is simulated (the reference engine is never timed)."""

import operator

import pytest
from torch_util import (  # noqa: F401  (fresh_dynamo: a fixture)
    GeluMlp, assert_close, assert_no_worse_than_eager, fresh_dynamo, needs_cuda, rand, torch)

from dnngraph.torch.compile import _backend, _measure, make_backend


pytestmark = pytest.mark.usefixtures("fresh_dynamo")


Mlp = GeluMlp


def _step(model, x, backend):
    """(output, reports, parameter gradients) of one forward+backward."""
    model.zero_grad()
    with _backend.collect_reports() as reports:
        out = (torch.compile(model, backend=backend) if backend else model)(x)
        (out.float() * torch.linspace(0.5, 1.5, out.numel(), device=x.device).view(out.shape)
         ).sum().backward()
    return out, list(reports), [p.grad.clone() for p in model.parameters()]


def _claimed(reports):
    return [d for r in reports for d in r.decisions if d.partition is not None]


def _measured_out(reports):
    return [d for r in reports for d in r.decisions if d.reason.startswith("measure:")]


def _times(monkeypatch, fused_ms, aten_ms):
    calls = []

    def fake(nodes, built, graph_json, seed=0):
        calls.append(len(nodes))
        return fused_ms, aten_ms, None

    monkeypatch.setattr(_measure, "time_partition", fake)
    return calls


def test_a_slower_fused_graph_is_left_to_the_inner_compiler(monkeypatch):
    calls = _times(monkeypatch, fused_ms=0.120, aten_ms=0.100)
    torch.manual_seed(0)
    m, x = Mlp(), rand(4, 8, 16)
    want, _, want_grads = _step(m, x, None)
    out, reports, grads = _step(m, x, make_backend("eager", measure=True))
    assert calls, "measure=True times every claimed partition"
    assert not _claimed(reports)
    left = _measured_out(reports)
    assert left and all("120.0 us" in d.reason and "100.0 us" in d.reason for d in left)
    assert_close(out, want, torch.float32)
    for g, w in zip(grads, want_grads):
        assert_close(g, w, torch.float32)


def test_a_faster_fused_graph_is_kept(monkeypatch):
    calls = _times(monkeypatch, fused_ms=0.050, aten_ms=0.100)
    torch.manual_seed(0)
    m, x = Mlp(), rand(4, 8, 16)
    _, reports, _ = _step(m, x, make_backend("eager", measure=True))
    assert calls and _claimed(reports) and not _measured_out(reports)


def test_a_tie_goes_to_the_inner_compiler(monkeypatch):
    _times(monkeypatch, fused_ms=0.099, aten_ms=0.100)  # within the margin: no gain
    torch.manual_seed(0)
    _, reports, _ = _step(Mlp(), rand(4, 8, 16), make_backend("eager", measure=True))
    assert not _claimed(reports) and _measured_out(reports)


def _times3(monkeypatch, fused_ms, aten_ms, inner_ms):
    monkeypatch.setattr(_measure, "time_partition", lambda *a, **k: (fused_ms, aten_ms, inner_ms))


def test_against_a_fusing_inner_compiler_its_estimate_counts(monkeypatch):
    """Faster than ATen's ops one by one, slower than the anchor op plus one fused kernel for
    the rest: left to Inductor, with both figures in the reason; kept where the inner compiler
    is eager (it would run the ops one by one)."""
    _times3(monkeypatch, fused_ms=0.080, aten_ms=0.100, inner_ms=0.070)
    why = _measure.measure_partition([], None, "", inner_fuses=True)
    assert why.startswith(_measure.SLOWER)
    assert "80.0 us" in why and "about 70.0 us" in why and "one by one 100.0 us" in why
    assert _measure.measure_partition([], None, "", inner_fuses=False) is None
    torch.manual_seed(0)
    _, reports, _ = _step(Mlp(), rand(4, 8, 16), make_backend("eager", measure=True))
    assert _claimed(reports) and not _measured_out(reports)


def test_an_estimate_above_atens_time_is_not_used(monkeypatch):
    _times3(monkeypatch, fused_ms=0.090, aten_ms=0.100, inner_ms=0.120)
    assert _measure.measure_partition([], None, "", inner_fuses=True) is None
    _times3(monkeypatch, fused_ms=0.050, aten_ms=0.100, inner_ms=0.070)
    assert _measure.measure_partition([], None, "", inner_fuses=True) is None
    _times3(monkeypatch, fused_ms=0.099, aten_ms=0.100, inner_ms=None)
    assert "the ATen ops it replaces 100.0 us" in _measure.measure_partition([], None, "")


def test_the_timed_runs_of_a_convolution_partition(monkeypatch):
    """best_times on a real partition (convolution, batch norm, ReLU; CPU, every run executed
    once by a stand-in timer that says 1 ms): the fused graph, ATen's ops, the anchor op alone
    and each other op alone are run, ROUNDS times each; the estimate is anchor + costliest
    other op (2 ms), and the eager inner compiler compares against ATen's 1 ms."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    from dnngraph.torch.compile._lower import RESHAPES
    from dnngraph.torch.compile._verify import aten_run

    seen = []

    def timed(nodes, built, graph_json, seed=0):
        with unset_fake_temporarily(), torch.no_grad():
            values = _measure.random_inputs(nodes, seed)
            env = aten_run(nodes, values)
            runs = []

            def one_ms(fn, reps):
                fn()
                runs.append(fn)
                return 1.0

            t = _measure.best_times(nodes, built, graph_json, values, env, one_ms)
        seen.append((t, len(runs), {n.target for n in nodes}))
        return t

    monkeypatch.setattr(_measure, "time_partition", timed)
    torch.manual_seed(0)
    nn = torch.nn
    model = nn.Sequential(nn.Conv2d(4, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU()).eval()
    x = rand(2, 4, 6, 6)
    with torch.no_grad(), _backend.collect_reports() as reports:
        out = torch.compile(model, backend=make_backend("eager", measure=True))(x)
        want = model(x)
    assert_close(out, want, torch.float32)
    aten = torch.ops.aten
    conv = [s for s in seen if aten.convolution.default in s[2]]
    assert conv, seen
    (t, runs, targets), = conv
    others = len([n for n in targets if n is not aten.convolution.default
                  and n not in RESHAPES and n is not operator.getitem])
    assert others >= 2  # the batch norm's multiply and add, the ReLU
    assert t == (1.0, 1.0, 2.0)
    assert runs >= _measure.ROUNDS * (2 + 1 + others)
    reasons = [d.reason for r in reports for d in r.decisions if d.reason.startswith("measure")]
    assert reasons and all("the ATen ops it replaces 1000.0 us" in r for r in reasons)


def test_partitions_alike_are_timed_once(monkeypatch):
    """Two partitions of the same graph up to names (a GEMM and GELU on each of two inputs of
    one shape) are timed once; both get the decision."""
    timed = []

    def fake(nodes, built, graph_json, seed):
        timed.append(built.g.key())
        return 0.050, 0.100, None

    monkeypatch.setattr(_measure, "_time_partition", fake)
    monkeypatch.setattr(_measure, "_timed", {})
    w = rand(16, 32)

    def f(x, y):
        return torch.nn.functional.gelu(x @ w), torch.nn.functional.gelu(y @ w)

    x, y = rand(4, 16), rand(4, 16)
    with torch.no_grad(), _backend.collect_reports() as reports:
        got = torch.compile(f, backend=make_backend("eager", measure=True))(x, y)
    for g, want in zip(got, f(x, y)):
        assert_close(g, want, torch.float32)
    assert len({(r.graph, d.partition) for r in reports for d in _claimed([r])}) == 2
    assert len(timed) == 1


def test_a_fused_graph_failing_to_run_is_left_to_aten(monkeypatch):
    def failing(nodes, built, graph_json, seed=0):
        raise RuntimeError("CUDNN_STATUS_EXECUTION_FAILED\nmore")

    monkeypatch.setattr(_measure, "time_partition", failing)
    torch.manual_seed(0)
    _, reports, _ = _step(Mlp(), rand(4, 8, 16), make_backend("eager", measure=True))
    reasons = [d.reason for r in reports for d in r.decisions if d.reason.startswith("measure")]
    assert reasons and all("failed to run (RuntimeError: CUDNN_STATUS_EXECUTION_FAILED)" in r
                           for r in reasons)


def test_cpu_partitions_are_not_timed_by_default(monkeypatch):
    def never(*args, **kwargs):
        raise AssertionError("a CPU partition was timed")

    monkeypatch.setattr(_measure, "time_partition", never)
    monkeypatch.delenv("DNNGRAPH_COMPILE_MEASURE", raising=False)
    torch.manual_seed(0)
    _, reports, _ = _step(Mlp(), rand(4, 8, 16), make_backend("eager"))
    assert _claimed(reports)


def test_time_partition_declines_cpu_inputs():
    """measure=True on CPU partitions: nothing to time, the partition is kept."""
    torch.manual_seed(0)
    _, reports, _ = _step(Mlp(), rand(4, 8, 16), make_backend("eager", measure=True))
    assert _claimed(reports) and not _measured_out(reports)


def test_bad_measure_option():
    with pytest.raises(ValueError, match=r"options\['measure'\] is 'yes'; expected True or False"):
        make_backend("eager", measure="yes")
    bad = torch.compile(lambda x: x * 2.0, backend="dnngraph", options={"measure": 1})
    with pytest.raises(Exception, match="measure"):
        bad(rand(3))


@needs_cuda
def test_gpu_measured_partitions_are_timed_and_right():
    """On a GPU with real timings: every claimed partition was timed (kept ones were faster),
    and the block's results hold either way."""
    import copy

    torch.manual_seed(0)
    m = Mlp(256, 1024).to("cuda", torch.bfloat16)
    x = rand(8, 128, 256, dtype=torch.bfloat16, device="cuda")
    timed = []
    real = _measure.time_partition

    def spy(*args, **kwargs):
        t = real(*args, **kwargs)
        timed.append(t)
        return t

    _measure.time_partition = spy
    try:
        out, reports, grads = _step(m, x, make_backend("inductor", measure=True))
    finally:
        _measure.time_partition = real
    assert timed and all(t is not None and t[0] > 0 and t[1] > 0 for t in timed)
    # Against Inductor the alternative is the cheaper of ATen's ops and its own estimate.
    kept = sum(1 for t in timed
               if t[0] <= _measure.MARGIN * min(t[1], t[1] if t[2] is None else t[2]))
    claimed = {(r.graph, d.partition) for r in reports for d in r.decisions
               if d.partition is not None}
    assert len(claimed) == kept
    eager_out, _, eager_grads = _step(m, x, None)
    exact = copy.deepcopy(m).double()
    out64, _, grads64 = _step(exact, x.double(), None)
    assert_no_worse_than_eager(out, eager_out, out64, "output")
    for g, e, g64 in zip(grads, eager_grads, grads64):
        assert_no_worse_than_eager(g, e, g64, "gradient")


# ---- narrowing: the head of a partition alone, its tail to the inner compiler -------------------


def _gated(x, w, b, r):
    """A convolution, its bias, a product with ``r`` (a tensor of the output's size) and a
    ReLU: one partition whose tail (the product and the ReLU) can be left to the inner
    compiler. (A residual add would be moved in front of the bias instead: the head would be
    the convolution alone, no gain.)"""
    y = torch.nn.functional.conv2d(x, w) + b.view(1, -1, 1, 1)
    return torch.relu(y * r)


def _inputs():
    torch.manual_seed(0)
    return rand(2, 4, 6, 6), rand(8, 4, 1, 1), rand(8), rand(2, 8, 6, 6)


def _pass_on(fn, args, **kw):
    """(reports, rewritten graphs, result) of fn compiled with run_pass (measure on, the inner
    compiler taken as fusing) as the forward compiler."""
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.aot_autograd import make_boxed_func

    from dnngraph.torch.compile import _fxpass

    reports, graphs = [], []

    def fw(gm, example_inputs):
        reports.append(_fxpass.run_pass(gm, measure=True, inner_fuses=True, **kw))
        graphs.append(gm)
        return make_boxed_func(gm.forward)

    with torch.no_grad():
        out = torch.compile(fn, backend=aot_autograd(fw_compiler=fw))(*args)
    return reports, graphs, out


def _targets(gm):
    return [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]


@pytest.mark.parametrize("full, inner", [(0.050, 0.080), (0.090, 0.060)])
def test_a_faster_head_is_fused_alone(monkeypatch, full, inner):
    """Where the convolution and bias as a fused graph plus the tail as one kernel beat both the
    whole fused graph (kept or not), the head alone is fused: the product and the ReLU are left
    to the inner compiler, each with the figures in its reason."""
    monkeypatch.setattr(_measure, "time_partition", lambda *a, **k: (full, 0.100, inner))
    heads = []

    def head(nodes, built, h_nodes, h_built, h_json, seed=0):
        heads.append([str(n.target) for n in h_nodes])
        return 0.020, 0.015

    monkeypatch.setattr(_measure, "time_head", head)
    args = _inputs()
    reports, (gm,), out = _pass_on(_gated, args)
    assert_close(out, _gated(*args), torch.float32)
    (report,) = reports
    assert len(report.partitions) == 1 and len(heads) == 1
    assert any("convolution" in t for t in heads[0]) and not any("relu" in t for t in heads[0])
    left = {d.op: d.reason for d in report.decisions if d.partition is None
            and d.reason.startswith(_measure.NARROWED)}
    assert set(left) == {"aten.mul.Tensor", "aten.relu.default"}, report.decisions
    best = min(full, inner) if full > _measure.MARGIN * inner else full
    assert all("(20.0 us)" in r and "about 15.0 us" in r and f"({best * 1e3:.1f} us)" in r
               for r in left.values()), left
    targets = _targets(gm)
    assert sum("run_graph" in t for t in targets) == 1
    assert "aten.relu.default" in targets and "aten.convolution.default" not in targets


def test_a_slower_head_changes_nothing(monkeypatch):
    monkeypatch.setattr(_measure, "time_partition", lambda *a, **k: (0.050, 0.100, 0.080))
    monkeypatch.setattr(_measure, "time_head", lambda *a, **k: (0.040, 0.015))
    args = _inputs()
    (report,), (gm,), out = _pass_on(_gated, args)
    assert_close(out, _gated(*args), torch.float32)
    assert not any(d.reason.startswith("measure") for d in report.decisions)
    assert "aten.relu.default" not in _targets(gm)


def test_no_head_without_a_full_size_operand(monkeypatch):
    """A convolution, bias and ReLU read nothing of the output's size from outside: no head."""
    monkeypatch.setattr(_measure, "time_partition", lambda *a, **k: (0.050, 0.100, 0.080))

    def never(*a, **k):
        raise AssertionError("a head was timed")

    monkeypatch.setattr(_measure, "time_head", never)
    x, w, b, _ = _inputs()

    def f(x, w, b):
        return torch.relu(torch.nn.functional.conv2d(x, w) + b.view(1, -1, 1, 1))

    (report,), _, out = _pass_on(f, (x, w, b))
    assert_close(out, f(x, w, b), torch.float32)
    assert len(report.partitions) == 1


def test_the_timed_runs_of_a_head(monkeypatch):
    """head_times on the real head (CPU, a stand-in timer saying 1 ms for the head's graph and
    2 and 3 ms for the tail's ops): the head's fused graph and each tail op alone run ROUNDS
    times; the tail costs its costliest op."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    from dnngraph.torch.compile._verify import aten_run

    monkeypatch.setattr(_measure, "time_partition", lambda *a, **k: (0.050, 0.100, 0.080))
    seen = []

    def timed(nodes, built, h_nodes, h_built, h_json, seed=0):
        in_head = set(h_nodes)
        tail = [[n] for n in nodes if n not in in_head and n.target is not operator.getitem]
        with unset_fake_temporarily(), torch.no_grad():
            values = _measure.random_inputs(nodes, seed)
            env = aten_run(nodes, values)
            runs = []

            def ms(fn, reps):
                got = fn()
                runs.append(fn)
                return 1.0 if isinstance(got, dict) and len(got) == 1 and len(runs) % 3 == 1 \
                    else 2.0 + (len(runs) % 3 == 0)

            t = _measure.head_times(h_built, h_json, values, env, tail, ms)
        seen.append((t, len(runs), len(tail)))
        return t

    monkeypatch.setattr(_measure, "time_head", timed)
    args = _inputs()
    _pass_on(_gated, args)
    ((t, runs, tails),) = seen
    assert tails == 2 and runs == _measure.ROUNDS * 3
    assert t == (1.0, 3.0)


@needs_cuda
def test_gpu_narrowed_graph_is_right(monkeypatch):
    """On a GPU with the inner Inductor: a convolution with batch norm, a gate (a product with a
    tensor of the output's size) and ReLU, its head timed for real (the figures scaled so that the head wins): the head's graph runs
    through cuDNN, the tail through Inductor, and the result matches eager."""
    real_head = _measure.time_head
    heads = []

    def head_wins(*args, **kwargs):
        t = real_head(*args, **kwargs)
        assert t is not None and t[0] > 0 and t[1] > 0
        heads.append(t)
        return t[0] * 1e-3, t[1] * 1e-3

    monkeypatch.setattr(_measure, "time_head", head_wins)
    monkeypatch.setattr(_measure, "_timed", {})
    nn = torch.nn

    class Bottleneck(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(64, 256, 1, bias=False)
            self.bn = nn.BatchNorm2d(256)

        def forward(self, x, r):
            return torch.relu(self.bn(self.conv(x)) * r)

    torch.manual_seed(0)
    m = Bottleneck().eval().to("cuda", torch.bfloat16).to(memory_format=torch.channels_last)
    with torch.no_grad():
        m.bn.running_var.uniform_(0.5, 2.0)
        m.bn.running_mean.uniform_(-0.5, 0.5)
    x = rand(8, 64, 28, 28, dtype=torch.bfloat16, device="cuda").to(memory_format=torch.channels_last)
    r = rand(8, 256, 28, 28, dtype=torch.bfloat16, device="cuda").to(memory_format=torch.channels_last)
    with torch.no_grad(), _backend.collect_reports() as reports:
        out = torch.compile(m, backend=make_backend("inductor", measure=True))(x, r)
        want = m(x, r)
        exact = m.double()(x.double(), r.double())
    assert heads, "no head was timed"
    reasons = [d for rep in reports for d in rep.decisions if d.reason.startswith(_measure.NARROWED)]
    assert {d.op for d in reasons} >= {"aten.relu.default"}, [d for rep in reports for d in rep.decisions]
    assert _claimed(list(reports))
    assert_no_worse_than_eager(out, want, exact, "output")
