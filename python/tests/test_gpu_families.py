"""Every op family, forward and backward, through the Python API on a CUDA handle, against torch.

These run only where torch sees a GPU and dnngraph can make a CUDA handle (scripts/gpu-check.sh
runs them on the GPU machine); elsewhere they skip with the reason. Outputs are NaN-poisoned
torch tensors allocated with the dims and strides dnngraph inferred; inputs are fresh random
values; tolerances fit the io type (bf16/fp16 1e-2 relative to the largest reference value).
"""

import math

import pytest

import dnngraph as cudnn

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device visible to torch", allow_module_level=True)

F = torch.nn.functional
DT = {torch.float32: cudnn.data_type.FLOAT, torch.float16: cudnn.data_type.HALF,
      torch.bfloat16: cudnn.data_type.BFLOAT16}
TOL = {torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 1e-2}


@pytest.fixture(scope="module")
def gpu():
    # A GPU is present: a handle that cannot be made fails the tests (it is no reason to skip).
    return cudnn.create_handle(device="cuda")


@pytest.fixture(autouse=True)
def seed(request):
    torch.manual_seed(abs(hash(request.node.name)) % (2**31))


def new_graph(handle, io=torch.bfloat16):
    return cudnn.pygraph(handle=handle, io_data_type=DT[io],
                         intermediate_data_type=cudnn.data_type.FLOAT,
                         compute_data_type=cudnn.data_type.FLOAT)


def run(g, inputs, outputs):
    """Builds g, allocates each output (a graph tensor) poisoned with its inferred layout and
    type, executes, and returns the output torch tensors in order."""
    for t in outputs:
        t.set_output(True)
    g.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    pack = dict(inputs)
    result = []
    inv_dt = {v: k for k, v in DT.items()}
    for t in outputs:
        dtype = inv_dt[t.get_data_type()]
        y = torch.empty_strided(t.get_dim(), t.get_stride(), dtype=dtype, device="cuda")
        y.fill_(float("nan"))
        pack[t] = y
        result.append(y)
    ws = torch.empty(max(g.get_workspace_size(), 1), dtype=torch.uint8, device="cuda")
    g.execute(pack, ws)
    torch.cuda.synchronize()
    return result


def close(got, ref, dtype):
    ref = ref.double()
    got = got.double()
    assert torch.isfinite(got).all(), "output has NaN/inf (not written?)"
    tol = TOL[dtype]
    torch.testing.assert_close(got, ref, rtol=tol, atol=tol * max(ref.abs().max().item(), 1e-6))


def rand(*shape, dtype=torch.bfloat16, channels_last=False):
    x = torch.randn(*shape, device="cuda", dtype=torch.float32).to(dtype)
    return x.to(memory_format=torch.channels_last) if channels_last else x


# ---------------------------------------------------------------- conv


def test_conv_fprop_bias_relu(gpu):
    x = rand(4, 32, 16, 16, channels_last=True)
    w = rand(64, 32, 3, 3, channels_last=True)
    b = rand(1, 64, 1, 1, channels_last=True)
    g = new_graph(gpu)
    X, W, B = g.tensor_like(x, "X"), g.tensor_like(w, "W"), g.tensor_like(b, "B")
    conv = g.conv_fprop(image=X, weight=W, padding=[1, 1], stride=[1, 1], dilation=[1, 1])
    Y = g.relu(input=g.bias(input=conv, bias=B))
    (y,) = run(g, {X: x, W: w, B: b}, [Y])
    ref = F.relu(F.conv2d(x.float(), w.float(), b.float().flatten(), padding=1))
    close(y, ref, torch.bfloat16)


def conv_grad(gpu, op, inputs, like, args):
    """The fp16 output of g.<op> on inputs {keyword: (tensor, name)}, given like's dims and
    strides."""
    g = new_graph(gpu, torch.float16)
    tensors = {key: g.tensor_like(t, name) for key, (t, name) in inputs.items()}
    out = getattr(g, op)(**tensors, **args)
    out.set_dim(list(like.shape)).set_stride(list(like.stride()))
    return run(g, {tensors[key]: t for key, (t, _) in inputs.items()}, [out])[0]


