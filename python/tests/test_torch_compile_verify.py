"""The dnngraph backend's ``verify`` option: each fused graph is run once at compile time against
the ATen ops it replaces; one that differs is left to ATen, named in the log and in explain()."""

import logging

import pytest
from torch_util import (  # noqa: F401  (skips without dnngraph.torch; fresh_dynamo: a fixture)
    GeluMlp, assert_close, fresh_dynamo, rand, torch)

from dnngraph.torch.compile import _backend, _verify, make_backend


pytestmark = pytest.mark.usefixtures("fresh_dynamo")


Mlp = GeluMlp


def _train_step(model, x, **backend_kw):
    """(output, reports, gradients) of one compiled forward+backward."""
    model.zero_grad()
    compiled = torch.compile(model, backend=make_backend("eager", **backend_kw))
    with _backend.collect_reports() as reports:
        out = compiled(x)
        (out * torch.linspace(0.5, 1.5, out.numel()).view(out.shape)).sum().backward()
    return out, list(reports), [p.grad.clone() for p in model.parameters()]


def _eager_step(model, x):
    model.zero_grad()
    out = model(x)
    (out * torch.linspace(0.5, 1.5, out.numel()).view(out.shape)).sum().backward()
    return out, [p.grad.clone() for p in model.parameters()]


def _claimed(reports):
    return [d for r in reports for d in r.decisions if d.partition is not None]


def test_verified_partitions_are_kept_and_match_eager():
    torch.manual_seed(0)
    m, x = Mlp(), rand(4, 8, 16)
    want, want_grads = _eager_step(m, x)
    out, reports, grads = _train_step(m, x, verify=True)
    assert _claimed(reports), "the reference engine's graphs all match ATen: some are claimed"
    assert not [d for r in reports for d in r.decisions if d.reason.startswith("verify")]
    assert_close(out, want, torch.float32)
    for g, w in zip(grads, want_grads):
        assert_close(g, w, torch.float32, scale=4)


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def test_a_partition_that_differs_is_left_to_aten(monkeypatch):
    real = _verify.run_graph_op()

    def wrong(graph_json, inputs):  # an engine answering 1% off with a success status
        return [o * 1.01 for o in real(graph_json, inputs)]

    monkeypatch.setattr(_verify, "run_graph_op", lambda: wrong)
    torch.manual_seed(0)
    m, x = Mlp(), rand(4, 8, 16)
    want, want_grads = _eager_step(m, x)
    records, logger = _Records(), logging.getLogger("dnngraph")
    logger.addHandler(records)
    try:
        out, reports, grads = _train_step(m, x, verify=True)
    finally:
        logger.removeHandler(records)
    refused = [d for r in reports for d in r.decisions if d.reason.startswith("verify")]
    assert refused and not _claimed(reports)
    assert "differs from ATen's by 0.01" in refused[0].reason
    assert any("partition [" in r and "verify:" in r for r in records.lines), records.lines
    assert_close(out, want, torch.float32)
    for g, w in zip(grads, want_grads):
        assert_close(g, w, torch.float32, scale=4)


def test_a_partition_that_fails_to_run_is_left_to_aten(monkeypatch):
    def failing(graph_json, inputs):  # an engine failing at execute (cuDNN: INTERNAL_ERROR)
        raise RuntimeError("dnngraph::run_graph: BackendError: cudnnBackendExecute failed")

    monkeypatch.setattr(_verify, "run_graph_op", lambda: failing)
    torch.manual_seed(0)
    m, x = Mlp(), rand(4, 8, 16)
    want, want_grads = _eager_step(m, x)
    out, reports, grads = _train_step(m, x, verify=True)
    refused = [d for r in reports for d in r.decisions if d.reason.startswith("verify")]
    assert refused and not _claimed(reports)
    assert "failed to run (RuntimeError: dnngraph::run_graph: BackendError" in refused[0].reason
    assert_close(out, want, torch.float32)
    for g, w in zip(grads, want_grads):
        assert_close(g, w, torch.float32, scale=4)


def test_verify_from_the_environment_and_bad_values(monkeypatch):
    calls = []
    real = _verify.check_partition
    monkeypatch.setattr(_verify, "check_partition",
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    monkeypatch.setattr("dnngraph.torch.compile._fxpass.check_partition",
                        _verify.check_partition)
    monkeypatch.setenv("DNNGRAPH_COMPILE_VERIFY", "1")
    _train_step(Mlp(), rand(2, 3, 16))
    assert calls, "DNNGRAPH_COMPILE_VERIFY=1 turns verify on"
    with pytest.raises(ValueError, match="verify"):
        make_backend("eager", verify="yes")
    bad = torch.compile(lambda x: x * 2.0, backend="dnngraph", options={"verify": 1})
    with pytest.raises(Exception, match="verify"):
        bad(rand(2))


def test_difference_reads_non_finite_values():
    want = torch.tensor([1.0, float("nan"), -4.0])
    assert _verify.difference(torch.tensor([1.0, 7.0, -4.0]), want) == 0.0
    assert _verify.difference(torch.tensor([1.0, 0.0, -3.0]), want) == pytest.approx(0.25)
    assert _verify.difference(torch.tensor([float("inf"), 0.0, -4.0]), want) == float("inf")
