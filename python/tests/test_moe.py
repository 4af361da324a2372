"""moe_grouped_matmul (mode NONE) on the CPU reference engine against numpy; the offsets'
execute-time checks; the frontend's other modes and the backward refused with their reasons."""

import numpy as np
import pytest

import dnngraph as cudnn
from conftest import assert_close, build, poisoned, workspace_for

F32, I32, I64 = cudnn.data_type.FLOAT, cudnn.data_type.INT32, cudnn.data_type.INT64


def moe_inputs(handle, E, S, K, N, offset_type=I32, offset_experts=None):
    """A graph with token [1,S,K], weight [E,K,N] (the frontend's strides [K*N, 1, K]) and
    offsets [offset_experts or E, 1, 1]."""
    g = cudnn.pygraph(handle=handle, io_data_type=F32, compute_data_type=F32)
    T = g.tensor(name="token", dim=[1, S, K], stride=[S * K, K, 1], data_type=F32)
    W = g.tensor(name="weight", dim=[E, K, N], stride=[K * N, 1, K], data_type=F32)
    G = offset_experts or E
    O = g.tensor(name="offset", dim=[G, 1, 1], stride=[1, 1, 1], data_type=offset_type)
    return g, T, W, O


def moe_graph(handle, E, S, K, N, offset_type=I32, **kw):
    g, T, W, O = moe_inputs(handle, E, S, K, N, offset_type)
    Y = g.moe_grouped_matmul(T, W, O, name="moe", **kw)
    Y.set_output(True)
    return g, T, W, O, Y


def numpy_moe(token, w_ekn, starts):
    S = token.shape[1]
    bounds = list(starts) + [S]
    out = np.zeros((1, S, w_ekn.shape[2]))
    for e in range(len(starts)):
        lo, hi = bounds[e], bounds[e + 1]
        out[0, lo:hi] = token[0, lo:hi].astype(np.float64) @ w_ekn[e].astype(np.float64)
    return out


def run(handle, rng, E, S, K, N, starts, offset_type=I32):
    g, T, W, O, Y = moe_graph(handle, E, S, K, N, offset_type)
    build(g)
    assert Y.get_dim() == [1, S, N]
    token = rng.standard_normal((1, S, K)).astype(np.float32)
    # weight [E, K, N] with strides [K*N, 1, K]: each expert's [K, N] column-major.
    w = rng.standard_normal((E, N, K)).astype(np.float32).transpose(0, 2, 1)
    off = np.asarray(starts, dtype=np.int32 if offset_type == I32 else np.int64).reshape(E, 1, 1)
    y = poisoned((1, S, N))
    g.execute({T: token, W: w, O: off, Y: y}, workspace_for(g))
    return y, numpy_moe(token, w, starts)


@pytest.mark.parametrize("seed", range(4))
def test_random_offsets_with_empty_experts_match_numpy(handle, rng, seed):
    E, S = int(rng.integers(2, 7)), int(rng.integers(1, 60))
    K, N = int(rng.integers(1, 20)), int(rng.integers(1, 12))
    starts = np.sort(rng.integers(0, S + 1, size=E))
    starts[0] = 0
    starts[1] = 0  # expert 0 empty
    if E > 3:
        starts[3] = starts[2]  # another empty expert
    y, ref = run(handle, rng, E, S, K, N, starts.tolist(), I64 if seed % 2 else I32)
    assert_close(y, ref, rtol=1e-5)


def test_last_expert_starting_at_s_is_empty(handle, rng):
    y, ref = run(handle, rng, 3, 8, 4, 5, [0, 3, 8])
    assert_close(y, ref, rtol=1e-5)


@pytest.mark.parametrize("starts, match", [
    ([0, 5, 3], "element 2 .* must not decrease"),
    ([0, 2, 9], "element 2 .* at most S"),
    ([2, 4, 6], "element 0 .* must be 0"),
])
def test_bad_offsets_raise_and_leave_the_output(handle, rng, starts, match):
    g, T, W, O, Y = moe_graph(handle, 3, 8, 4, 5)
    build(g)
    y = poisoned((1, 8, 5))
    pack = {T: rng.standard_normal((1, 8, 4)).astype(np.float32),
            W: rng.standard_normal((3, 5, 4)).astype(np.float32).transpose(0, 2, 1),
            O: np.asarray(starts, dtype=np.int32).reshape(3, 1, 1), Y: y}
    with pytest.raises(ValueError, match="moe_grouped_matmul 'moe'.*" + match):
        g.execute(pack, workspace_for(g))
    assert np.isnan(y).all()


