"""The cuDNN frontend's Python graph API on top of the native graph (docs/compatibility.md).

``pygraph`` here subclasses the native graph class (``dnngraph._dnngraph.pygraph``): every
frontend method name exists, with the frontend's keywords, positional order and defaults. It
converts what the frontend accepts and the native layer does not (torch/numpy dtypes, framework
tensors passed straight to an op, tensor names and uids as variant-pack keys, ``None`` entries)
and then calls the native method. A frontend feature dnngraph lacks raises
``cudnnGraphNotSupportedError`` (our ``NotSupportedError``) naming what is missing.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from typing import Any, Dict, List, Optional, Tuple

from . import _interop
from ._dnngraph import (
    DeviceProperties,
    Handle,
    KernelCache,
    NotSupportedError,
    Tensor,
    build_plan_policy,
    data_type,
    heur_mode,
    norm_forward_phase,
    pointwise_mode,
)
from ._dnngraph import create_device_properties as _native_device_properties
from ._dnngraph import create_deviceless_handle
from ._dnngraph import pygraph as _native

from .datatypes import _library_type, is_dtype_like

cudnnGraphNotSupportedError = NotSupportedError


# ---- handle functions: a raw int where a Handle belongs is refused by name -----------------------
from . import _dnngraph as _mod  # noqa: E402


def _need_handle(fn: str, handle: Any) -> None:
    if not isinstance(handle, Handle):
        raise TypeError(f"{fn}: handle must be a cudnn.Handle (dnngraph.Handle, made by "
                        f"create_handle()), got {type(handle).__name__}")


def set_stream(handle: Any, stream: int) -> None:
    """Sets the CUDA stream (an int, e.g. torch.cuda.Stream().cuda_stream) used by execute."""
    _need_handle("set_stream", handle)
    _mod.set_stream(handle, stream)


def get_stream(handle: Any) -> int:
    """The CUDA stream set on `handle` (0: the default stream)."""
    _need_handle("get_stream", handle)
    return _mod.get_stream(handle)


def destroy_handle(handle: Any) -> None:
    """Releases `handle` (graphs built with it keep what they need)."""
    _need_handle("destroy_handle", handle)
    _mod.destroy_handle(handle)


def _missing(what: str, hint: str = "") -> NotSupportedError:
    msg = f"{what} is not supported by dnngraph"
    return NotSupportedError(msg + (f": {hint}" if hint else "") +
                             " (see docs/compatibility.md for the differences from the frontend)")


# ---- enumerations the frontend has and the native module does not ----------------------------
class _Enum(enum.Enum):
    def __repr__(self) -> str:
        return f"{type(self).__name__}.{self.name}"


def _make_enum(name: str, members: List[str], doc: str) -> type:
    e = _Enum(name, [(m, i) for i, m in enumerate(members)])
    e.__doc__ = doc
    e.__module__ = "dnngraph"
    return e


behavior_note = _make_enum("behavior_note", [
    "RUNTIME_COMPILATION", "REQUIRES_FILTER_INT8x32_REORDER", "REQUIRES_BIAS_INT8x32_REORDER",
    "SUPPORTS_CUDA_GRAPH_NATIVE_API", "CUBLASLT_DEPENDENCY"], "Behaviour notes of engines")
numerical_note = _make_enum("numerical_note", [
    "TENSOR_CORE", "DOWN_CONVERT_INPUTS", "REDUCED_PRECISION_REDUCTION", "FFT",
    "NONDETERMINISTIC", "WINOGRAD", "WINOGRAD_TILE_4x4", "WINOGRAD_TILE_6x6",
    "WINOGRAD_TILE_13x13", "STRICT_NAN_PROP"], "Numerical notes of engines")
tensor_reordering = _make_enum("tensor_reordering", ["NONE", "INT8x32", "F16x16", "F8_128x4"],
                               "Tensor reordering (dnngraph supports NONE only)")
attention_implementation = _make_enum("attention_implementation",
                                      ["AUTO", "COMPOSITE", "UNIFIED"],
                                      "SDPA implementation choice (dnngraph chooses itself)")
moe_grouped_matmul_mode = _make_enum("moe_grouped_matmul_mode",
                                     ["NONE", "GATHER", "SCATTER", "COMBINE"],
                                     "MoE grouped matmul modes (dnngraph runs NONE)")
scalar_type = _make_enum("scalar_type", ["COMPILE_TIME_CONST", "RUNTIME_PARAM"],
                         "How a tensor_scalar's value is bound")
reshape_mode = _make_enum("reshape_mode", ["VIEW_ONLY", "LOGICAL"], "Reshape modes")
cuda_graph_retention = _make_enum("cuda_graph_retention", ["NONE", "PER_GRAPH"],
                                  "CUDA graph retention")
# The frontend's knob types (its values: the backend's own numbering differs). dnngraph's engines
# name knobs as cuDNN does ("KERNEL_CFG"); the two meet by name.
knob_type = _Enum("knob_type", [(m, i) for i, m in enumerate([
    "NOT_SET", "SWIZZLE", "TILE_SIZE", "EDGE", "MULTIPLY", "SPLIT_K_BUF", "TILEK", "STAGES",
    "REDUCTION_MODE", "SPLIT_K_SLC", "IDX_MODE", "SPECFILT", "KERNEL_CFG", "WORKSPACE",
    "TILE_CGA_M", "TILE_CGA_N", "BLOCK_SIZE", "OCCUPANCY", "ARRAY_SIZE_PER_THREAD", "SPLIT_COLS",
    "TILE_ROWS", "TILE_COLS", "LOAD_SIZE", "CTA_COUNT", "STREAM_K", "SPLIT_P_SLC", "TILE_M",
    "TILE_N", "WARP_SPEC_CFG", "SWAP_AB", "INPUT_TMA_ENABLE", "OUTPUT_TMA_ENABLE", "TILE_CGA"])]
    + [("SCHED_POLICY", 1000), ("PACK_GQA", 1001), ("SPLIT_KV", 1002)])
knob_type.__doc__ = "Engine knob types (the frontend's names and values)"
knob_type.__module__ = "dnngraph"
FRONTEND_KNOB_TYPE_BASE = 1000


def is_frontend_knob_type(k: Any) -> bool:
    return isinstance(k, int) and k >= FRONTEND_KNOB_TYPE_BASE


class EngineKnob:
    """One knob of an engine (pygraph.get_knobs_for_engine): its type and the values it takes,
    min_value, min_value + stride, ..., max_value."""

    def __init__(self, type: Any, min_value: int, max_value: int, stride: int) -> None:
        self.type, self.min_value, self.max_value, self.stride = type, min_value, max_value, stride

    def __repr__(self) -> str:
        return (f"EngineKnob(type={self.type!r}, min_value={self.min_value}, "
                f"max_value={self.max_value}, stride={self.stride})")


def _knob_from_name(name: str) -> Any:
    return knob_type.__members__.get(name, name)


def _knob_name(k: Any) -> str:
    if isinstance(k, knob_type):
        return k.name
    if isinstance(k, str):
        return k
    if isinstance(k, int):
        try:
            return knob_type(k).name
        except ValueError:
            pass
    raise TypeError(f"create_execution_plan: knob key {k!r}: expected a knob_type member or a "
                    "cuDNN knob name such as 'KERNEL_CFG'")


class knob:
    """An engine knob choice (type, value), as the frontend's `knob`; create_execution_plan takes
    the same choices as a {knob_type: value} dict."""

    def __init__(self, type: Any = None, value: int = 0, **kwargs: Any) -> None:
        self.type, self.value = type, value


_last_error = ""


def get_last_error_string() -> str:
    """The message of the last error raised by a pygraph op, build, build_plans or execute call
    ("" when none)."""
    return _last_error


def _remember(e: BaseException) -> None:
    global _last_error
    _last_error = str(e)


def _recording(fn: Any) -> Any:
    """Wraps a pygraph method so that get_last_error_string() sees its errors."""

    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Exception as e:
            _remember(e)
            raise

    call.__name__, call.__qualname__, call.__doc__ = fn.__name__, fn.__qualname__, fn.__doc__
    return call


def create_device_properties(device_id: int = 0) -> DeviceProperties:
    """The properties of CUDA device ``device_id`` as cuDNN reads them (the frontend's
    ``cudnn.create_device_properties``): ``serialize()`` gives their JSON text, which
    ``DeviceProperties().deserialize(text)`` reads back on a machine without that GPU, to build
    for it with ``pygraph(device_property=props)`` (docs/cudnn-engine.md)."""
    return _native_device_properties(int(device_id))


_LACKING_FUNCTIONS = [
    "causal_conv1d_forward", "causal_conv1d_backward", "causal_conv1d_nwh_forward",
    "causal_conv1d_nwh_backward", "b2b_causal_conv1d_forward", "b2b_causal_conv1d_backward",
    "gnn_agg_op", "gnn_agg_simple_forward", "gnn_agg_simple_backward", "gnn_activation_op",
    "gnn_mha_gat_forward", "gnn_mha_gat_backward", "gnn_mha_gat_v2_forward",
    "gnn_mha_gat_v2_backward",
]


def _lacking_function(name: str) -> Any:
    def fn(*args: Any, **kwargs: Any) -> Any:
        raise _missing(f"{name} (a fused kernel outside the graph API)")

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = "Not supported by dnngraph: raises NotSupportedError."
    return fn


LACKING_FUNCTIONS = {n: _lacking_function(n) for n in _LACKING_FUNCTIONS}


class DeviceInfo:
    """The device of a handle: ordinal (None for the CPU) and kind."""

    def __init__(self, device: str) -> None:
        self.kind = "cpu" if device == "cpu" else "cuda"
        self.ordinal = None if device == "cpu" else int(device.partition(":")[2] or 0)


# ---- argument conversion ----------------------------------------------------------------------
def _is_array(v: Any) -> bool:
    if isinstance(v, (Tensor, int, float, bool, str, bytes, list, tuple, dict)) or v is None:
        return False
    return (hasattr(v, "__dlpack__") or hasattr(v, "__array_interface__") or
            hasattr(v, "__cuda_array_interface__"))


def _dtype(v: Any) -> Any:
    return _library_type(v) if is_dtype_like(v) else v


def _on_cpu(obj: Any) -> bool:
    dev = getattr(obj, "device", None)
    if dev is not None and getattr(dev, "type", None) is not None:
        return dev.type == "cpu"
    return hasattr(obj, "__array_interface__") and not hasattr(obj, "__cuda_array_interface__")


class _Ptr:
    """A raw device or host pointer seen by the native execute as an array of a tensor's
    layout (for _execute_with_ptrs)."""

    def __init__(self, ptr: int, t: Tensor, cuda: bool) -> None:
        span = 1 + sum((d - 1) * s for d, s in zip(t.get_dim(), t.get_stride()) if d > 0)
        if t.get_data_type() == data_type.FP4_E2M1:  # two elements per byte
            span = (span + 1) // 2
        elif t.get_data_type() == data_type.BOOLEAN:  # eight elements (bits) per byte
            span = (span + 7) // 8
        itemsize = _ITEMSIZE.get(t.get_data_type(), 1)
        iface = {"shape": (span,), "typestr": _TYPESTR.get(t.get_data_type(), f"<u{itemsize}"),
                 "data": (int(ptr), False),
                 "version": 3, "strides": None}
        if cuda:
            self.__cuda_array_interface__ = dict(iface, stream=None)
        else:
            self.__array_interface__ = iface


_TYPESTR = {
    data_type.HALF: "<f2", data_type.FLOAT: "<f4", data_type.DOUBLE: "<f8", data_type.INT8: "|i1",
    data_type.UINT8: "|u1", data_type.INT32: "<i4", data_type.INT64: "<i8",
    data_type.BOOLEAN: "|u1",  # bit-packed: the bytes
}
_ITEMSIZE = {
    data_type.HALF: 2, data_type.BFLOAT16: 2, data_type.FLOAT: 4, data_type.DOUBLE: 8,
    data_type.INT8: 1, data_type.UINT8: 1, data_type.INT32: 4, data_type.INT64: 8,
    data_type.BOOLEAN: 1, data_type.FP8_E4M3: 1, data_type.FP8_E5M2: 1, data_type.FP8_E8M0: 1,
    data_type.FP4_E2M1: 1,  # a byte holds two elements (BOOLEAN: eight): _Ptr counts bytes
}

# ---- method tables ----------------------------------------------------------------------------
# frontend method -> (native method, frontend positional names, {frontend kw: native kw},
#                     fixed native kwargs)
_UNARY = ["abs", "ceil", "cos", "elu", "erf", "exp", "floor", "gelu", "gelu_approx_tanh",
          "identity", "log", "logical_not", "neg", "reciprocal", "rsqrt", "sigmoid", "sin",
          "softplus", "sqrt", "tan", "tanh"]
_OPS: Dict[str, tuple] = {}
for _n in _UNARY:
    _OPS[_n] = (_n, ("input",), {}, {})
for _n in ("add", "add_square", "div", "logical_and", "logical_or", "mul", "sub"):
    _OPS[_n] = (_n, ("a", "b"), {}, {})
for _n in ("max", "min", "mod", "pow"):
    _OPS[_n] = (_n, ("input0", "input1"), {"input0": "a", "input1": "b"}, {})
for _n in ("cmp_eq", "cmp_ge", "cmp_gt", "cmp_le", "cmp_lt", "cmp_neq"):
    _OPS[_n] = (_n, ("input", "comparison"), {"input": "a", "comparison": "b"}, {})
for _n in ("elu_backward", "gelu_approx_tanh_backward", "gelu_backward", "sigmoid_backward",
           "softplus_backward", "tanh_backward"):
    _OPS[_n] = (_n, ("loss", "input"), {}, {})
_OPS.update({
    "bias": ("bias", ("input", "bias"), {}, {}),
    "scale": ("scale", ("input", "scale"), {}, {}),
    "binary_select": ("binary_select", ("input0", "input1", "mask"), {}, {}),
    "relu": ("relu", ("input", "negative_slope", "lower_clip", "upper_clip", "name",
                      "compute_data_type"), {}, {}),
    "leaky_relu": ("relu", ("input", "negative_slope", "name", "compute_data_type"), {}, {}),
    "relu_backward": ("pointwise", ("loss", "input", "negative_slope", "lower_clip",
                                    "upper_clip", "name", "compute_data_type"),
                      {"loss": "input0", "input": "input1"},
                      {"mode": pointwise_mode.RELU_BWD}),
    "leaky_relu_backward": ("pointwise", ("loss", "input", "negative_slope", "name",
                                          "compute_data_type"),
                            {"loss": "input0", "input": "input1"},
                            {"mode": pointwise_mode.RELU_BWD}),
    "swish": ("swish", ("input", "swish_beta", "name", "compute_data_type"), {}, {}),
    "swish_backward": ("silu_backward", ("loss", "input", "swish_beta", "name",
                                         "compute_data_type"), {}, {}),
    "matmul": ("matmul", ("A", "B", "compute_data_type", "padding", "name"), {}, {}),
    "conv_fprop": ("conv_fprop", ("image", "weight"), {}, {}),
    "conv_dgrad": ("conv_dgrad", ("loss", "filter"), {}, {}),
    "conv_wgrad": ("conv_wgrad", ("image", "loss"), {}, {}),
    "rmsnorm": ("rmsnorm", ("input", "scale", "bias", "epsilon"), {}, {}),
    "rmsnorm_backward": ("rmsnorm_backward", ("grad", "input", "scale", "inv_variance"), {}, {}),
    "layernorm": ("layernorm", ("input", "scale", "bias", "epsilon"), {}, {}),
    "layernorm_backward": ("layernorm_backward", ("grad", "input", "scale", "mean",
                                                  "inv_variance"), {}, {}),
    "instancenorm": ("instancenorm", ("input", "scale", "bias", "epsilon"), {}, {}),
    "instancenorm_backward": ("instancenorm_backward", ("grad", "input", "scale", "mean",
                                                        "inv_variance"), {}, {}),
    "adalayernorm": ("adalayernorm", ("input", "scale", "bias", "epsilon"), {}, {}),
    "adalayernorm_backward": ("adalayernorm_backward", ("grad", "input", "scale", "mean",
                                                        "inv_variance"), {}, {}),
    "batchnorm": ("batchnorm", ("input", "scale", "bias", "in_running_mean", "in_running_var",
                                "epsilon", "momentum"), {}, {}),
    "batchnorm_inference": ("batchnorm_inference", ("input", "mean", "inv_variance", "scale",
                                                    "bias"), {}, {}),
    "batchnorm_backward": ("batchnorm_backward", ("grad", "input", "scale", "mean",
                                                  "inv_variance"), {}, {}),
    "reduction": ("reduction", ("input", "group_offset"), {}, {}),
    "genstats": ("genstats", ("input",), {}, {}),
    "gen_index": ("gen_index", ("input", "axis", "name", "compute_data_type"), {}, {}),
    "transpose": ("transpose", ("input", "permutation"), {}, {}),
    "reshape": ("reshape", ("input", "reshape_mode", "name"), {}, {}),
    "concatenate": ("concatenate", ("inputs", "axis", "in_place_index", "name"), {}, {}),
    "block_scale_quantize": ("block_scale_quantize", ("input", "group_offset", "block_size", "axis",
                                                      "transpose"), {}, {}),
    "block_scale_dequantize": ("block_scale_dequantize", ("input", "descale", "block_size",
                                                          "is_negative_scale"), {}, {}),
    "sdpa": ("sdpa", ("q", "k", "v"), {}, {}),
    "sdpa_backward": ("sdpa_backward", ("q", "k", "v", "o", "dO", "stats"), {}, {}),
    "sdpa_fp8": ("sdpa_fp8", ("q", "k", "v", "descale_q", "descale_k", "descale_v", "descale_s",
                              "scale_s", "scale_o"), {}, {}),
    "sdpa_fp8_backward": ("sdpa_fp8_backward", (
        "q", "k", "v", "o", "dO", "stats", "descale_q", "descale_k", "descale_v", "descale_o",
        "descale_dO", "descale_s", "descale_dP", "scale_s", "scale_dQ", "scale_dK", "scale_dV",
        "scale_dP"), {}, {}),
    "moe_grouped_matmul": ("moe_grouped_matmul", (
        "token", "weight", "first_token_offset", "token_index", "token_ks", "mode",
        "compute_data_type", "top_k", "name", "top_k_scores"), {}, {}),
})

# Frontend methods for ops dnngraph does not have (yet): each raises NotSupported naming it.
# Those another part of dnngraph implements (the native class has them) are not overridden.
_LACKING_OPS = [
    "slice", "rope", "rope_backward",
    "moe_grouped_matmul_bwd",
    "sdpa_mxfp8", "sdpa_mxfp8_backward", "gdn", "gdn_bwd", "gdn_summary", "gdn_summary_bwd",
    "gdn2", "gdn2_bwd", "gdn2_summary", "gdn2_summary_bwd", "gdp", "gdp_bwd", "gdp_summary",
    "gdp_summary_bwd", "kda", "kda_bwd", "kda_summary", "kda_summary_bwd", "mamba2",
    "mamba2_bwd", "mamba2_summary", "mamba2_summary_bwd",
]
_LACKING_METHODS: Dict[str, str] = {}

# SDPA keywords: frontend name -> native name.
_SDPA_RENAMES = {"diagonal_band_left_bound": "left_bound",
                 "diagonal_band_right_bound": "right_bound"}
# SDPA keywords accepted when unset (None/False/0), refused otherwise: keyword -> why.
_NOT_YET = "dnngraph's IR has no such input yet (cuDNN 9.19's backend can express it)"
_PY_ONLY = ("the frontend serves it only with its Python kernels for compute capability 10.x; "
            "cuDNN's backend (9.19) has no attribute for it")
_SDPA_UNSUPPORTED = {
    "block_mask": _NOT_YET,
    "softmax_precision": _PY_ONLY,
    "attn_scale_prefolded": _PY_ONLY,
    "kv_mask": "the frontend serves it only with its Python kernels; cuDNN's backend has no "
               "input for it",
}


# MoE grouped matmul modes dnngraph does not run: mode name -> why.
_MOE_MODES_WHY = {
    "GATHER": "cuDNN 9.19's engine hits an illegal memory access on GATHER graphs (seen on an "
              "H200 with graphs the frontend 1.32 built itself, even with token_index = 0, 1, "
              "2, ...), so dnngraph does not lower it, and its reference engine does not "
              "emulate a mode no GPU engine runs; gather the token rows yourself and use mode "
              "NONE",
    "SCATTER": "cuDNN 9.19 proposes no engine configuration for SCATTER graphs (seen on an H200 "
               "with the frontend 1.32's own graph), so dnngraph does not lower it, and its "
               "reference engine does not emulate a mode no GPU engine runs; use mode NONE and "
               "scatter the output rows yourself",
    "COMBINE": "the frontend serves it only with its Python engine for compute capability 10.x "
               "(SM100); cuDNN's backend (9.19) has no COMBINE mode",
}


def _moe_kwargs(kw: Dict[str, Any], graph: Any) -> Dict[str, Any]:
    """The frontend's moe_grouped_matmul keywords -> the native method's (mode NONE). Other
    modes, and top_k_scores, are refused at validate(), where the frontend refuses COMBINE."""
    mode = kw.pop("mode", None)
    mode_name = "NONE" if mode is None else str(getattr(mode, "name", mode)).upper()
    mode_name = mode_name.rsplit(".", 1)[-1]
    for unused in ("token_index", "token_ks", "top_k"):  # the frontend sets them on cuDNN's
        kw.pop(unused, None)  # operation in GATHER / SCATTER only
    scores = kw.pop("top_k_scores", None)
    if mode_name != "NONE":
        why = _MOE_MODES_WHY.get(mode_name, "dnngraph knows modes NONE, GATHER, SCATTER and "
                                 "COMBINE only")
        _defer(graph, _missing(f"moe_grouped_matmul(mode={mode_name})", why))
    elif scores is not None:
        _defer(graph, ValueError("moe_grouped_matmul: top_k_scores is only valid for mode "
                                 "COMBINE (this node's mode is NONE): drop top_k_scores"))
    return kw


def _defer(graph: Any, err: Exception) -> None:
    """Keeps a refusal for validate() (and the other build steps), where the frontend raises
    it: frontend-written code builds the node first and catches cudnnGraphNotSupportedError
    around validate/build only."""
    graph.__dict__.setdefault("_deferred", []).append(err)


def _sdpa_kwargs(op: str, kw: Dict[str, Any], graph: Any = None) -> Dict[str, Any]:
    def refuse(err: Exception) -> None:
        if graph is None:
            raise err
        _defer(graph, err)

    for k, why in _SDPA_UNSUPPORTED.items():
        v = kw.pop(k, None)
        if v is not None and v is not False:
            refuse(_missing(f"{op}({k}=...)", why))
    if op.startswith("sdpa_fp8"):
        for k in ("score_max", "score_sum_exp"):
            if kw.pop(k, None) is not None:
                refuse(_missing(f"{op}({k}=...)", "dnngraph's FP8 attention has no row-max / "
                                "sum-of-exp outputs (sdpa has them; use the Stats log-sum-exp)"))
        for k in ("bias", "dropout", "rng_dump"):
            if kw.pop(k, None) is not None:
                refuse(_missing(f"{op}({k}=...)", "dnngraph's FP8 attention has no bias or "
                                "dropout (the frontend refuses bias for FP8 too); use sdpa in "
                                "FP16/BF16 for them"))
    # Sequence lengths given 1-D (b,): the frontend promotes them to (b, 1, 1, 1).
    for k in ("seq_len_q", "seq_len_kv"):
        t = kw.get(k)
        if isinstance(t, Tensor) and len(t.get_dim()) == 1:
            stride = t.get_stride()
            t.set_dim([t.get_dim()[0], 1, 1, 1]).set_stride([stride[0] if stride else 1, 1, 1, 1])
    # The frontend's implementation choice (AUTO/COMPOSITE/UNIFIED): dnngraph lowers every
    # SDPA to one op graph of its own, so the choice does not change the result.
    impl = kw.pop("implementation", None)
    if (getattr(impl, "name", str(impl)).upper().endswith("UNIFIED") and
            (kw.get("score_max") is not None or kw.get("score_sum_exp") is not None)):
        refuse(_missing(f"{op}(implementation=UNIFIED, score_max/score_sum_exp=...)",
                        "the unified SDPA has no Max / Sum_exp outputs before cuDNN 9.21 (this "
                        "is 9.19); use implementation=COMPOSITE or AUTO"))
    # unfuse_fma changes the softmax arithmetic of the frontend's kernels for compute
    # capability 10.x only; elsewhere the frontend ignores it too.
    kw.pop("unfuse_fma", None)
    if kw.pop("stats_use_log2", False) and (op != "sdpa" or kw.get("generate_stats") or
                                            kw.get("is_inference") is False):
        refuse(_missing(f"{op}(stats_use_log2=True)",
                        "Stats are the natural-log log-sum-exp; cuDNN's backend has a base-2 "
                        "form only from 9.27"))
    for k, nk in _SDPA_RENAMES.items():
        if k in kw:
            kw[nk] = kw.pop(k)
    for key in ("sliding_window_length", "sliding_window"):
        w = kw.pop(key, None)
        if w is not None:
            kw.setdefault("left_bound", w)
    gen = kw.pop("generate_stats", None)
    if op in ("sdpa", "sdpa_fp8"):
        inf = kw.get("is_inference")
        if gen is not None:
            if inf is not None and bool(inf) == bool(gen):
                raise ValueError(f"{op}: generate_stats and is_inference contradict each other "
                                 "(generate_stats=True means is_inference=False)")
            kw["is_inference"] = not gen
        elif inf is None:
            kw["is_inference"] = True  # the frontend default: no Stats
    if op == "sdpa_backward" and kw.get("dBias") is None:
        kw["dbias_output"] = False  # the frontend computes dBias only when given one
    if op == "sdpa" and kw.get("dBias") is not None:
        raise TypeError("sdpa: dBias is a keyword of sdpa_backward (the bias gradient)")
    kw.pop("attention_implementation", None)  # dnngraph picks the implementation itself
    kw.pop("use_deterministic_algorithm", None)  # dnngraph's SDPA backward is deterministic
    return kw


def _conv_kwargs(op: str, kw: Dict[str, Any]) -> Dict[str, Any]:
    mode = kw.pop("convolution_mode", None)
    if mode is not None and "CROSS" not in str(mode).upper():
        raise _missing(f"{op}(convolution_mode={mode!r})", "only cross-correlation is supported")
    return kw


def _sm_count(value: Any) -> int:
    """pygraph(sm_count=...) as the native int32 (-1: every SM, as in the frontend)."""
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError("pygraph(sm_count=...): expected an int (the most SMs the graph's GPU "
                        f"plans may use) or None, got {type(value).__name__}")
    n = value.__index__()
    if not -2**31 <= n < 2**31:
        raise ValueError(f"pygraph(sm_count={n}): expected a number of SMs (a 32-bit int) or "
                         "None for every SM")
    return n


class SelectedEngine:
    """pygraph.selected_engine for a plan cuDNN's backend does not serve: its ``name``."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"SelectedEngine({self.name!r})"


