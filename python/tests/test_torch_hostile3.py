"""dnngraph.torch under hostile input, third round: the ops added since the second round
(conv2d_bias_add_act, activation_backward, rope, swiglu, add_rms_norm), the training entry
points called directly, the Meta kernels of every op, the modules' constructors and the
torch.compile backend's options. Every call gives torch's answer or a clean error of the right
type that names the op and the user's argument."""

import pytest

from torch_util import assert_close, needs_cuda, rand, torch

import dnngraph.torch as dt
from dnngraph.torch import functional as F
from dnngraph.torch.compile import dnngraph_backend

TF = torch.nn.functional
ops = torch.ops.dnngraph


def conv_add(x, w, res, stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1, bias=None,
             act="relu", train=False):
    op = ops.conv2d_bias_add_act_train if train else ops.conv2d_bias_add_act
    return op(x, w, bias, res, list(stride), list(padding), list(dilation), groups, act)


# ---------------------------------------------------------------- conv2d_bias_add_act


@pytest.mark.parametrize(
    "what,kwargs",
    [
        ("'stride'", dict(stride=(0, 1))),
        ("'stride'", dict(stride=(-1, 1))),
        ("'dilation'", dict(dilation=(1, 0))),
        ("'padding'", dict(padding=(-1, 0))),
        ("'groups'", dict(groups=0)),
        ("with groups=2", dict(groups=2)),
        ("'bias' must be", dict(bias=rand(3, 1))),
        ("beyond int64", dict(padding=(2**62, 0))),
    ],
)
@pytest.mark.parametrize("train", [False, True])
def test_conv_add_checks_the_convolution_arguments(what, kwargs, train):
    # Stride 0 divided the output size before any check (SIGFPE); groups were not checked at
    # all (the channels decided them: a wrong answer).
    x, w, res = rand(1, 2, 6, 6), rand(3, 2, 3, 3), rand(1, 3, 6, 6)
    for dev in ("cpu", "meta"):
        k = {n: (v.to(dev) if isinstance(v, torch.Tensor) else v) for n, v in kwargs.items()}
        with pytest.raises(ValueError, match=rf"conv2d_bias_add_act: .*{what}"):
            conv_add(x.to(dev), w.to(dev), res.to(dev), train=train, **k)


def test_conv_add_residual_of_another_shape_is_refused_on_meta_too():
    x, w = rand(1, 2, 6, 6), rand(3, 2, 3, 3)
    for dev in ("cpu", "meta"):
        for res in (rand(1, 3, 5, 5), rand(3, 1, 1)):
            with pytest.raises(ValueError, match=r"conv2d_bias_add_act: 'residual' has shape"):
                conv_add(x.to(dev), w.to(dev), res.to(dev))


def test_conv_add_matches_torch_with_groups_stride_and_expanded_operands():
    x = rand(2, 4, 9, 9, grad=True)
    w = rand(6, 2, 3, 3, grad=True)
    b = rand(1).expand(6).requires_grad_()
    res = rand(2, 6, 1, 1).expand(2, 6, 5, 5).requires_grad_()
    y = conv_add(x, w, res, stride=(2, 2), groups=2, bias=b, act="gelu")
    xr, wr, br, rr = (t.detach().clone().requires_grad_() for t in (x, w, b, res))
    want = TF.gelu(TF.conv2d(xr, wr, br, stride=2, padding=1, groups=2) + rr)
    assert_close(y, want, torch.float32)
    dy = rand(*y.shape)
    y.backward(dy)
    want.backward(dy)
    for got, ref in ((x.grad, xr.grad), (w.grad, wr.grad), (b.grad, br.grad), (res.grad, rr.grad)):
        assert_close(got, ref, torch.float32, scale=10)


