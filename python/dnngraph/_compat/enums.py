"""Enumerations and knobs the frontend has and the native module does not."""

from __future__ import annotations

import enum
from typing import Any, List


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