class pygraph(_native):
    """A graph of tensors and operations (the frontend's ``cudnn.pygraph``) with its build
    pipeline: validate -> build_operation_graph -> create_execution_plans -> check_support ->
    build_plans -> execute. Handles from ``create_handle(device="cpu")`` run it on the CPU
    reference engine."""

    def __init__(self, name: Any = "test_graph", io_data_type: Any = None,
                 intermediate_data_type: Any = None, compute_data_type: Any = None,
                 handle: Any = None, sm_count: Any = None, sm_version: Any = None,
                 kernel_cache: Any = None, device_property: Any = None,
                 is_dynamic_shape_enabled: bool = False, is_override_shape_enabled: bool = False,
                 cuda_graph_retention: Any = None, *, is_cuda_graph_replay_expected: bool = False,
                 **kwargs: Any) -> None:
        if isinstance(name, Handle):  # dnngraph's own order: pygraph(handle, name, ...)
            handle, name = name, ("test_graph" if io_data_type is None else io_data_type)
            io_data_type = None
        if kwargs:
            raise TypeError(f"pygraph(): unexpected keyword arguments {sorted(kwargs)}")
        if device_property is not None:  # deviceless: plans for that GPU, runs nowhere here
            if handle is not None:
                raise ValueError("pygraph(): pass handle= or device_property=, not both "
                                 "(device_property= builds without a device)")
            if not isinstance(device_property, DeviceProperties):
                raise TypeError("pygraph(device_property=...): expected the DeviceProperties of "
                                "create_device_properties(), got "
                                f"{type(device_property).__name__}")
            handle = create_deviceless_handle(device_property)
        native_kw: Dict[str, Any] = {"name": name or "",
                                     "is_dynamic_shape_enabled": is_dynamic_shape_enabled}
        if sm_count is not None:
            native_kw["sm_count"] = _sm_count(sm_count)
        for k, v in (("io_data_type", io_data_type),
                     ("intermediate_data_type", intermediate_data_type),
                     ("compute_data_type", compute_data_type)):
            if v is not None:
                native_kw[k] = _library_type(v)
        if handle is not None:
            native_kw["handle"] = handle
        if kernel_cache is not None:
            native_kw["kernel_cache"] = kernel_cache
        super().__init__(**native_kw)
        self.allow_unused_tensors = True  # the frontend ignores tensors no op uses
        self._frontend_forms = True  # int addresses and None entries in execute, natively
        # The frontend reads sm_version only in its own support checks (the compute capability
        # its SDPA lowering assumes, else the device's); dnngraph plans for the handle's GPU (or
        # a deviceless handle's target), so it is kept for the caller and used for nothing
        # (docs/compatibility.md). sm_count is the native property (the SM count target).
        self.sm_version = sm_version
        self._override_shape_enabled = bool(is_override_shape_enabled)
        self._bindings: Dict[int, Any] = {}  # uid-less: keyed by id(tensor) -> (tensor, data)

    # ---- tensors ----
    def tensor(self, dim: Any = None, stride: Any = None, data_type: Any = None,
               is_virtual: bool = False, is_pass_by_value: bool = False,
               ragged_offset: Any = None, reordering_type: Any = None, name: str = "",
               uid: Any = None, ragged_offset_multiplier: int = 1, alignment_value: int = 1,
               **kwargs: Any) -> Tensor:
        if kwargs:
            raise TypeError(f"tensor(): unexpected keyword arguments {sorted(kwargs)}")
        if dim is None:
            raise TypeError("tensor(): missing the dims (dim=[...])")
        if reordering_type is not None and getattr(reordering_type, "name", "NONE") != "NONE":
            raise _missing(f"tensor(reordering_type={reordering_type!r})")
        kw: Dict[str, Any] = {"name": name, "dim": [int(d) for d in dim],
                              "is_virtual": is_virtual, "is_pass_by_value": is_pass_by_value}
        if stride is not None:
            kw["stride"] = [int(s) for s in stride]
        if data_type is not None:
            kw["data_type"] = _library_type(data_type)
        if uid is not None and uid != -1:
            kw["uid"] = int(uid)
        if ragged_offset is not None:
            kw["ragged_offset"] = _index_tensor_4d(ragged_offset)
        if ragged_offset_multiplier not in (None, 1):
            kw["ragged_offset_multiplier"] = int(ragged_offset_multiplier)
        t = _native.tensor(self, **kw)
        self._track(t)
        return t

    def _track(self, t: Any) -> Any:
        """Remembers graph tensors made through this class (for tensors/find_tensor/...)."""
        made = self.__dict__.setdefault("_made", [])
        for x in (t if isinstance(t, tuple) else (t,)):
            if isinstance(x, Tensor):
                made.append(x)
        return t

    # ---- introspection of the graph's tensors and nodes ----
    @property
    def tensors(self) -> Dict[str, Tensor]:
        """{name: tensor} of the tensors made through this object's methods."""
        return {t.get_name(): t for t in self.__dict__.get("_made", [])}

    def find_tensor(self, name_or_uid: Any) -> Optional[Tensor]:
        for t in self.__dict__.get("_made", []):
            if (t.get_uid() == name_or_uid) if isinstance(name_or_uid, int) else (
                    t.get_name() == name_or_uid):
                return t
        return None

    def get_inputs(self) -> List[Tensor]:
        """Non-virtual tensors no node produces."""
        produced = {o for n in self._json()["nodes"] for o in n["outputs"].values()}
        names = [t["name"] for i, t in enumerate(self._json()["tensors"])
                 if i not in produced and not t["virtual"]]
        return [t for t in (self.find_tensor(n) for n in names) if t is not None]

    def get_outputs(self) -> List[Tensor]:
        return [t for t in self.__dict__.get("_made", []) if t.get_is_output()]

    @property
    def nodes(self) -> List["Node"]:
        doc = self._json()
        names = [t["name"] for t in doc["tensors"]]
        return [Node(n, names) for n in doc["nodes"]]

    def get_node(self, name: str) -> Optional["Node"]:
        return next((n for n in self.nodes if n.name == name), None)

    def inspect(self) -> Dict[str, Any]:
        """The graph's description (its JSON form) as a dict."""
        return self._json()

    @property
    def context(self) -> "GraphContext":
        doc = self._json()
        return GraphContext(*(getattr(data_type, doc[k]) for k in (
            "io_data_type", "intermediate_data_type", "compute_data_type")), name=doc["name"])

    @property
    def plans(self) -> List[dict]:
        """The supported candidate plans, in plan-index order (see candidates())."""
        return self._supported()

    def backend_plan_entries(self) -> List[dict]:
        return self._supported()

    @property
    def selected_engine(self) -> Optional["SelectedEngine"]:
        """As the frontend: None when cuDNN's backend serves the selected plan (the frontend's
        Python engines are the other case; dnngraph has none). On a CPU handle the reference
        engine serves it: an object whose ``name`` is ``"reference"``."""
        i = self.selected_plan_index()
        plans = self._supported()
        if not 0 <= i < len(plans) or str(plans[i].get("engine")) != "reference":
            return None
        return SelectedEngine(str(plans[i]["name"]))

    def tensor_like(self, template: Any = None, name: str = "", is_virtual: bool = False,
                    **kwargs: Any) -> Tensor:
        if template is None:
            template = kwargs.pop("obj", None)
        if kwargs or template is None:
            raise TypeError("tensor_like(template, name='', is_virtual=False)")
        if isinstance(template, Tensor):  # the copy form: same dims, strides, type
            return self.tensor(dim=template.get_dim(), stride=template.get_stride(),
                               data_type=template.get_data_type(), is_virtual=is_virtual,
                               is_pass_by_value=template.get_is_pass_by_value(), name=name)
        dim, stride, dt = _interop.describe(template)
        if not dim:  # a 0-d array: one element
            dim, stride = [1], [1]
        # The frontend makes host tensors pass-by-value; on a CPU handle that only matters for
        # single values (a bigger host array is ordinary data there).
        pbv = _on_cpu(template) and (self._device() != "cpu" or _numel(dim) == 1)
        return self.tensor(dim=dim, stride=stride, data_type=dt, is_virtual=is_virtual,
                           is_pass_by_value=pbv, name=name)

    def tensor_scalar(self, value: Any, scalar_type: Any = None, name: str = "") -> Tensor:
        """A pass-by-value scalar holding `value` (bound automatically at execute)."""
        if isinstance(value, bool) or isinstance(value, int):
            dt = data_type.INT64 if not isinstance(value, bool) else data_type.BOOLEAN
        elif isinstance(value, float):
            dt = data_type.FLOAT
        elif _is_array(value):
            t = self.tensor_like(value, name=name)
            t.set_is_pass_by_value(True)
            self._bind(t, value)
            return t
        else:
            raise TypeError(f"tensor_scalar: expected a number or a one-element array, got "
                            f"{type(value).__name__}")
        t = self.tensor(dim=[1, 1, 1, 1], stride=[1, 1, 1, 1], data_type=dt,
                        is_pass_by_value=True, name=name)
        self._bind(t, value)
        return t

    def _bind(self, t: Tensor, data: Any) -> None:
        self._bindings[id(t)] = (t, data)

    def _device(self) -> str:
        h = _native.handle.__get__(self)
        return "cuda" if h is None else str(h.device)

    def _ensure_tensor(self, v: Any, name: str) -> Any:
        if not _is_array(v):
            return v
        t = self.tensor_like(v, name=name)
        self._bind(t, v)
        return t

    # ---- pipeline ----
    def _raise_deferred(self) -> None:
        deferred = self.__dict__.get("_deferred")
        if deferred:
            raise deferred[0]

    def validate(self) -> None:
        self._raise_deferred()
        _native.validate(self)

    def build_operation_graph(self, *args: Any, **kwargs: Any) -> None:
        self._raise_deferred()
        _native.build_operation_graph(self, *args, **kwargs)
        self._plans_created = self._support_checked = False

    def build(self, heuristics: Any = None, ctx: Any = None, *, heur_modes: Any = None,
              policy: Any = None) -> None:
        """All pipeline steps; with no arguments heuristics [A, FALLBACK]."""
        self._raise_deferred()
        modes = heuristics if heuristics is not None else heur_modes
        if modes is None:
            modes = [heur_mode.A, heur_mode.FALLBACK]
        if not isinstance(modes, (list, tuple)):
            modes = [modes]
        _native.build(self, list(modes), policy or build_plan_policy.HEURISTICS_CHOICE)
        self._plans_created = self._support_checked = True

    def create_execution_plans(self, heuristics: Any = None, *, heur_modes: Any = None) -> None:
        modes = heuristics if heuristics is not None else heur_modes
        if modes is None:
            modes = [heur_mode.A, heur_mode.FALLBACK]
        if not isinstance(modes, (list, tuple)):
            modes = [modes]
        _native.create_execution_plans(self, list(modes))
        self._plans_created = True
        self._support_checked = False

    def check_support(self) -> None:
        if not self.__dict__.get("_plans_created"):
            self.create_execution_plans()  # the frontend proposes plans itself when not asked
        _native.check_support(self)
        self._support_checked = True

    def _ensure_checked(self) -> None:
        """The frontend builds plans without an explicit check_support() (it checks the
        candidates as it builds): run the missing steps first."""
        if not self.__dict__.get("_support_checked"):
            self.check_support()

    def build_plans(self, policy: Any = None, *args: Any, ctx: Any = None, **kwargs: Any) -> None:
        if args or kwargs:
            raise TypeError("build_plans(policy=build_plan_policy.HEURISTICS_CHOICE)")
        self._ensure_checked()
        _native.build_plans(self, policy or build_plan_policy.HEURISTICS_CHOICE)

    def build_plan_at_index(self, index: int) -> "pygraph":
        self._ensure_checked()
        _native.build_plan_at_index(self, index)
        return self

    def select_plan(self, index: int) -> "pygraph":
        self._ensure_checked()
        _native.select_plan(self, index)
        return self

    # ---- plan filters: the native graph applies them as candidates are checked and built ----
    def deselect_workspace_greater_than(self, workspace_limit: int) -> "pygraph":
        """Skips plans needing more than workspace_limit bytes."""
        return _native.deselect_workspace_greater_than(self, int(workspace_limit))

    def deselect_engines(self, engine_names: List[str]) -> "pygraph":
        """Skips plans whose name, engine id ("eng0") or engine is listed."""
        return _native.deselect_engines(self, [str(n) for n in engine_names])

    def select_numeric_notes(self, notes: List[Any]) -> "pygraph":
        """Keeps only plans carrying every listed numerical note."""
        return _native.select_numeric_notes(self, [_note_key(n) for n in notes])

    def deselect_numeric_notes(self, notes: List[Any]) -> "pygraph":
        """Skips plans carrying any listed numerical note."""
        return _native.deselect_numeric_notes(self, [_note_key(n) for n in notes])

    def select_behavior_notes(self, notes: List[Any]) -> "pygraph":
        """Keeps only plans carrying every listed behaviour note."""
        return _native.select_behavior_notes(self, [_note_key(n) for n in notes])

    def deselect_behavior_notes(self, notes: List[Any]) -> "pygraph":
        """Skips plans carrying any listed behaviour note."""
        return _native.deselect_behavior_notes(self, [_note_key(n) for n in notes])

    # ---- autotuning and CUDA graphs (the frontend's signatures) ----
    def autotune(self, handle: Any = None, variant_pack: Any = None, workspace: Any = None,
                 user_impl: Any = None, **options: Any) -> dict:
        """Times every plan the filters allow on variant_pack and selects the fastest (the
        frontend's ``autotune(handle, variant_pack, workspace)``). Without a variant pack,
        dnngraph allocates the buffers itself. Keyword options: budget_ms, warmup, iterations,
        flush_cache, rotate_inputs, rotate_budget_bytes, use_cache, progress. Returns the
        report dict of the native ``autotune``."""
        if user_impl is not None:
            raise _missing("autotune(user_impl=...)", "dnngraph times the plans itself")
        if variant_pack is not None:
            variant_pack = self._pack(variant_pack, None)
            if workspace is None:
                workspace = self._own_workspace(_native.get_autotune_workspace_size(self))
        return _native.autotune(self, handle, variant_pack, workspace, **options)

    def populate_cuda_graph(self, handle: Any, variant_pack: Any, workspace: Any,
                            cuda_graph: Any) -> None:
        """Records the selected plan into ``cuda_graph`` (an empty cudaGraph_t as an int)."""
        _native.populate_cuda_graph(self, handle, self._pack(variant_pack, None), workspace,
                                    _graph_address(cuda_graph))

    def update_cuda_graph(self, handle: Any, variant_pack: Any, workspace: Any,
                          cuda_graph: Any) -> None:
        """Points a graph filled by populate_cuda_graph at new pointers."""
        _native.update_cuda_graph(self, handle, self._pack(variant_pack, None), workspace,
                                  _graph_address(cuda_graph))

    def get_workspace_size(self, handle: Any = None, override_uids: Any = None,
                           override_shapes: Any = None, override_strides: Any = None) -> int:
        self._no_overrides("get_workspace_size", override_uids, override_shapes,
                           override_strides)
        return _native.get_workspace_size(self)

    def get_workspace_size_plan_at_index(self, index: int, handle: Any = None,
                                         override_uids: Any = None, override_shapes: Any = None,
                                         override_strides: Any = None) -> int:
        self._no_overrides("get_workspace_size_plan_at_index", override_uids, override_shapes,
                           override_strides)
        return _native.get_workspace_size_plan_at_index(self, index)

    def is_override_shape_enabled(self) -> bool:
        return self._override_shape_enabled

    def _no_overrides(self, op: str, uids: Any, shapes: Any, strides: Any) -> None:
        if uids or shapes or strides:
            raise _missing(f"{op}(override_uids/override_shapes/override_strides)",
                           "build one graph per shape (dynamic-shape overrides are not "
                           "implemented)")

    # ---- plans and notes ----
    def _candidates(self) -> List[dict]:
        """The candidate plans; right after create_execution_plans (before check_support) the
        frontend already has its engine configs, so the candidates are checked here first."""
        cands = _native.candidates(self)
        if not cands and self.__dict__.get("_plans_created"):
            self.check_support()
            cands = _native.candidates(self)
        return cands

    def _supported(self) -> List[dict]:
        return [c for c in self._candidates() if c["supported"]]

    def get_execution_plan_count(self) -> int:
        """The number of supported plans (known once create_execution_plans has run)."""
        return len(self._supported())

    def _plan(self, index: int) -> dict:
        plans = self._supported()
        if not 0 <= index < len(plans):
            raise IndexError(f"plan index {index} out of range: the graph has {len(plans)} "
                             "supported plans (get_execution_plan_count())")
        return plans[index]

    # ---- engines by index and their knobs ----
    def get_knobs_for_engine(self, engine: int) -> List["EngineKnob"]:
        """The knobs of engine `engine` (0 <= engine < get_engine_count()): objects with `type`
        (a knob_type; the cuDNN name as a str where the frontend has no member), `min_value`,
        `max_value` and `stride`. NotSupportedError when that engine cannot run the graph."""
        return [EngineKnob(_knob_from_name(k["name"]), k["min_value"], k["max_value"],
                           k["stride"]) for k in super().get_knobs_for_engine(int(engine))]

    def create_execution_plan(self, engine_id: int, knobs: Any = None) -> "pygraph":
        """Appends the plan of engine `engine_id` with `knobs` ({knob_type or cuDNN knob name:
        value}; unset knobs keep the engine's defaults) to the candidates; then check_support()
        and build_plans() as after create_execution_plans(). NotSupportedError when the engine
        refuses the graph or the values."""
        named = {_knob_name(k): int(v) for k, v in dict(knobs or {}).items()}
        super().create_execution_plan(int(engine_id), named)
        return self

    def get_engine_and_knobs_at_index(self, index: int) -> Tuple[int, Dict[Any, int]]:
        """(engine id, {knob_type: value}) of the plan at `index`: what create_execution_plan
        takes to make the same plan again."""
        plan = self._plan(index)
        if int(plan["engine_id"]) < 0:
            raise _missing("get_engine_and_knobs_at_index",
                           "this plan was restored from a serialized graph or plan-cache entry "
                           "that predates engine ids; build the graph again")
        return int(plan["engine_id"]), {_knob_from_name(k): int(v)
                                        for k, v in plan["knobs"].items()}

    def get_plan_name_at_index(self, index: int) -> str:
        return str(self._plan(index)["name"])

    def get_behavior_notes_for_plan_at_index(self, index: int) -> List[Any]:
        return _notes(self._plan(index)["behavior_notes"], behavior_note)

    def get_numerical_notes_for_plan_at_index(self, index: int) -> List[Any]:
        return _notes(self._plan(index)["numerical_notes"], numerical_note)

    def get_behavior_notes(self) -> List[Any]:
        return self.get_behavior_notes_for_plan_at_index(max(self.selected_plan_index(), 0))

    def get_numerical_notes(self) -> List[Any]:
        return self.get_numerical_notes_for_plan_at_index(max(self.selected_plan_index(), 0))

    # ---- introspection ----
    def key(self, *args: Any, **kwargs: Any) -> int:
        """The graph's fingerprint as an int (the frontend's key() type)."""
        return int(_native.key(self), 16)

    def _json(self) -> dict:
        return json.loads(_native.to_json(self))

    def _variant_pack_uids(self) -> List[int]:
        """The frontend's name for _get_variant_pack_uids_sorted()."""
        return self._get_variant_pack_uids_sorted()

    def _get_variant_pack_uids_sorted(self) -> List[int]:
        """Uids of the tensors execute() needs (non-virtual), ascending."""
        _native.validate(self)
        return sorted(t["uid"] for t in self._json()["tensors"] if not t["virtual"])

    def query_tensor_attributes_of_uid(self, uid: int) -> Any:
        """The graph tensor with this uid (its JSON description when it was not made through this
        object)."""
        t = self.find_tensor(int(uid))
        if t is not None:
            return t
        for t in self._json()["tensors"]:
            if t["uid"] == uid:
                return t
        raise ValueError(f"query_tensor_attributes_of_uid: the graph has no tensor with uid {uid}")

    def get_cuda_graph_retention(self) -> Any:
        return cuda_graph_retention.NONE

    # ---- serialization ----
    def serialize(self, *, as_bytes: bool = False, include_kernels: bool = True) -> bytes:
        """The built graph as bytes (deserialize also takes the frontend's list of byte values)."""
        return _native.serialize(self)

    def deserialize(self, *args: Any, **kwargs: Any) -> None:
        handle = kwargs.pop("handle_", kwargs.pop("handle", None))
        data = kwargs.pop("data", kwargs.pop("blob", None))
        kwargs.pop("enforce_precompiled", None)
        if kwargs:
            raise TypeError(f"deserialize(): unexpected keyword arguments {sorted(kwargs)}")
        rest = list(args)
        if rest and isinstance(rest[0], Handle):
            handle = rest.pop(0)
        if rest:
            data = rest.pop(0)
        if isinstance(data, str):
            raise _missing("deserialize(JSON string)", "pass the bytes from serialize()")
        if data is None:
            raise TypeError("deserialize([handle,] data): missing the serialized data")
        blob = bytes(data)
        if handle is None:
            _native.deserialize(self, blob)
        else:
            _native.deserialize(self, handle, blob)
        self._plans_created = self._support_checked = True

    # ---- execution ----
    def _pack(self, tensor_dict: Any, tensor_uids: Any) -> Dict[Any, Any]:
        if tensor_uids is not None:
            if len(tensor_uids) != len(tensor_dict):
                raise ValueError(f"execute: {len(tensor_uids)} tensor_uids for "
                                 f"{len(tensor_dict)} buffers")
            if len(set(tensor_uids)) != len(tensor_uids):
                raise ValueError("execute: tensor_uids has duplicates")
            tensor_dict = dict(zip((int(u) for u in tensor_uids), tensor_dict))
        pack: Dict[Any, Any] = {}
        names: Optional[Dict[str, int]] = None
        for t, data in self._bindings.values():
            pack[t] = data
        for k, v in tensor_dict.items():
            if v is None or k is None:  # the frontend skips optional tensors left as None
                continue
            if isinstance(k, str):
                if names is None:
                    names = {t["name"]: t["uid"] for t in self._json()["tensors"]}
                if k not in names:
                    raise KeyError(f"execute: the graph has no tensor named {k!r}")
                k = names[k]
            pack[k] = v  # (an int: a value or a raw address, told apart by the native execute)
        return pack

    # execute() is the native method: it runs a plain call (a dict of tensors/uids -> arrays on
    # a built graph) itself and hands everything else to _execute_slow (python/src/execute.cpp).
    def _execute_slow(self, tensor_dict: Any, workspace: Any = None, handle: Any = None,
                      override_uids: Any = None, override_shapes: Any = None,
                      override_strides: Any = None, tensor_uids: Any = None) -> None:
        if override_uids or override_shapes or override_strides:
            self._no_overrides("execute", override_uids, override_shapes, override_strides)
        if tensor_uids is None and not isinstance(tensor_dict, Mapping):
            raise TypeError("execute: tensor_dict must be a mapping {tensor, uid or name: array} "
                            f"(got {type(tensor_dict).__name__}; a list needs tensor_uids=)")
        try:
            # (not get_execution_plan_count: that checks every remaining candidate, which on
            # cuDNN can compile kernels for each)
            if _native.selected_plan_index(self) < 0:
                self.build()
            if workspace is None:
                workspace = self._own_workspace(_native.get_workspace_size(self))
            _native._execute_direct(self, self._pack(tensor_dict, tensor_uids), workspace, handle)
        except Exception as e:
            _remember(e)
            raise

    def _own_workspace(self, size: int) -> Any:
        """A workspace the graph keeps, for execute(workspace=None) on a plan that needs one."""
        if size <= 0:
            return None
        ws = self.__dict__.get("_workspace")
        if ws is None or _numel(list(getattr(ws, "shape", [0]))) < size:
            if self._device() == "cpu":
                import numpy as np

                ws = np.empty(size, dtype=np.uint8)
            else:
                import torch

                ws = torch.empty(size, dtype=torch.uint8, device=self._device())
            self._workspace = ws
        return ws

    def execute_plan_at_index(self, tensor_dict: Any, workspace: Any = None, index: int = 0,
                              handle: Any = None, *args: Any, tensor_uids: Any = None,
                              **kwargs: Any) -> None:
        if workspace is None:
            workspace = self._own_workspace(_native.get_workspace_size_plan_at_index(self, index))
        _native.execute_plan_at_index(self, self._pack(tensor_dict, tensor_uids), workspace,
                                      index, handle)

    def _execute_with_ptrs(self, tensor_to_ptr_map: Dict[Any, int], workspace: int = 0,
                           handle: Any = None, *args: Any, **kwargs: Any) -> None:
        """execute() with raw pointers: {uid or tensor: address}, workspace address."""
        cuda = self._device() != "cpu"
        by_uid = {t["uid"]: t for t in self._json()["tensors"]}
        pack: Dict[Any, Any] = {}
        for k, ptr in tensor_to_ptr_map.items():
            uid = k.get_uid() if isinstance(k, Tensor) else int(k)
            if uid not in by_uid:
                raise KeyError(f"_execute_with_ptrs: the graph has no tensor with uid {uid}")
            pack[uid] = _Ptr(int(ptr), _Shape(by_uid[uid]), cuda)
        ws_size = _native.get_workspace_size(self)
        ws = None
        if ws_size > 0:
            ws = _Ptr(int(workspace), _Shape({"dim": [ws_size], "stride": [1],
                                              "data_type": "UINT8"}), cuda)
        _native._execute_direct(self, pack, ws, handle)


