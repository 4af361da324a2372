"""The custom-op guide's pattern, written on dnngraph's Python API.

Users who wrapped cuDNN frontend graphs as torch ops following the guide switch by changing the
import (`import dnngraph as cudnn`): everything below is the guide's recipe — a
`torch.library.Library` op, `tensor_like`, explicit UIDs, a graph cache keyed by
shape/stride/dtype/device, one handle per device with `set_stream`, a workspace allocated per
call, `register_fake` and `register_autograd`. It runs on CPU tensors too (reference engine).

For speed use `dnngraph.torch` instead: the same ops registered in C++ (no Python per call).

    python examples/guide_custom_op.py      # checks the op against torch and prints OK
"""

import threading
from enum import IntEnum

import torch

import dnngraph as cudnn

_lib = torch.library.Library("dnngraph_guide", "DEF")
_lib.define(
    "layer_norm(Tensor x, Tensor w, Tensor b, float eps) -> (Tensor, Tensor, Tensor)"
)
_lib.define(
    "layer_norm_bwd(Tensor dy, Tensor x, Tensor w, Tensor mean, Tensor rstd) -> (Tensor, Tensor, Tensor)"
)


class _UIDs(IntEnum):
    X = 1
    W = 2
    B = 3
    DY = 4
    MEAN = 5
    RSTD = 6
    Y = 100
    DX = 101
    DW = 102
    DB = 103


_cache = {}  # key -> (graph, workspace size); bounded below
_cache_lock = threading.Lock()
_CACHE_MAX = 256
_handles = {}


def _get_handle(device: torch.device):
    key = str(device)
    if key not in _handles:
        _handles[key] = cudnn.create_handle(device=key)
    if device.type == "cuda":
        cudnn.set_stream(handle=_handles[key], stream=torch.cuda.current_stream(device).cuda_stream)
    return _handles[key]


def _rows(x):  # [M, D, 1, 1] view: layer norm over the last dim
    d = x.shape[-1]
    return x.reshape(-1, d, 1, 1)


def _cached(key, build):
    with _cache_lock:
        hit = _cache.get(key)
    if hit is not None:
        return hit
    entry = build()
    with _cache_lock:
        if len(_cache) >= _CACHE_MAX:
            _cache.pop(next(iter(_cache)))  # oldest first
        return _cache.setdefault(key, entry)


def _stat_type(x):
    return cudnn.data_type.DOUBLE if x.dtype == torch.float64 else cudnn.data_type.FLOAT


def _build_fwd(handle, x, w, b, eps):
    ct = _stat_type(x)
    g = cudnn.pygraph(handle=handle, compute_data_type=ct, intermediate_data_type=ct)
    X = g.tensor_like(x).set_uid(int(_UIDs.X))
    W = g.tensor_like(w).set_uid(int(_UIDs.W))
    B = g.tensor_like(b).set_uid(int(_UIDs.B))
    Y, MEAN, RSTD = g.layernorm(
        norm_forward_phase=cudnn.norm_forward_phase.TRAINING,
        input=X,
        scale=W,
        bias=B,
        epsilon=eps,
    )
    Y.set_output(True).set_uid(int(_UIDs.Y))
    MEAN.set_output(True).set_uid(int(_UIDs.MEAN)).set_data_type(ct)
    RSTD.set_output(True).set_uid(int(_UIDs.RSTD)).set_data_type(ct)
    g.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    return g, g.get_workspace_size()


def _build_bwd(handle, dy, x, w, mean, rstd):
    ct = _stat_type(x)
    g = cudnn.pygraph(handle=handle, compute_data_type=ct, intermediate_data_type=ct)
    DY = g.tensor_like(dy).set_uid(int(_UIDs.DY))
    X = g.tensor_like(x).set_uid(int(_UIDs.X))
    W = g.tensor_like(w).set_uid(int(_UIDs.W))
    MEAN = g.tensor_like(mean).set_uid(int(_UIDs.MEAN))
    RSTD = g.tensor_like(rstd).set_uid(int(_UIDs.RSTD))
    DX, DW, DB = g.layernorm_backward(grad=DY, input=X, scale=W, mean=MEAN, inv_variance=RSTD)
    DX.set_output(True).set_uid(int(_UIDs.DX))
    DW.set_output(True).set_uid(int(_UIDs.DW))
    DB.set_output(True).set_uid(int(_UIDs.DB))
    g.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    return g, g.get_workspace_size()


def _key(name, *tensors, extra=()):
    k = [name]
    for t in tensors:
        k += [tuple(t.shape), tuple(t.stride()), t.dtype]
    return tuple(k) + tuple(extra) + (tensors[0].device,)