def test_shape_errors_name_the_tensor(handle):
    g, T, W, O = moe_inputs(handle, 3, 8, 4, 5, offset_experts=2)
    g.moe_grouped_matmul(T, W, O).set_output(True)
    with pytest.raises(ValueError, match="FIRST_TOKEN_OFFSET 'offset'.*E=3"):
        g.validate()


@pytest.mark.parametrize("mode, match", [
    ("GATHER", "mode=GATHER.*illegal memory access"),
    ("SCATTER", "mode=SCATTER.*no engine configuration"),
    ("COMBINE", "mode=COMBINE.*SM100"),
])
def test_other_modes_refused_at_validate(handle, mode, match):
    g, T, W, O = moe_inputs(handle, 2, 8, 4, 5)
    idx = g.tensor(name="idx", dim=[1, 8, 1], stride=[8, 1, 1], data_type=I32)
    Y = g.moe_grouped_matmul(T, W, O, token_index=idx, token_ks=idx, top_k=1,
                             mode=getattr(cudnn.moe_grouped_matmul_mode, mode))
    Y.set_output(True)
    with pytest.raises(cudnn.NotSupportedError, match=match):
        g.validate()


def test_top_k_scores_refused_outside_combine(handle):
    g, T, W, O = moe_inputs(handle, 2, 8, 4, 5)
    scores = g.tensor(name="scores", dim=[1, 8, 1], stride=[8, 1, 1], data_type=F32)
    g.moe_grouped_matmul(T, W, O, top_k_scores=scores).set_output(True)
    with pytest.raises(ValueError, match="top_k_scores is only valid for mode COMBINE"):
        g.validate()


def test_backward_refused_with_its_cudnn_version(handle):
    g = cudnn.pygraph(handle=handle, io_data_type=F32)
    with pytest.raises(cudnn.NotSupportedError, match="moe_grouped_matmul_bwd.*9.22"):
        g.moe_grouped_matmul_bwd(None, None, None)


def test_experimental_op_on_cpu_tensors_matches_torch():
    torch = pytest.importorskip("torch")
    if not hasattr(torch, "randn"):
        pytest.skip("torch is not installed")
    from dnngraph.experimental import ops

    gen = torch.Generator().manual_seed(3)
    E, S, K, N = 3, 40, 16, 8
    token = torch.randn(1, S, K, generator=gen).to(torch.bfloat16)
    weight = torch.randn(E, N, K, generator=gen).to(torch.bfloat16).transpose(1, 2)  # (E, K, N)
    starts = [0, 0, 25]  # expert 0 empty
    offsets = torch.tensor(starts, dtype=torch.int32).reshape(E, 1, 1)
    y = ops.moe_grouped_matmul(token, weight, offsets)
    assert y.shape == (1, S, N) and y.dtype == torch.bfloat16
    ref = numpy_moe(token.float().numpy(), weight.float().numpy(), starts)
    assert_close(y.float().numpy(), ref, rtol=1e-2)
    y2 = ops.moe_grouped_matmul(token, weight, offsets, mode="none")  # the cached graph
    assert torch.equal(y, y2)
    with pytest.raises(cudnn.NotSupportedError, match="gather.*illegal memory access"):
        ops.moe_grouped_matmul(token, weight, offsets, mode="gather")


def test_experimental_op_on_cuda_tensors_matches_torch():
    torch = pytest.importorskip("torch")
    if not hasattr(torch, "cuda") or not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    from dnngraph.experimental import ops

    E, S, K, N = 4, 512, 256, 256
    torch.manual_seed(14)
    token = torch.randn(1, S, K, device="cuda", dtype=torch.bfloat16)
    weight = torch.randn(E, N, K, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
    starts = [0, 128, 130, 384]
    offsets = torch.tensor(starts, dtype=torch.int32, device="cuda").reshape(E, 1, 1)
    y = ops.moe_grouped_matmul(token, weight, offsets)
    torch.cuda.synchronize()
    ref = numpy_moe(token.float().cpu().numpy(), weight.float().cpu().numpy(), starts)
    assert_close(y.float().cpu().numpy(), ref, rtol=2e-2)