class GraphContext:
    """A graph's data types and name (``pygraph.context``)."""

    def __init__(self, io_data_type: Any = None, intermediate_data_type: Any = None,
                 compute_data_type: Any = None, name: str = "") -> None:
        self.io_data_type = io_data_type
        self.intermediate_data_type = intermediate_data_type
        self.compute_data_type = compute_data_type
        self.name = name


NodeType = _make_enum("NodeType", [
    "POINTWISE", "MATMUL", "CONV_FPROP", "CONV_DGRAD", "CONV_WGRAD", "REDUCTION", "LAYERNORM",
    "LAYERNORM_BWD", "RMSNORM", "RMSNORM_BWD", "BATCHNORM", "BATCHNORM_INFERENCE",
    "BATCHNORM_BWD", "SOFTMAX", "SDPA", "SDPA_BWD", "SLICE", "OTHER"], "Kinds of graph nodes")


class Node:
    """A node of a graph (``pygraph.nodes``): name, node_type, compute_data_type, attributes and
    {port: tensor name} for inputs and outputs."""

    def __init__(self, doc: dict, tensor_names: List[str]) -> None:
        self.name = doc["name"]
        kind = str(doc.get("kind", "")).upper()
        aliases = {"LAYERNORM_BACKWARD": "LAYERNORM_BWD", "RMSNORM_BACKWARD": "RMSNORM_BWD",
                   "BATCHNORM_BACKWARD": "BATCHNORM_BWD", "SDPA_BACKWARD": "SDPA_BWD"}
        kind = aliases.get(kind, kind)
        self.node_type = NodeType.__members__.get(kind, NodeType.OTHER)
        self.kind = doc.get("kind")
        self.compute_data_type = getattr(data_type, doc.get("compute_data_type", "NOT_SET"),
                                         data_type.NOT_SET)
        self.params = dict(doc.get("attrs", {}))
        self.inputs = {k: tensor_names[v] for k, v in doc.get("inputs", {}).items()}
        self.outputs = {k: tensor_names[v] for k, v in doc.get("outputs", {}).items()}

    def __repr__(self) -> str:
        return f"<Node {self.name} {self.kind} inputs={self.inputs} outputs={self.outputs}>"