def test_conv_add_with_an_empty_batch():
    x, w = rand(0, 2, 6, 6, grad=True), rand(3, 2, 3, 3, grad=True)
    res = rand(0, 3, 6, 6, grad=True)
    y = conv_add(x, w, res)
    assert y.shape == (0, 3, 6, 6)
    y.sum().backward()
    assert x.grad.shape == x.shape and res.grad.shape == res.shape
    torch.testing.assert_close(w.grad, torch.zeros_like(w))


def test_conv_add_train_called_directly_refuses_a_backward():
    # Its outputs had no autograd kernel: backward gave no gradient, with a warning only.
    x = rand(1, 2, 5, 5, grad=True)
    y, _ = conv_add(x, rand(2, 2, 3, 3), rand(1, 2, 5, 5), act="gelu", train=True)
    with pytest.raises(RuntimeError, match=r"derivative for dnngraph::conv2d_bias_add_act_train"):
        y.sum().backward()


# ---------------------------------------------------------------- a tensor left on meta


def _rms_stats():
    x, w = rand(3, 8), rand(8)
    s, _, rstd = ops.add_rms_norm(x, rand(3, 8), [8], w)
    return x, w, s, rstd


def _meta_calls():
    x, w, s, rstd = _rms_stats()
    m = lambda t: t.to("meta")  # noqa: E731
    lx, lw, lb = rand(3, 4), rand(5, 4), rand(5)
    _, z = ops.linear_act_train(lx, lw, lb, "gelu")
    a3, b3 = rand(2, 3, 4), rand(2, 4, 5)
    cx, cw = rand(1, 2, 5, 5), rand(3, 2, 3, 3)
    _, cz = ops.conv2d_bias_act_train(cx, cw, None, [1, 1], [1, 1], [1, 1], 1, "gelu")
    q = rand(1, 2, 5, 8)
    cos, sin = rand(5, 4), rand(5, 4)
    return {
        "rope": (lambda: ops.rope(q, m(cos), sin), "'cos' is on meta"),
        "rope_backward": (lambda: ops.rope_backward(q, cos, m(sin)), "'sin' is on meta"),
        "swiglu_backward": (lambda: ops.swiglu_backward(m(rand(3, 4)), rand(3, 8)), "'dy' is on meta"),
        "add_rms_norm": (lambda: ops.add_rms_norm(x, m(rand(3, 8)), [8], w), "'residual' is on meta"),
        "add_rms_norm weight": (lambda: ops.add_rms_norm(x, x, [8], m(w)), "'weight' is on meta"),
        "add_rms_norm_backward": (
            lambda: ops.add_rms_norm_backward(x, x, s, [8], m(rstd), w, [True, True]),
            "'rstd' is on meta",
        ),
        "add_rms_norm_backward dsum": (
            lambda: ops.add_rms_norm_backward(m(x), x, s, [8], rstd, w, [True, True]),
            "'dsum' is on meta",
        ),
        "rms_norm_backward": (
            lambda: ops.rms_norm_backward(x, x, [8], m(rstd), w, [True, True]), "'rstd' is on meta"
        ),
        "layer_norm_backward": (
            lambda: ops.layer_norm_backward(x, x, [8], rstd, m(rstd), w, None, [True] * 3),
            "'rstd' is on meta",
        ),
        "linear_act_train_backward": (
            lambda: ops.linear_act_train_backward(rand(3, 5), lx, lw, lb, "gelu", m(z), [True] * 3),
            "'saved' is on meta",
        ),
        "matmul_epilogue_train_backward": (
            lambda: ops.matmul_epilogue_train_backward(
                rand(2, 3, 5), a3, b3, None, 1.0, "silu", m(rand(2, 3, 5)), [True] * 3
            ),
            "'saved' is on meta",
        ),
        "conv2d_bias_act_train_backward": (
            lambda: ops.conv2d_bias_act_train_backward(
                rand(1, 3, 5, 5), cx, cw, None, [1, 1], [1, 1], [1, 1], 1, "gelu", m(cz), [True] * 3
            ),
            "'saved' is on meta",
        ),
        "activation_backward": (
            lambda: ops.activation_backward(rand(2, 3), m(rand(2, 3)), "gelu"), "'saved' is on meta"
        ),
        "conv2d_bias_add_act": (
            lambda: conv_add(cx, cw, m(rand(1, 3, 5, 5))), "'residual' is on meta"
        ),
        "sdpa_backward": (
            lambda: ops.sdpa_backward(
                q, q, q, q, q, m(rand(1, 2, 5)), None, 0.0, False, None, False
            ),
            "'logsumexp' is on meta",
        ),
    }