def test_conv_dgrad_wgrad(gpu):
    x = rand(2, 16, 12, 12, dtype=torch.float16, channels_last=True)
    w = rand(32, 16, 3, 3, dtype=torch.float16, channels_last=True)
    dy = rand(2, 32, 6, 6, dtype=torch.float16, channels_last=True)
    args = dict(padding=[1, 1], stride=[2, 2], dilation=[1, 1])
    ref_dx = torch.nn.grad.conv2d_input(x.shape, w.float(), dy.float(), stride=2, padding=1)
    ref_dw = torch.nn.grad.conv2d_weight(x.float(), w.shape, dy.float(), stride=2, padding=1)

    dx = conv_grad(gpu, "conv_dgrad", {"loss": (dy, "dY"), "filter": (w, "W")}, x, args)
    close(dx, ref_dx, torch.float16)
    dw = conv_grad(gpu, "conv_wgrad", {"image": (x, "X"), "loss": (dy, "dY")}, w, args)
    close(dw, ref_dw, torch.float16)


# ---------------------------------------------------------------- matmul, pointwise, reduction


def test_matmul_scale_bias_gelu_amax(gpu):
    a, bm = rand(4, 64, 128), rand(4, 128, 96)
    bias = rand(1, 1, 96)
    g = new_graph(gpu)
    A, B, BIAS = g.tensor_like(a, "A"), g.tensor_like(bm, "B"), g.tensor_like(bias, "bias")
    acc = g.matmul(A=A, B=B)
    act = g.gelu(input=g.bias(input=g.mul(a=acc, b=0.5), bias=BIAS))
    act.set_data_type(cudnn.data_type.FLOAT)
    AMAX = g.reduction(input=act, mode=cudnn.reduction_mode.AMAX)
    AMAX.set_dim([1, 1, 1]).set_stride([1, 1, 1]).set_data_type(cudnn.data_type.FLOAT)
    y, amax = run(g, {A: a, B: bm, BIAS: bias}, [act, AMAX])
    ref = F.gelu((a.float() @ bm.float()) * 0.5 + bias.float())
    close(y, ref, torch.bfloat16)
    close(amax.flatten(), ref.abs().max().reshape(1), torch.bfloat16)


def test_matmul_row_sums(gpu):
    a, bm = rand(2, 32, 64), rand(2, 64, 48)
    g = new_graph(gpu)
    A, B = g.tensor_like(a, "A"), g.tensor_like(bm, "B")
    S = g.reduction(input=g.matmul(A=A, B=B), mode=cudnn.reduction_mode.ADD)
    S.set_dim([2, 32, 1]).set_stride([32, 1, 1]).set_data_type(cudnn.data_type.FLOAT)
    (s,) = run(g, {A: a, B: bm}, [S])
    close(s, (a.float() @ bm.float()).sum(-1, keepdim=True), torch.bfloat16)


@pytest.mark.parametrize("op,ref", [
    ("relu", F.relu), ("sigmoid", torch.sigmoid), ("tanh", torch.tanh), ("gelu", F.gelu),
    ("exp", torch.exp), ("abs", torch.abs), ("neg", torch.neg),
])
def test_pointwise_unary(gpu, op, ref):
    x = rand(2, 128, 256, dtype=torch.float32) * 0.5
    g = new_graph(gpu, torch.float32)
    X = g.tensor_like(x, "X")
    (y,) = run(g, {X: x}, [getattr(g, op)(input=X)])
    close(y, ref(x.double()), torch.float32)


def test_pointwise_binary_broadcast(gpu):
    x, b = rand(2, 128, 256, dtype=torch.float32), rand(1, 1, 256, dtype=torch.float32)
    g = new_graph(gpu, torch.float32)
    X, B = g.tensor_like(x, "X"), g.tensor_like(b, "B")
    (y,) = run(g, {X: x, B: b}, [g.mul(a=g.add(a=X, b=B), b=X)])
    close(y, (x.double() + b.double()) * x.double(), torch.float32)


def test_reduction_only_graph_is_refused_clearly(gpu):
    x = rand(2, 64, 128, dtype=torch.float32)
    g = new_graph(gpu, torch.float32)
    X = g.tensor_like(x, "X")
    Y = g.reduction(input=X, mode=cudnn.reduction_mode.ADD)
    Y.set_dim([2, 64, 1]).set_stride([64, 1, 1]).set_output(True)
    with pytest.raises(cudnn.NotSupportedError, match="reduction"):
        g.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])


def test_softmax_only_graph_is_refused_clearly(gpu):
    x = rand(2, 64, 128, dtype=torch.float32)
    g = new_graph(gpu, torch.float32)
    X = g.tensor_like(x, "X")
    Y, _ = g.softmax(input=X)
    Y.set_output(True)
    with pytest.raises(cudnn.NotSupportedError):
        g.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])


# ---------------------------------------------------------------- norms


def norm_inputs(n=8, c=64, h=4, w=4):
    x = rand(n, c, h, w, dtype=torch.float32)
    scale = rand(1, c, h, w, dtype=torch.float32)
    bias = rand(1, c, h, w, dtype=torch.float32)
    return x, scale, bias