class _Shape:
    """The layout of a tensor's JSON description, read like a Tensor by _Ptr."""

    def __init__(self, t: dict) -> None:
        self._t = t

    def get_dim(self) -> List[int]:
        return self._t["dim"]

    def get_stride(self) -> List[int]:
        return self._t["stride"]

    def get_data_type(self) -> Any:
        return getattr(data_type, self._t["data_type"], data_type.UINT8)


def _numel(dim: List[int]) -> int:
    n = 1
    for d in dim:
        n *= int(d)
    return n


def _graph_address(g: Any) -> int:
    """A cudaGraph_t given as an int, or an object holding one (e.g. cuda-python's CUgraph)."""
    if isinstance(g, int):
        return g
    for attr in ("getPtr", "__int__"):
        f = getattr(g, attr, None)
        if f is not None:
            return int(f())
    raise TypeError(f"cuda_graph: expected a cudaGraph_t address (int), got {type(g).__name__}")


def _note_key(n: Any) -> str:
    """A note (enum member or string, with or without the CUDNN_*_NOTE_ prefix) as a name."""
    name = getattr(n, "name", None) or str(n)
    for prefix in ("CUDNN_BEHAVIOR_NOTE_", "CUDNN_NUMERICAL_NOTE_"):
        name = name.replace(prefix, "")
    return name.upper()