@pytest.mark.parametrize("which", sorted(_meta_calls()))
def test_a_tensor_on_meta_next_to_cpu_tensors_is_a_device_error(which):
    # The dispatcher runs the Meta kernel when any argument is on meta: these returned an
    # uninitialised CPU tensor (or read a meta tensor's missing data) instead of an error.
    fn, msg = _meta_calls()[which]
    with pytest.raises(ValueError, match=rf"dnngraph::\w+: tensor {msg} but '\w+' is on cpu"):
        fn()


@needs_cuda
def test_a_saved_tensor_on_another_device_is_a_device_error():
    # The saved pre-activation was not device-checked: a CUDA one next to CPU tensors reached the
    # CPU engine, which would read device memory.
    x, w, b = rand(3, 4), rand(5, 4), rand(5)
    z = rand(3, 5, device="cuda")
    for op, args in (
        (ops.linear_act_train_backward, (rand(3, 5), x, w, b, "gelu", z, [True] * 3)),
        (ops.matmul_epilogue_train_backward, (rand(3, 5), x, w.t(), None, 1.0, "gelu", z, [True] * 3)),
    ):
        with pytest.raises(ValueError, match=r"tensor 'saved' is on cuda:0 but '\w+' is on cpu"):
            op(*args)


# ---------------------------------------------------------------- Meta kernels = eager rules


def _shape_calls(dev):
    d = lambda t: t.to(dev)  # noqa: E731
    x, w, s, rstd = (d(t) for t in _rms_stats())
    lx, lw = d(rand(3, 4)), d(rand(5, 4))
    return [
        (lambda: ops.rope(d(rand(1, 2, 5, 7)), d(rand(5, 3)), d(rand(5, 3))), r"rope: 'x' must be \[B, H, S, D\] with an even D"),
        (lambda: ops.rope(d(rand(1, 2, 5, 8)), d(rand(5, 8)), d(rand(5, 8))), r"rope: 'cos' and 'sin' must be \[S, D/2\] = \[5, 4\]"),
        (lambda: ops.rope_backward(d(rand(1, 2, 5, 8)), d(rand(4, 4)), d(rand(4, 4))), r"rope_backward: 'cos' and 'sin'"),
        (lambda: ops.swiglu(d(rand(3, 7))), r"swiglu: 'z' must end with an even dim"),
        (lambda: ops.swiglu_backward(d(rand(3, 3)), d(rand(3, 8))), r"swiglu_backward: 'dy' has shape \[3, 3\]"),
        (lambda: ops.add_rms_norm(x, d(rand(1, 8)), [8], w), r"add_rms_norm: 'residual' has shape \[1, 8\]"),
        (lambda: ops.add_rms_norm(x, x, [8], d(rand(5))), r"add_rms_norm: 'weight' has shape \[5\]"),
        (lambda: ops.add_rms_norm(x, x, [5], None), r"add_rms_norm: input 'x' of shape \[3, 8\] does not end"),
        (lambda: ops.add_rms_norm_backward(None, d(rand(3, 5)), s, [8], rstd, w, [True, True]), r"add_rms_norm_backward: 'dy' has shape \[3, 5\]"),
        (lambda: ops.add_rms_norm_backward(None, x, s, [8], d(rand(5)), w, [True, True]), r"add_rms_norm_backward: 'rstd' has shape \[5\]"),
        (lambda: ops.rms_norm_backward(d(rand(3, 5)), x, [8], rstd, w, [True, True]), r"rms_norm_backward: 'dy' has shape \[3, 5\]"),
        (lambda: ops.layer_norm_backward(d(rand(3, 5)), x, [8], rstd, rstd, w, None, [True] * 3), r"layer_norm_backward: 'dy' has shape \[3, 5\]"),
        (lambda: ops.linear_act_train_backward(d(rand(3, 5)), lx, lw, None, "gelu", d(rand(7)), [True] * 3), r"linear_act_backward: 'saved' has shape \[7\]"),
        (lambda: ops.linear_act_train_backward(d(rand(3, 5)), lx, lw, None, "bogus", None, [True] * 3), r"linear_act_backward: unknown activation 'bogus'"),
        (lambda: ops.activation_backward(d(rand(2, 3)), d(rand(2, 4)), "silu"), r"activation_backward: 'saved' has shape \[2, 4\]"),
        (lambda: ops.sdpa_backward(*(d(rand(1, 2, 5, 8)) for _ in range(5)), d(rand(1, 2, 4)), None, 0.0, False, None, False), r"sdpa_backward: 'logsumexp' has shape \[1, 2, 4\]"),
        (lambda: ops.conv2d_bias_act(d(rand(1, 2, 6, 6)), d(rand(3, 2, 3, 3)), None, [1, 1], [0, 0], [1, 1], 1, "bogus"), r"conv2d_bias_act: unknown activation"),
    ]


