"""The frontend's op methods: their call forms (declared by the native bindings), the keyword adapters, and the methods made from them."""

from __future__ import annotations

from typing import Any, Dict

from .._dnngraph import Tensor, norm_forward_phase
from .._dnngraph import pygraph as _native
from .convert import _dtype
from .errors import _missing
from .signatures import attach


# ---- method tables ----------------------------------------------------------------------------
# frontend method -> (native method, frontend positional names, {frontend kw: native kw},
#                     fixed native kwargs). Each op's binding declares its forms next to its
# native methods (python/src/ops_*.cpp: frontend_form, read as pygraph._frontend_call_forms).
_OPS: Dict[str, tuple] = dict(_native._frontend_call_forms)

# Frontend methods for ops dnngraph does not have (yet): each raises NotSupported naming it.
# Those another part of dnngraph implements (the native class has them) are not overridden.
_LACKING_OPS = [
    "rope", "rope_backward",
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


def _make_op(fe_name: str, native_name: str, pos: tuple, renames: dict, fixed: dict) -> Any:
    def op(self: Any, *args: Any, **kwargs: Any) -> Any:
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
        if "reshape_mode" in pos_names:  # the frontend's enum -> the native flag
            mode = kw.pop("reshape_mode", None)
            kw["logical"] = mode is not None and getattr(mode, "name", str(mode)).endswith(
                "LOGICAL")
        kw.pop("group_offset", None)
        name = kw.get("name") or fe_name
        if fe_name == "block_scale_dequantize" and isinstance(kw.get("block_size"), int):
            kw["block_size"] = [kw["block_size"]]
        if isinstance(kw.get("inputs"), (list, tuple)):  # a list of inputs: ports IN_0, IN_1, ...
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
    attach(op, fe_name, native_name, getattr(_native, native_name, None), pos, renames, fixed)
    return op


def _make_lacking(fe_name: str, what: str) -> Any:
    def op(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise _missing(what)

    op.__name__ = op.__qualname__ = fe_name
    op.__doc__ = f"Not supported by dnngraph ({what}); raises NotSupportedError."
    return op