def _notes(names: Any, enum_type: type) -> List[Any]:
    out = []
    for n in names or []:
        key = str(n).upper().replace("CUDNN_BEHAVIOR_NOTE_", "").replace("CUDNN_NUMERICAL_NOTE_",
                                                                         "")
        out.append(enum_type.__members__.get(key, n))
    return out


def _make_op(fe_name: str, native_name: str, pos: tuple, renames: dict, fixed: dict) -> Any:
    def op(self: pygraph, *args: Any, **kwargs: Any) -> Any:
        pos_names = pos
        if args and isinstance(args[0], norm_forward_phase):  # dnngraph's order: phase first
            pos_names = ("norm_forward_phase",) + pos
        if len(args) > len(pos_names):
            raise TypeError(f"{fe_name}() takes at most {len(pos)} positional arguments "
                            f"({', '.join(pos)}), got {len(args)}")
        kw = dict(zip(pos_names, args))
        for k, v in kwargs.items():
            if k in kw:
                raise TypeError(f"{fe_name}() got multiple values for argument {k!r}")
            kw[k] = v
        if fe_name.startswith("sdpa"):
            kw = _sdpa_kwargs(fe_name, kw, self)
        elif fe_name.startswith("conv"):
            kw = _conv_kwargs(fe_name, kw)
        elif fe_name == "matmul" and kw.pop("padding", 0.0) not in (0, 0.0, None):
            raise _missing("matmul(padding=...)")
        elif fe_name in ("reduction", "block_scale_quantize") and \
                kw.get("group_offset") is not None:
            raise _missing(f"{fe_name}(group_offset=...)")
        elif fe_name == "moe_grouped_matmul":
            kw = _moe_kwargs(kw, self)
        elif fe_name == "reshape":
            mode = kw.pop("reshape_mode", None)
            kw["logical"] = mode is not None and getattr(mode, "name", str(mode)).endswith(
                "LOGICAL")
        kw.pop("group_offset", None)
        name = kw.get("name") or fe_name
        if fe_name == "block_scale_dequantize" and isinstance(kw.get("block_size"), int):
            kw["block_size"] = [kw["block_size"]]
        if fe_name == "concatenate" and isinstance(kw.get("inputs"), (list, tuple)):
            kw["inputs"] = [self._ensure_tensor(_dtype(e), f"{name}::IN_{i}")
                            for i, e in enumerate(kw["inputs"])]
        out: Dict[str, Any] = dict(fixed)
        for k, v in kw.items():
            if v is None:
                continue
            k = renames.get(k, k)
            if isinstance(v, tuple):  # dropout=(p, seed, offset) may hold arrays
                v = tuple(self._ensure_tensor(_dtype(e), f"{name}::{k}") for e in v)
            else:
                v = self._ensure_tensor(_dtype(v), f"{name}::{k}")
            out[k] = v
        return self._track(getattr(_native, native_name)(self, **out))

    op.__name__ = op.__qualname__ = fe_name
    doc = getattr(getattr(_native, native_name, None), "__doc__", "") or ""
    op.__doc__ = (f"{fe_name}({', '.join(pos)}, ...): the frontend's call form of "
                  f"{native_name}.\n\n{doc}")
    return op