@pytest.mark.parametrize("i", range(17))
def test_meta_kernels_refuse_what_eager_refuses(i):
    # The Meta kernels of these ops (torch.compile, export, FakeTensor) accepted them.
    for dev in ("cpu", "meta"):
        fn, msg = _shape_calls(dev)[i]
        with pytest.raises(ValueError, match=msg):
            fn()


def test_saved_tensor_of_another_dtype_is_a_type_error():
    # Autograd always saves the forward's own dtype; a direct call with another one reached the
    # engines (ATen's derivative kernels refuse mixed dtypes on the GPU path).
    x, w = rand(3, 4), rand(5, 4)
    z = rand(3, 5, dtype=torch.float64)
    for dev in ("cpu", "meta"):
        with pytest.raises(TypeError, match=r"linear_act_backward: tensor 'saved' has dtype Double"):
            ops.linear_act_train_backward(
                rand(3, 5).to(dev), x.to(dev), w.to(dev), None, "gelu", z.to(dev), [True] * 3
            )
        with pytest.raises(TypeError, match=r"activation_backward: tensor 'saved' has dtype Double"):
            ops.activation_backward(rand(3, 5).to(dev), z.to(dev), "gelu")


# ---------------------------------------------------------------- edge values torch accepts


def test_saved_tensor_with_stride_zero():
    x, w, b = rand(3, 4), rand(5, 4), rand(5)
    dy = rand(3, 5)
    z = rand(1, 5).expand(3, 5)  # an expanded pre-activation: stride 0 on rows
    got = ops.linear_act_train_backward(dy, x, w, b, "gelu", z, [True] * 3)
    want = ops.linear_act_train_backward(dy, x, w, b, "gelu", z.contiguous(), [True] * 3)
    for g, r in zip(got, want):
        torch.testing.assert_close(g, r)


@pytest.mark.parametrize("act", ["gelu", "silu", "tanh", "relu", "none"])
def test_activation_backward_of_a_0dim_tensor(act):
    dy, saved = torch.tensor(1.5), torch.tensor(0.3)
    got = ops.activation_backward(dy, saved, act)
    ref = saved.clone().requires_grad_()
    f = {"gelu": TF.gelu, "silu": TF.silu, "tanh": torch.tanh, "relu": TF.relu, "none": lambda t: t}[act]
    (want,) = torch.autograd.grad(f(ref), ref, dy)
    assert got.shape == () and got.dtype == torch.float32
    torch.testing.assert_close(got, want)


