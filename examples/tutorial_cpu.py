"""The tutorial's three graphs on the CPU with numpy: conv -> bias -> ReLU in NHWC, a batched
matmul with a scale, bias, GELU and AMAX epilogue, and causal attention. Each runs on the CPU
reference engine (no GPU needed) and is checked against a float64 numpy computation.

    make demo && . .venv/bin/activate && python examples/tutorial_cpu.py

On a GPU, create_handle(device="cuda") runs the same graphs on cuDNN (with arrays on the GPU,
e.g. torch tensors).
"""

import math

import numpy as np

import dnngraph as cudnn

FLOAT = cudnn.data_type.FLOAT
rng = np.random.default_rng(2026)
handle = cudnn.create_handle(device="cpu")


def nhwc(a):
    """The same NCHW-indexed array with NHWC memory (channels last)."""
    return np.ascontiguousarray(a.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)


def run(g, pack):
    """Builds g, runs it once on `pack` (outputs poisoned with NaN beforehand by the caller)."""
    g.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    g.execute(pack, np.empty(g.get_workspace_size(), np.uint8))


def conv_bias_relu():
    n, c, h, w, k = 2, 8, 10, 10, 16
    x = nhwc(rng.standard_normal((n, c, h, w), dtype=np.float32))
    f = nhwc(rng.standard_normal((k, c, 3, 3), dtype=np.float32))
    b = rng.standard_normal((1, k, 1, 1), dtype=np.float32)
    y = nhwc(np.full((n, k, h, w), np.nan, np.float32))

    g = cudnn.pygraph(handle=handle, name="conv_bias_relu", io_data_type=FLOAT,
                      compute_data_type=FLOAT)
    X, F, B = g.tensor_like(x, "X"), g.tensor_like(f, "F"), g.tensor_like(b, "bias")
    conv = g.conv_fprop(image=X, weight=F, padding=[1, 1], stride=[1, 1], dilation=[1, 1])
    Y = g.relu(input=g.bias(input=conv, bias=B))
    Y.set_output(True).set_stride([s // 4 for s in y.strides])  # NHWC out, as y
    run(g, {X: x, F: f, B: b, Y: y})

    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    ref = np.zeros((n, k, h, w))
    for r in range(3):
        for s in range(3):
            ref += np.einsum("nchw,kc->nkhw", xp[:, :, r:r + h, s:s + w], f[:, :, r, s])
    ref = np.maximum(ref + b, 0)
    return "conv -> bias -> ReLU (NHWC)", y, ref, 1e-5


def matmul_epilogue():
    bsz, m, kd, nd = 4, 32, 64, 48
    a = rng.standard_normal((bsz, m, kd), dtype=np.float32)
    bm = rng.standard_normal((bsz, kd, nd), dtype=np.float32)
    bias = rng.standard_normal((1, 1, nd), dtype=np.float32)
    y = np.full((bsz, m, nd), np.nan, np.float32)
    amax = np.full((1, 1, 1), np.nan, np.float32)

    g = cudnn.pygraph(handle=handle, name="matmul_epilogue", io_data_type=FLOAT,
                      compute_data_type=FLOAT)
    A, B, BIAS = g.tensor_like(a, "A"), g.tensor_like(bm, "B"), g.tensor_like(bias, "bias")
    ALPHA = g.tensor(name="alpha", dim=[1, 1, 1], data_type=FLOAT, is_pass_by_value=True)
    act = g.gelu(input=g.bias(input=g.mul(a=g.matmul(A=A, B=B), b=ALPHA), bias=BIAS))
    act.set_output(True)
    AMAX = g.reduction(input=act, mode=cudnn.reduction_mode.AMAX)
    AMAX.set_output(True).set_dim([1, 1, 1])
    run(g, {A: a, B: bm, BIAS: bias, ALPHA: 0.125, act: y, AMAX: amax})

    z = (a.astype(np.float64) @ bm) * 0.125 + bias
    ref = 0.5 * z * (1 + np.vectorize(math.erf)(z / math.sqrt(2)))
    if abs(amax.item() - np.abs(ref).max()) > 1e-5 * np.abs(ref).max():
        raise SystemExit(f"AMAX {amax.item()} differs from {np.abs(ref).max()}")
    return "matmul * alpha + bias -> GELU, AMAX", y, ref, 1e-5


def causal_attention():
    b, h, s, d = 2, 4, 64, 32
    q, k, v = (rng.standard_normal((b, h, s, d), dtype=np.float32) for _ in range(3))
    o = np.full((b, h, s, d), np.nan, np.float32)
    scale = 1 / math.sqrt(d)

    g = cudnn.pygraph(handle=handle, name="sdpa", io_data_type=FLOAT, compute_data_type=FLOAT)
    Q, K, V = g.tensor_like(q, "Q"), g.tensor_like(k, "K"), g.tensor_like(v, "V")
    O, _ = g.sdpa(q=Q, k=K, v=V, is_inference=True, attn_scale=scale, use_causal_mask=True)
    O.set_output(True)
    run(g, {Q: q, K: k, V: v, O: o})

    sc = np.einsum("bhqd,bhkd->bhqk", q.astype(np.float64), k) * scale
    sc[..., np.triu_indices(s, 1)[0], np.triu_indices(s, 1)[1]] = -np.inf
    p = np.exp(sc - sc.max(-1, keepdims=True))
    ref = np.einsum("bhqk,bhkd->bhqd", p / p.sum(-1, keepdims=True), v)
    return "causal attention", o, ref, 1e-5


if __name__ == "__main__":
    failed = 0
    for make in (conv_bias_relu, matmul_epilogue, causal_attention):
        name, got, ref, tol = make()
        err = np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-30)
        ok = np.isfinite(got).all() and err <= tol
        failed += not ok
        print(f"{name:40s} max rel error {err:.2e}  {'ok' if ok else 'FAILED'}")
    raise SystemExit(1 if failed else 0)