def _make_lacking(fe_name: str, what: str) -> Any:
    def op(self: pygraph, *args: Any, **kwargs: Any) -> Any:
        raise _missing(what)

    op.__name__ = op.__qualname__ = fe_name
    op.__doc__ = f"Not supported by dnngraph ({what}); raises NotSupportedError."
    return op


for _fe, (_nat, _pos, _ren, _fix) in _OPS.items():
    setattr(pygraph, _fe, _recording(_make_op(_fe, _nat, _pos, _ren, _fix)))
for _fe in ("build", "build_plans", "execute_plan_at_index", "_execute_with_ptrs", "tensor",
            "tensor_like", "deserialize"):
    setattr(pygraph, _fe, _recording(getattr(pygraph, _fe)))
# Why some are lacking, where it is more than "not implemented".
_LACKING_WHY = {
    "rope": "cuDNN's rope operation arrived in cuDNN 9.24 (dnngraph's cuDNN engine is built "
            "against 9.19's API) and the CPU reference engine does not implement it",
}
_LACKING_WHY["rope_backward"] = _LACKING_WHY["rope"]
_LACKING_WHY["moe_grouped_matmul_bwd"] = (
    "cuDNN's MoE grouped matmul backward (the weight gradient) arrived in cuDNN 9.22 with "
    "cublasLt 13.5; the cuDNN 9.19 API dnngraph's cuDNN engine is built against has no "
    "operation for it")