def test_sdpa_with_a_head_dim_of_zero_matches_torch():
    # Empty dot products are 0 whatever the scale: every key weighs the same (the default scale,
    # 1/sqrt(0), made the scores 0 * inf = NaN).
    q, k, v = rand(1, 2, 4, 0), rand(1, 2, 5, 0), rand(1, 2, 5, 3)
    got = F.scaled_dot_product_attention(q, k, v)
    assert_close(got, TF.scaled_dot_product_attention(q, k, v), torch.float32)
    assert_close(got, v.mean(2, keepdim=True).expand(1, 2, 4, 3), torch.float32)


# ---------------------------------------------------------------- forward-mode AD


def _forward_ad_cases():
    w, w4, res = rand(5, 4), rand(3, 2, 3, 3), rand(1, 3, 5, 5)
    cos, sin = rand(5, 4), rand(5, 4)
    return {
        "linear": (lambda t: F.linear(t, w, None, "gelu"), rand(3, 4)),
        "matmul_epilogue": (lambda t: F.matmul_epilogue(t, w.t(), activation="silu"), rand(3, 4)),
        "conv": (lambda t: F.conv2d_bias_act(t, w4, activation="relu"), rand(1, 2, 5, 5)),
        "conv_add": (lambda t: conv_add(t, w4, res), rand(1, 2, 5, 5)),
        "sdpa": (lambda t: F.scaled_dot_product_attention(t, t, t), rand(1, 2, 4, 8)),
        "layer_norm": (lambda t: F.layer_norm(t, [4]), rand(3, 4)),
        "rms_norm": (lambda t: F.rms_norm(t, [4]), rand(3, 4)),
        "add_rms_norm": (lambda t: F.add_rms_norm(t, t, [4], None)[1], rand(3, 4)),
        "rope": (lambda t: F.rope(t, cos, sin), rand(1, 2, 5, 8)),
        "swiglu": (lambda t: F.swiglu(t), rand(3, 8)),
    }


@pytest.mark.parametrize("which", sorted(_forward_ad_cases()))
def test_forward_mode_ad_is_refused(which):
    # The ops have no forward-mode derivative: torch.func.jvp gave a zero tangent and jacfwd a
    # zero Jacobian, silently.
    fn, x = _forward_ad_cases()[which]
    msg = r"dnngraph::\w+: '\w+' has a forward-mode tangent"
    with pytest.raises(NotImplementedError, match=msg):
        torch.func.jvp(fn, (x,), (torch.ones_like(x),))
    import torch.autograd.forward_ad as fwad

    with fwad.dual_level(), pytest.raises(NotImplementedError, match=msg):
        fn(fwad.make_dual(x, torch.ones_like(x)))


def test_forward_mode_ad_into_an_out_variant_is_refused():
    import torch.autograd.forward_ad as fwad

    x, w = rand(3, 4), rand(5, 4)
    with fwad.dual_level(), pytest.raises(NotImplementedError, match=r"linear_act.out: .*tangent"):
        ops.linear_act.out(fwad.make_dual(x, torch.ones_like(x)), w, out=torch.empty(0))


# ---------------------------------------------------------------- modules


