"""The dnngraph torch.compile backend's block rewrite: the ResNet basic block without batch norm,
written with stock modules, becomes dnngraph::residual_block on Dynamo's graph (its backward
fused across the two convolutions); anything that differs from the pattern is left alone.
CPU, inner compiler eager; outputs and gradients against eager."""

import copy

import pytest

from torch_util import assert_close, rand, relative_error, torch

import dnngraph.torch as dt

nn = torch.nn
TF = torch.nn.functional
ops = torch.ops.dnngraph


class Block(nn.Module):
    def __init__(self, c=6, k=3, stride=1, padding=None, groups=1, bias=True, order="x_first",
                 leak=False):
        super().__init__()
        p = k // 2 if padding is None else padding
        self.conv1 = nn.Conv2d(c, c, k, stride=stride, padding=p, groups=groups, bias=bias)
        self.conv2 = nn.Conv2d(c, c, k, padding=k // 2, groups=groups, bias=bias)
        self.order, self.leak = order, leak

    def forward(self, x):
        h = TF.relu(self.conv1(x))
        r = self.conv2(h)
        if self.order == "iadd":  # torchvision's form
            r += x
            y = torch.relu(r)
        else:
            y = torch.relu(x + r if self.order == "x_first" else r + x)
        return (y, h) if self.leak else y


@pytest.fixture(autouse=True)
def fresh_dynamo():
    # Every test compiles Block.forward anew: without a reset, the recompilations of one code
    # object reach Dynamo's limit and later tests would run eagerly.
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def compiled_matches(model, x, **options):
    """Runs model compiled (inner eager) and eager; checks outputs and every gradient; returns
    the backend's explanation."""
    opts = {"inner": "eager", **options}
    explanation = dt.explain(model, x)
    xc, xr = x.detach().clone().requires_grad_(), x.detach().clone().requires_grad_()
    out = torch.compile(model, backend="dnngraph", options=opts)(xc)
    outs = out if isinstance(out, tuple) else (out,)
    sum(o.square().sum() for o in outs).backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    ref = model(xr)
    refs = ref if isinstance(ref, tuple) else (ref,)
    sum(o.square().sum() for o in refs).backward()
    for o, r in zip(outs, refs):
        assert_close(o, r, torch.float32, scale=10)
    assert_close(xc.grad, xr.grad, torch.float32, scale=10)
    for g, p in zip(grads, model.parameters()):
        assert_close(g, p.grad, torch.float32, scale=10)
    return explanation


def rewritten(explanation):
    return [p for p in explanation.partitions if p[0].startswith("dynamo")]


@pytest.mark.parametrize("order", ["x_first", "x_last", "iadd"])
@pytest.mark.parametrize("k,bias", [(3, True), (1, False)])
@pytest.mark.parametrize("channels_last", [False, True])
def test_the_block_becomes_one_op(order, k, bias, channels_last):
    torch.manual_seed(0)
    model = Block(k=k, bias=bias, order=order)
    x = rand(2, 6, 7, 5)
    if channels_last:
        model, x = model.to(memory_format=torch.channels_last), x.to(memory_format=torch.channels_last)
    e = compiled_matches(model, x.requires_grad_())
    (part,) = rewritten(e)
    assert len(part[1]) == 5 and all(op.endswith("dnngraph::residual_block") for op in part[2])
    left = {d[2] for d in e.left_out}
    assert "dnngraph.residual_block_train.default" in left
    assert "dnngraph.residual_block_backward.default" in left
    assert "0 op(s) left in ATen" in str(e)


@pytest.mark.parametrize("kw", [dict(stride=2), dict(padding=0), dict(groups=2), dict(leak=True)],
                         ids=["stride", "padding", "groups", "inner_output_used"])
def test_other_shapes_are_left_alone(kw):
    torch.manual_seed(1)
    model = Block(**kw)
    x = rand(2, 6, 8, 8, grad=True)
    if kw.get("stride") == 2 or kw.get("padding") == 0:  # the residual no longer fits: no add
        with pytest.raises(Exception):
            model(x)
        return
    assert rewritten(compiled_matches(model, x)) == []


def test_option_turns_it_off_and_is_checked():
    torch.manual_seed(2)
    model = Block()
    x = rand(2, 6, 5, 5, grad=True)
    out = torch.compile(model, backend="dnngraph", options={"inner": "eager", "blocks": False})(x)
    assert_close(out, model(x), torch.float32, scale=10)
    torch._dynamo.reset()
    with pytest.raises(Exception, match="options\\['blocks'\\] is 'yes'; expected True or False"):
        torch.compile(model, backend="dnngraph", options={"inner": "eager", "blocks": "yes"})(x)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_gpu_bf16_channels_last_block_becomes_one_op():
    """bf16 on the GPU against the same block in float64: the output and the input gradient
    element by element, the weight gradients (sums over N*H*W products, where elements near zero
    by cancellation carry bf16's absolute error) by their relative L2 error."""
    torch.manual_seed(4)
    model = Block(c=64).to("cuda", torch.bfloat16).to(memory_format=torch.channels_last)
    x = rand(4, 64, 16, 16, dtype=torch.bfloat16, device="cuda").to(memory_format=torch.channels_last)
    xc, xr = x.clone().requires_grad_(), x.double().requires_grad_()
    e = dt.explain(model, xc)
    assert len(rewritten(e)) == 1, str(e)
    out = torch.compile(model, backend="dnngraph")(xc)
    out.float().square().sum().backward()
    exact = copy.deepcopy(model).double()
    ref = exact(xr)
    ref.square().sum().backward()
    assert_close(out, ref, torch.bfloat16, "cuda", scale=4)
    assert_close(xc.grad, xr.grad, torch.bfloat16, "cuda", scale=8)
    for (name, p), q in zip(model.named_parameters(), exact.parameters()):
        assert relative_error(p.grad, q.grad) < 2e-2, name