def norm_backward(gpu, op, dy, x, scale, mean, inv, inv_name):
    """dX, dScale and dBias of g.<op>_backward (fp32) at x with the forward's statistics."""
    g = new_graph(gpu, torch.float32)
    DY, X, S = g.tensor_like(dy, "dY"), g.tensor_like(x, "X"), g.tensor_like(scale, "scale")
    M, I = g.tensor_like(mean, "mean"), g.tensor_like(inv, inv_name)
    DX, DS, DB = getattr(g, op + "_backward")(grad=DY, input=X, scale=S, mean=M, inv_variance=I)
    return run(g, {DY: dy, X: x, S: scale, M: mean, I: inv}, [DX, DS, DB])


def test_layernorm_forward_backward(gpu):
    x, scale, bias = norm_inputs()
    g = new_graph(gpu, torch.float32)
    X, S, B = g.tensor_like(x, "X"), g.tensor_like(scale, "scale"), g.tensor_like(bias, "bias")
    Y, MEAN, INV = g.layernorm(norm_forward_phase=cudnn.norm_forward_phase.TRAINING, input=X,
                               scale=S, bias=B, epsilon=1e-5)
    y, mean, inv = run(g, {X: x, S: scale, B: bias}, [Y, MEAN, INV])

    xd, sd, bd = (t.double().requires_grad_() for t in (x, scale, bias))
    ref = F.layer_norm(xd, x.shape[1:], sd[0], bd[0], eps=1e-5)
    close(y, ref, torch.float32)
    close(mean.flatten(), x.double().flatten(1).mean(1), torch.float32)
    var = x.double().flatten(1).var(1, unbiased=False)
    close(inv.flatten(), 1 / torch.sqrt(var + 1e-5), torch.float32)

    dy = rand(*x.shape, dtype=torch.float32)
    ref.backward(dy.double())
    dx, ds, db = norm_backward(gpu, "layernorm", dy, x, scale, mean, inv, "inv_variance")
    close(dx, xd.grad, torch.float32)
    close(ds, sd.grad, torch.float32)
    close(db, bd.grad, torch.float32)


def test_rmsnorm_forward_backward(gpu):
    x, scale, _ = norm_inputs()
    g = new_graph(gpu, torch.float32)
    X, S = g.tensor_like(x, "X"), g.tensor_like(scale, "scale")
    Y, INV = g.rmsnorm(norm_forward_phase=cudnn.norm_forward_phase.TRAINING, input=X, scale=S,
                       epsilon=1e-5)
    y, inv = run(g, {X: x, S: scale}, [Y, INV])
    xd, sd = x.double().requires_grad_(), scale.double().requires_grad_()
    rms = torch.rsqrt(xd.flatten(1).pow(2).mean(1) + 1e-5).reshape(-1, 1, 1, 1)
    ref = xd * rms * sd
    close(y, ref, torch.float32)
    close(inv.flatten(), rms.flatten(), torch.float32)

    dy = rand(*x.shape, dtype=torch.float32)
    ref.backward(dy.double())
    g = new_graph(gpu, torch.float32)
    DY, X, S, I = (g.tensor_like(t, n) for t, n in
                   ((dy, "dY"), (x, "X"), (scale, "scale"), (inv, "inv_variance")))
    DX, DS, _ = g.rmsnorm_backward(grad=DY, input=X, scale=S, inv_variance=I)
    dx, ds = run(g, {DY: dy, X: x, S: scale, I: inv}, [DX, DS])
    close(dx, xd.grad, torch.float32)
    close(ds, sd.grad, torch.float32)


