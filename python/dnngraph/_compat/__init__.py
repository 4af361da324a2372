"""The cuDNN frontend's Python graph API on top of the native graph (docs/compatibility.md).

``pygraph`` here subclasses the native graph class (``dnngraph._dnngraph.pygraph``): every
frontend method name exists, with the frontend's keywords, positional order and defaults. It
converts what the frontend accepts and the native layer does not (torch/numpy dtypes, framework
tensors passed straight to an op, tensor names and uids as variant-pack keys, ``None`` entries)
and then calls the native method. A frontend feature dnngraph lacks raises
``cudnnGraphNotSupportedError`` (our ``NotSupportedError``) naming what is missing.

The package splits it by concern: errors (errors, handle and device functions), enums (the
frontend's enumerations and knobs), convert (argument conversion), ops (the op methods, made
from the call forms the native bindings declare), graph (pygraph), nodes (graph introspection)
and tensor (Tensor's frontend setters); importing it installs the op methods on pygraph and
the setters on Tensor.
"""

from __future__ import annotations

from .._dnngraph import pygraph as _native
from . import tensor as _tensor  # noqa: F401  (patches Tensor)
from .errors import (
    cudnnGraphNotSupportedError,
    destroy_handle,
    get_stream,
    set_stream,
    _missing,
    get_last_error_string,
    _recording,
    create_device_properties,
    LACKING_FUNCTIONS,
    DeviceInfo,
)
from .enums import (
    FRONTEND_KNOB_TYPE_BASE,
    attention_implementation,
    behavior_note,
    cuda_graph_retention,
    is_frontend_knob_type,
    knob,
    knob_type,
    moe_grouped_matmul_mode,
    numerical_note,
    reshape_mode,
    scalar_type,
    tensor_reordering,
)
from .convert import _is_array
from .ops import _LACKING_METHODS, _LACKING_OPS, _MOE_MODES_WHY, _OPS, _make_lacking, _make_op
from .graph import pygraph
from .nodes import GraphContext, Node, NodeType


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