_LACKING_WHY["sdpa_mxfp8"] = (
    "MXFP8 attention needs block-scaled (E8M0, F8_128x4) scale factors, which cuDNN runs only "
    "on Blackwell-class GPUs (compute capability 10.x) with cuDNN 9.21 or later; use sdpa_fp8 "
    "(per-tensor scales) instead")
_LACKING_WHY["sdpa_mxfp8_backward"] = _LACKING_WHY["sdpa_mxfp8"]
for _fe in _LACKING_OPS:
    if not hasattr(_native, _fe):
        _why = _LACKING_WHY.get(_fe)
        setattr(pygraph, _fe, _make_lacking(
            _fe, f"the {_fe} operation" + (f" ({_why})" if _why else "")))
for _fe, _what in _LACKING_METHODS.items():
    if not hasattr(_native, _fe):
        setattr(pygraph, _fe, _make_lacking(_fe, f"{_fe} ({_what})"))


# ---- Tensor: the frontend's setters and getters ------------------------------------------------
_native_set_data_type = Tensor.set_data_type


def _set_data_type(self: Tensor, data_type: Any = None) -> Tensor:
    return _native_set_data_type(self, _library_type(data_type))


def _set_reordering_type(self: Tensor, reordering_type: Any) -> Tensor:
    if getattr(reordering_type, "name", "NONE") != "NONE":
        raise _missing(f"Tensor.set_reordering_type({reordering_type!r})")
    return self


