"""torch.compile(backend="dnngraph") in inference: the work on parameters alone (the folded
batch norms' scaled weights and constants) runs once and again only after a parameter or buffer
changes in place; what the graph returns is never kept."""

import pytest
from torch_util import (  # noqa: F401  (skips without dnngraph.torch; fresh_dynamo: a fixture)
    assert_close, fresh_dynamo, needs_cuda, rand, torch)

import torch.nn as nn

from dnngraph.torch.compile import make_backend

pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def _conv_bn():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(4, 8, 3), nn.BatchNorm2d(8), nn.ReLU(),
                      nn.Conv2d(8, 6, 1, bias=False), nn.BatchNorm2d(6)).eval()
    with torch.no_grad():
        for bn in (m[1], m[4]):
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.uniform_(-0.5, 0.5)
            bn.running_mean.uniform_(-1, 1)
            bn.running_var.uniform_(0.5, 2)
    return m


def _ops_run(fn, name):
    """(fn(), how many times the ATen op ``name`` ran in it)."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        out = fn()
    return out, sum(1 for e in prof.events() if e.name == name)


@pytest.mark.parametrize("cache", [True, False])
def test_parameter_work_runs_once(cache):
    m = _conv_bn()
    x = rand(2, 4, 8, 8)
    compiled = torch.compile(m, backend=make_backend("eager", cache_parameter_work=cache))
    with torch.no_grad():
        ref = m(x)
        assert_close(compiled(x), ref, torch.float32)
        out, rsqrts = _ops_run(lambda: compiled(x), "aten::rsqrt")
    assert_close(out, ref, torch.float32)
    # Two batch norms: their 1 / sqrt(var + eps) is computed on every call without the cache.
    assert rsqrts == (0 if cache else 2)


def test_in_place_changes_are_seen():
    m = _conv_bn()
    x = rand(2, 4, 8, 8)
    compiled = torch.compile(m, backend=make_backend("eager"))
    other = _conv_bn()
    with torch.no_grad():
        other[0].weight.mul_(-1.5)
        other[4].running_mean.add_(0.75)
    changes = [
        lambda: m[1].running_var.mul_(3.0),
        lambda: m[4].weight.add_(0.25),
        lambda: m[3].weight.copy_(torch.randn_like(m[3].weight)),
        lambda: m.load_state_dict(other.state_dict()),
    ]
    with torch.no_grad():
        assert_close(compiled(x), m(x), torch.float32)
        for change in changes:
            before = m(x)
            change()
            ref = m(x)
            assert (ref - before).abs().max() > 1e-3  # the change matters to the output
            assert_close(compiled(x), ref, torch.float32)
            assert_close(compiled(x), ref, torch.float32)


def test_writes_through_data_seen_with_the_cache_off():
    """``.data`` writes bump no version counter: with the option off they are seen."""
    m = _conv_bn()
    x = rand(2, 4, 8, 8)
    compiled = torch.compile(m, backend="dnngraph",
                             options={"inner": "eager", "cache_parameter_work": False})
    with torch.no_grad():
        assert_close(compiled(x), m(x), torch.float32)
        m[3].weight.data.mul_(2.0)
        assert_close(compiled(x), m(x), torch.float32)


def test_returned_parameter_results_not_kept():
    """A result computed from parameters alone that the graph returns is the caller's: writing
    to it must not change the next call's result."""

    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.rand(8) + 0.5)
            self.s = nn.Parameter(torch.rand(8) + 0.5)

        def forward(self, x):
            scale = self.w.rsqrt() * self.s  # parameters alone: kept
            # Returned, so never kept: a result, and a view of what the graph reads too.
            return x * scale + self.s.exp(), self.w * 2.0, scale.view(2, 4)

    m = Scaled().eval()
    x = rand(3, 8)
    compiled = torch.compile(m, backend=make_backend("eager"))
    with torch.no_grad():
        ref = m(x)
        for _ in range(2):
            outs = compiled(x)
            for k, (got, want) in enumerate(zip(outs, ref)):
                assert_close(got, want, torch.float32)
                got.fill_(-7.0 - k)
        _, exps = _ops_run(lambda: compiled(x), "aten::exp")
    assert exps == 0  # kept beside what is returned


def test_training_graphs_untouched():
    """With gradients on, parameters are computed from on every call (autograd needs them)."""
    m = _conv_bn()
    x = rand(2, 4, 8, 8)
    compiled = torch.compile(m, backend=make_backend("eager"))
    ref = m(x)
    ref.square().sum().backward()
    want = [p.grad.clone() for p in m.parameters()]
    m.zero_grad()
    out = compiled(x)
    out.square().sum().backward()
    assert_close(out, ref, torch.float32)
    for p, g in zip(m.parameters(), want):
        assert_close(p.grad, g, torch.float32)


def test_option_checked():
    with pytest.raises(ValueError, match="cache_parameter_work"):
        make_backend("eager", cache_parameter_work="yes")


def test_explain_says_what_is_kept():
    from dnngraph.torch.compile import explain

    m = _conv_bn()
    with torch.no_grad():
        report = str(explain(m, rand(2, 4, 8, 8)))
    rows = [ln for ln in report.splitlines() if "aten.rsqrt.default" in ln]
    assert len(rows) == 2 and all("computed once and kept" in ln for ln in rows), report


@needs_cuda
@pytest.mark.parametrize("mode", [None, "reduce-overhead"])
def test_gpu_kept_work_under_inductor(mode):
    """On the GPU with the inner Inductor (and CUDA-graph trees under reduce-overhead): the kept
    work is refreshed in place after an in-place parameter change between replays, so a replayed
    graph reads the new values at the addresses it recorded."""
    from torch._dynamo.utils import counters
    from torch._inductor import cudagraph_trees

    m = _conv_bn().cuda().to(torch.bfloat16).to(memory_format=torch.channels_last)
    x = rand(4, 4, 16, 16, dtype=torch.bfloat16, device="cuda").to(
        memory_format=torch.channels_last)
    cudagraph_trees.reset_cudagraph_trees()
    counters.clear()
    compiled = torch.compile(m, backend=make_backend("inductor", mode=mode, measure=False))
    changes = [
        lambda: m[1].running_var.mul_(3.0),
        lambda: m[3].weight.add_(0.25),
        lambda: m[4].bias.copy_(torch.randn_like(m[4].bias)),
    ]
    with torch.no_grad():
        for _ in range(3):  # recorded, then replayed
            assert_close(compiled(x).clone(), m(x), torch.bfloat16, "cuda")
        for change in changes:
            before = m(x)
            change()
            ref = m(x)
            assert (ref.float() - before.float()).abs().max() > 1e-2
            for _ in range(2):
                assert_close(compiled(x).clone(), ref, torch.bfloat16, "cuda")
    assert not counters["inductor"]["cudagraph_skips"], dict(counters["inductor"])