def test_batchnorm_training_backward_inference_refused(gpu):
    n, c = 8, 32
    x = rand(n, c, 6, 6, dtype=torch.float32, channels_last=True)
    scale, bias = rand(1, c, 1, 1, dtype=torch.float32), rand(1, c, 1, 1, dtype=torch.float32)
    g = new_graph(gpu, torch.float32)
    X, S, B = g.tensor_like(x, "X"), g.tensor_like(scale, "scale"), g.tensor_like(bias, "bias")
    Y, MEAN, INV, _, _ = g.batchnorm(input=X, scale=S, bias=B, epsilon=1e-5)
    y, mean, inv = run(g, {X: x, S: scale, B: bias}, [Y, MEAN, INV])
    xd, sd, bd = (t.double().requires_grad_() for t in (x, scale, bias))
    ref = F.batch_norm(xd, None, None, sd.flatten(), bd.flatten(), training=True, eps=1e-5)
    close(y, ref, torch.float32)
    close(mean.flatten(), x.double().mean((0, 2, 3)), torch.float32)

    # Batchnorm inference: cuDNN 9.19 finalizes no engine for it on the H200 (fp32/fp16/bf16,
    # NCHW and NHWC all tried); the refusal must be a clean NotSupportedError.
    g = new_graph(gpu, torch.float32)
    X, M, I = g.tensor_like(x, "X"), g.tensor_like(mean, "mean"), g.tensor_like(inv, "inv_var")
    S, B = g.tensor_like(scale, "scale"), g.tensor_like(bias, "bias")
    Yi = g.batchnorm_inference(input=X, mean=M, inv_variance=I, scale=S, bias=B)
    with pytest.raises(cudnn.NotSupportedError, match="batchnorm_inference0"):
        run(g, {X: x, M: mean, I: inv, S: scale, B: bias}, [Yi])

    dy = rand(*x.shape, dtype=torch.float32, channels_last=True)
    ref.backward(dy.double())
    dx, ds, db = norm_backward(gpu, "batchnorm", dy, x, scale, mean, inv, "inv_var")
    close(dx, xd.grad, torch.float32)
    close(ds.flatten(), sd.grad.flatten(), torch.float32)
    close(db.flatten(), bd.grad.flatten(), torch.float32)


# ---------------------------------------------------------------- attention


def test_sdpa_rows_off_16_bytes_are_refused(gpu):
    """cuDNN's attention kernels read rows whose stride is not a multiple of 16 bytes wrongly
    (wrong output on Hopper): such a Q (a [..., 1:] view of bf16 rows of 65) is refused at build
    naming Q and the stride, not run."""
    q = rand(1, 2, 64, 65)[..., 1:]
    k, v = rand(1, 2, 64, 64), rand(1, 2, 64, 64)
    g = new_graph(gpu)
    Q, K, V = g.tensor_like(q, "Q"), g.tensor_like(k, "K"), g.tensor_like(v, "V")
    O, _ = g.sdpa(q=Q, k=K, v=V, is_inference=True, attn_scale=0.125)
    O.set_output(True)
    with pytest.raises(cudnn.NotSupportedError, match=r"Q .*a stride of 65 elements \(130 bytes\)"):
        g.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])


@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_forward_backward(gpu, layout, causal):
    b, h, s, d = 2, 4, 256, 64
    def make():
        if layout == "bhsd":
            return rand(b, h, s, d)
        return rand(b, s, h, d).transpose(1, 2)  # BSHD memory, BHSD dims
    q, k, v, do = make(), make(), make(), make()
    scale = 1.0 / math.sqrt(d)

    g = new_graph(gpu)
    Q, K, V = g.tensor_like(q, "Q"), g.tensor_like(k, "K"), g.tensor_like(v, "V")
    O, STATS = g.sdpa(q=Q, k=K, v=V, is_inference=False, attn_scale=scale,
                      use_causal_mask=causal)
    O.set_dim(list(q.shape)).set_stride(list(q.stride()))
    o, stats = run(g, {Q: q, K: k, V: v}, [O, STATS])

    qd, kd, vd = (t.double().requires_grad_() for t in (q, k, v))
    ref = F.scaled_dot_product_attention(qd, kd, vd, is_causal=causal, scale=scale)
    close(o, ref, torch.bfloat16)
    sc = (qd @ kd.transpose(-1, -2)) * scale
    if causal:
        sc = sc.masked_fill(torch.ones(s, s, dtype=torch.bool, device="cuda").triu(1), -math.inf)
    close(stats, torch.logsumexp(sc, -1, keepdim=True).detach(), torch.float32)
    ref.backward(do.double())

    g = new_graph(gpu)
    Q, K, V = g.tensor_like(q, "Q"), g.tensor_like(k, "K"), g.tensor_like(v, "V")
    O, DO, ST = g.tensor_like(o, "O"), g.tensor_like(do, "dO"), g.tensor_like(stats, "stats")
    DQ, DK, DV = g.sdpa_backward(q=Q, k=K, v=V, o=O, dO=DO, stats=ST, attn_scale=scale,
                                 use_causal_mask=causal)
    for T, t in ((DQ, q), (DK, k), (DV, v)):
        T.set_dim(list(t.shape)).set_stride(list(t.stride()))
    dq, dk, dv = run(g, {Q: q, K: k, V: v, O: o, DO: do, ST: stats}, [DQ, DK, DV])
    close(dq, qd.grad, torch.bfloat16)
    close(dk, kd.grad, torch.bfloat16)
    close(dv, vd.grad, torch.bfloat16)