_native_set_ragged_offset = Tensor.set_ragged_offset


def _index_tensor_4d(t: Any) -> Any:
    """A 1-D index tensor (b+1,) as the frontend promotes it: (b+1, 1, 1, 1)."""
    if isinstance(t, Tensor) and len(t.get_dim()) == 1:
        stride = t.get_stride()
        t.set_dim([t.get_dim()[0], 1, 1, 1]).set_stride([stride[0] if stride else 1, 1, 1, 1])
    return t


def _set_ragged_offset(self: Tensor, ragged_offset: Any) -> Tensor:
    return _native_set_ragged_offset(self, _index_tensor_4d(ragged_offset))


def _kernel_cache_counter(name: str) -> Any:
    def fn(self: Any) -> int:
        raise _missing(f"KernelCache.{name}()", "the kernel cache's revision and entry counters "
                       "arrived in cuDNN 9.27; dnngraph's cuDNN engine is built against 9.19's "
                       "API")

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = "Not supported by dnngraph (cuDNN 9.27): raises NotSupportedError."
    return fn


KernelCache.revision = _kernel_cache_counter("revision")
KernelCache.size = _kernel_cache_counter("size")


Tensor.set_data_type = _set_data_type
Tensor.set_ragged_offset = _set_ragged_offset
Tensor.set_reordering_type = _set_reordering_type
Tensor.get_reordering_type = lambda self: tensor_reordering.NONE


# The frontend's Tensor is a dataclass whose fields are read and assigned as attributes
# (`t.dim`, `t.name = "x"`); here each attribute is its getter and setter.
def _attribute(getter: str, setter: str, doc: str, convert: Any = None) -> property:
    def fset(self: Tensor, value: Any) -> None:
        getattr(self, setter)(convert(value) if convert else value)

    return property(lambda self: getattr(self, getter)(), fset, doc=doc)


for _attr, _conv, _doc in (
        ("dim", list, "The dims (set_dim / get_dim)."),
        ("stride", list, "The strides in elements (set_stride / get_stride)."),
        ("data_type", None, "The data type, a cudnn.data_type (torch and numpy dtypes are taken)."),
        ("name", str, "The name (set_name / get_name)."),
        ("uid", int, "The uid (set_uid / get_uid; assigned by validate when not set)."),
        ("is_virtual", bool, "An intermediate no buffer is bound to (set_is_virtual)."),
        ("is_pass_by_value", bool, "A scalar passed by value at execute (set_is_pass_by_value)."),
        ("ragged_offset", None, "The ragged (THD) offsets tensor, or None (set_ragged_offset)."),
        ("ragged_offset_multiplier", int, "Elements per unit of the ragged offsets."),
        ("reordering_type", None, "The layout reordering (NONE only in dnngraph)."),
):
    setattr(Tensor, _attr, _attribute(f"get_{_attr}", f"set_{_attr}", _doc, _conv))