def _layer_norm_impl(x, w, b, eps):
    x4 = _rows(x.contiguous())
    w4, b4 = w.reshape(1, -1, 1, 1), b.reshape(1, -1, 1, 1)
    handle = _get_handle(x.device)
    g, ws_size = _cached(_key("ln", x4, w4, b4, extra=(eps,)), lambda: _build_fwd(handle, x4, w4, b4, eps))
    st = torch.float64 if x.dtype == torch.float64 else torch.float32
    y = torch.empty_like(x4)
    mean = torch.empty(x4.shape[0], 1, 1, 1, dtype=st, device=x.device)
    rstd = torch.empty_like(mean)
    workspace = torch.empty(max(ws_size, 1), device=x.device, dtype=torch.uint8)  # per call
    uid_to_tensor = {_UIDs.X: x4, _UIDs.W: w4, _UIDs.B: b4, _UIDs.Y: y, _UIDs.MEAN: mean, _UIDs.RSTD: rstd}
    g.execute({int(k): v for k, v in uid_to_tensor.items()}, workspace, handle=handle)
    stat_shape = x.shape[:-1] + (1,)
    return y.view(x.shape), mean.view(stat_shape), rstd.view(stat_shape)


def _layer_norm_bwd_impl(dy, x, w, mean, rstd):
    dy4, x4 = _rows(dy.contiguous()), _rows(x.contiguous())
    w4 = w.reshape(1, -1, 1, 1)
    m4, r4 = mean.reshape(-1, 1, 1, 1), rstd.reshape(-1, 1, 1, 1)
    handle = _get_handle(x.device)
    g, ws_size = _cached(
        _key("ln_bwd", dy4, x4, w4, m4, r4), lambda: _build_bwd(handle, dy4, x4, w4, m4, r4)
    )
    dx = torch.empty_like(x4)
    dw = torch.empty_like(w4)
    db = torch.empty_like(w4)
    workspace = torch.empty(max(ws_size, 1), device=x.device, dtype=torch.uint8)
    uid_to_tensor = {
        _UIDs.DY: dy4, _UIDs.X: x4, _UIDs.W: w4, _UIDs.MEAN: m4, _UIDs.RSTD: r4,
        _UIDs.DX: dx, _UIDs.DW: dw, _UIDs.DB: db,
    }
    g.execute({int(k): v for k, v in uid_to_tensor.items()}, workspace, handle=handle)
    return dx.view(x.shape), dw.view(w.shape), db.view(w.shape)


for _key_name in ("CPU", "CUDA"):
    _lib.impl("layer_norm", _layer_norm_impl, _key_name)
    _lib.impl("layer_norm_bwd", _layer_norm_bwd_impl, _key_name)


@torch.library.register_fake("dnngraph_guide::layer_norm")
def _layer_norm_fake(x, w, b, eps):
    st = torch.float64 if x.dtype == torch.float64 else torch.float32
    stat = x.new_empty(x.shape[:-1] + (1,), dtype=st)
    return torch.empty_like(x), stat, torch.empty_like(stat)


@torch.library.register_fake("dnngraph_guide::layer_norm_bwd")
def _layer_norm_bwd_fake(dy, x, w, mean, rstd):
    return torch.empty_like(x), torch.empty_like(w), torch.empty_like(w)


def _setup_context(ctx, inputs, output):
    x, w, b, eps = inputs
    _, mean, rstd = output
    ctx.save_for_backward(x, w, mean, rstd)


def _backward(ctx, dy, _dmean, _drstd):
    x, w, mean, rstd = ctx.saved_tensors
    dx, dw, db = torch.ops.dnngraph_guide.layer_norm_bwd(dy, x, w, mean, rstd)
    return dx, dw, db, None


torch.library.register_autograd("dnngraph_guide::layer_norm", _backward, setup_context=_setup_context)


def layer_norm(x, w, b, eps=1e-5):
    """The public wrapper, as the guide writes it: layer norm over the last dim."""
    return torch.ops.dnngraph_guide.layer_norm(x, w, b, eps)[0]


if __name__ == "__main__":
    x = torch.randn(4, 7, 32, dtype=torch.float64, requires_grad=True)
    w = torch.randn(32, dtype=torch.float64, requires_grad=True)
    b = torch.randn(32, dtype=torch.float64, requires_grad=True)
    torch.testing.assert_close(layer_norm(x, w, b), torch.nn.functional.layer_norm(x, [32], w, b))
    assert torch.autograd.gradcheck(layer_norm, (x, w, b))
    torch.library.opcheck(torch.ops.dnngraph_guide.layer_norm.default, (x, w, b, 1e-5))
    print("OK: the guide's layer_norm op on dnngraph matches torch (forward, gradcheck, opcheck)")