@pytest.mark.parametrize(
    "make,msg",
    [
        (lambda: dt.Linear(4, 3, activation="bogus"), r"Linear: activation='bogus'"),
        (lambda: dt.Linear(4, 3, activation=None), r"Linear: activation=None"),
        (lambda: dt.Conv2dBiasAct(2, 3, 3, activation="swish"), r"Conv2dBiasAct: activation='swish'"),
        (lambda: dt.SwiGLU(4, -1), r"SwiGLU: hidden=-1"),
        (lambda: dt.LlamaAttention(8, 0), r"LlamaAttention: heads=0"),
        (lambda: dt.LlamaAttention(8, -2), r"LlamaAttention: heads=-2"),
        (lambda: dt.LlamaAttention(8, 2, kv_heads=0), r"LlamaAttention: kv_heads=0"),
        (lambda: dt.LlamaAttention(8, 2, kv_heads=-1), r"LlamaAttention: kv_heads=-1"),
        (lambda: dt.LlamaAttention(8, 2, head_dim=0), r"LlamaAttention: head_dim=0"),
        (lambda: dt.LlamaAttention(6, 2), r"LlamaAttention: the head dim is 3"),
        (lambda: dt.LlamaAttention(8, 2, max_seq_len=-1), r"LlamaAttention: max_seq_len=-1"),
        (lambda: dt.LlamaAttention(8, 2, rope_base=0.0), r"LlamaAttention: rope_base=0.0"),
        (lambda: dt.LlamaAttention(8, 2, rope_base=float("nan")), r"LlamaAttention: rope_base=nan"),
        (lambda: dt.LlamaBlock(8, 2, hidden=0), r"LlamaBlock: hidden=0"),
    ],
)
def test_module_constructor_arguments_are_checked(make, msg):
    # Before: accepted, then a failure or a wrong answer later (heads=0: ZeroDivisionError;
    # kv_heads=0, head_dim=0, hidden=0 silently replaced by the default; kv_heads=-1 accepted;
    # rope_base=0 made NaN tables, and attention turned NaN rows into zeros).
    with pytest.raises(ValueError, match=rf"dnngraph {msg}"):
        make()


def test_attention_modules_refuse_unbatched_input_and_bad_masks():
    mha = dt.MultiheadAttention(8, 2)
    with pytest.raises(ValueError, match=r"MultiheadAttention: 'query' has shape \[5, 8\]"):
        mha(rand(5, 8), rand(5, 8), rand(5, 8))
    with pytest.raises(ValueError, match=r"LlamaAttention: 'x' has shape \[3, 8\]"):
        dt.LlamaAttention(8, 2)(rand(3, 8))
    q = rand(2, 5, 8)
    with pytest.raises(RuntimeError, match=r"MultiheadAttention: the 3-D attn_mask has shape \[3, 5, 5\]"):
        mha(q, q, q, attn_mask=rand(3, 5, 5))
    with pytest.raises(ValueError, match=r"MultiheadAttention: 'query' \[2, 5, 8\], 'key' \[3, 5, 8\]"):
        mha(q, rand(3, 5, 8), rand(3, 5, 8))


def test_llama_attention_on_an_empty_sequence():
    m = dt.LlamaAttention(8, 2, kv_heads=1)
    x = rand(2, 0, 8, grad=True)
    y = m(x)
    assert y.shape == (2, 0, 8)
    y.sum().backward()
    assert x.grad.shape == x.shape


# ---------------------------------------------------------------- torch.compile backend


def _graph():
    gm = torch.fx.symbolic_trace(lambda x: torch.relu(x))
    return gm, [rand(2, 3)]


@pytest.mark.parametrize(
    "kwargs,msg",
    [
        (dict(options={"fuse_pointwise": "no"}), r"options\['fuse_pointwise'\] is 'no'"),
        (dict(options=[("inner", "eager")]), r"options is a list"),
        (dict(options={"inner": None}), r"options\['inner'\] is None"),
        (dict(mode="fastest"), r"mode='fastest'"),
    ],
)
def test_backend_options_are_checked(kwargs, msg):
    # "no" was taken as True (bool("no")), an unknown mode was ignored.
    gm, inputs = _graph()
    with pytest.raises(ValueError, match=rf"dnngraph backend: {msg}"):
        dnngraph_backend(gm, inputs, **kwargs)


def test_explain_refuses_a_non_callable_and_a_backward_without_grad():
    with pytest.raises(TypeError, match=r"explain: model is a int"):
        dt.explain(3, rand(2))
    with pytest.raises(ValueError, match=r"explain: backward=True, but no floating-point output"):
        dt.explain(lambda x: x * 2, rand(2, 2), backward=True)
