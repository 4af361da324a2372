"""Real signatures and docstrings for the frontend op methods (help(), IDEs, pydoc).

An op method is made from its call form (ops.py): the frontend's positional names, its renamed
keywords and the native keywords it fixes. Its signature is that form laid over the native
method's nanobind signature: the positional names first, with the native defaults, then the
other native keywords (by their frontend names) and the keywords only the frontend adapters
read, keyword-only.
"""

from __future__ import annotations

import inspect
import textwrap
from typing import Any, Dict, List, Optional, Tuple

_P = inspect.Parameter

# Keywords the frontend adapters (ops.py) read that the native method does not have, with
# their defaults; keyed by the frontend method's name or by a family prefix ending in '*'.
_ADAPTER_KEYWORDS: Dict[str, Dict[str, Any]] = {
    "sdpa*": {"implementation": None, "block_mask": None, "softmax_precision": None,
              "attn_scale_prefolded": False, "kv_mask": None, "unfuse_fma": False,
              "stats_use_log2": False, "sliding_window_length": None,
              "attention_implementation": None, "use_deterministic_algorithm": False},
    "sdpa": {"generate_stats": None},
    "sdpa_fp8": {"generate_stats": None, "score_max": None, "score_sum_exp": None,
                 "bias": None, "dropout": None, "rng_dump": None},
    "conv*": {"convolution_mode": None},
}
# Native keywords an adapter fills itself, with the default the caller sees.
_ADAPTER_DEFAULTS: Dict[str, Dict[str, Any]] = {
    "sdpa": {"is_inference": None},  # None: from generate_stats, else True (no Stats)
    "sdpa_fp8": {"is_inference": None},
}
# Native keywords an adapter sets from a frontend one (never given directly), keyed by that
# frontend keyword: reshape_mode gives the native flag `logical`.
_ADAPTER_SET: Dict[str, Tuple[str, ...]] = {"reshape_mode": ("logical",)}
# Native keywords shown under their frontend names.
_FRONTEND_NAMES = {"left_bound": "diagonal_band_left_bound",
                   "right_bound": "diagonal_band_right_bound"}
# Forms that fix native keywords (relu_backward is pointwise(mode=RELU_BWD)) show only their
# positional names and these.
_FIXED_FORM_KEYWORDS = ("compute_data_type", "name")


def _for(table: Dict[str, Any], fe_name: str) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for key, value in table.items():
        if key == fe_name or (key.endswith("*") and fe_name.startswith(key[:-1])):
            out.update(value)
    return out


def _split_params(text: str) -> List[str]:
    """The top-level comma-separated parts of a parameter list (types hold brackets)."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c in "[(":
            depth += 1
        elif c in "])":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    if text[start:].strip():
        parts.append(text[start:].strip())
    return parts


def _short(annotation: str) -> str:
    return annotation.replace("dnngraph._dnngraph.", "").replace("collections.abc.", "")


def native_params(method: Any) -> Tuple[List[Tuple[str, str, Any]], str, str]:
    """(name, type, default or _P.empty) for each parameter of a nanobind method after self,
    its return type and its docstring (the first overload's)."""
    sigs = getattr(method, "__nb_signature__", None)
    if not sigs:
        return [], "", ""
    text, doc, defaults = sigs[0]
    head, _, ret = text.partition(") -> ")
    params: List[Tuple[str, str, Any]] = []
    for part in _split_params(head[head.index("(") + 1:]):
        if part in ("self", "*", "/") or part.startswith("*"):
            continue
        decl, _, default = part.partition(" = ")
        name, _, ann = decl.partition(": ")
        value: Any = _P.empty
        if default.startswith("\\") and default[1:].isdigit():
            value = defaults[int(default[1:])]
        elif default:
            value = default
        params.append((name.strip(), _short(ann.strip()), value))
    return params, _short(ret.strip()), doc or ""


def op_signature(fe_name: str, native: Any, pos: tuple, renames: dict,
                 fixed: dict) -> Tuple[inspect.Signature, List[Tuple[str, str]], str, str]:
    """The frontend method's signature (self first), its (name, type) list, the native
    method's return type and docstring."""
    params, ret, doc = native_params(native)
    by_name = {n: (ann, d) for n, ann, d in params}
    defaults = _for(_ADAPTER_DEFAULTS, fe_name)
    skip = set(fixed).union(*(_ADAPTER_SET.get(p, ()) for p in pos))
    out = [_P("self", _P.POSITIONAL_OR_KEYWORD)]
    types: List[Tuple[str, str]] = []
    used = set()
    for p in pos:
        nat = renames.get(p, p)
        ann, default = by_name.get(nat, ("", None))
        if fixed and "Tensor" in ann:  # a general method's optional operand the form needs
            default = _P.empty
        used.add(nat)
        out.append(_P(p, _P.POSITIONAL_OR_KEYWORD, default=defaults.get(nat, default)))
        types.append((p, ann))
    for nat, ann, default in params:
        if nat in used or nat in skip:
            continue
        if fixed and nat not in _FIXED_FORM_KEYWORDS:
            continue
        fe = _FRONTEND_NAMES.get(nat, nat) if fe_name.startswith("sdpa") else nat
        out.append(_P(fe, _P.KEYWORD_ONLY, default=defaults.get(nat, default)))
        types.append((fe, ann))
    _required_before_required(out, types)
    have = {p.name for p in out}
    for k, default in _for(_ADAPTER_KEYWORDS, fe_name).items():
        if k not in have and k not in by_name:
            out.append(_P(k, _P.KEYWORD_ONLY, default=default))
            types.append((k, "the frontend's keyword"))
    return inspect.Signature(out), types, ret, doc


def _required_before_required(out: List[inspect.Parameter], types: List[Tuple[str, str]]) -> None:
    """A positional parameter with a default before a required one (rmsnorm's bias=None
    before epsilon, as the frontend orders them) is shown required, as a positional call must
    give it; its docstring line keeps the default, which a call by keyword may rely on."""
    required_after = False
    for i in range(len(out) - 1, 0, -1):
        p = out[i]
        if p.kind != _P.POSITIONAL_OR_KEYWORD:
            continue
        if p.default is _P.empty:
            required_after = True
        elif required_after:
            out[i] = p.replace(default=_P.empty)
            j = i - 1  # types has no entry for self
            name, ann = types[j]
            types[j] = (name, f"{ann} (default {p.default!r} in a call by keyword)")


def op_docstring(fe_name: str, native_name: str, pos: tuple, types: List[Tuple[str, str]],
                 ret: str, native_doc: str) -> str:
    lines = [native_doc.strip() or f"The {fe_name} operation.", ""]
    form = (f"The cuDNN frontend's call form of pygraph.{native_name}: up to {len(pos)} "
            "positional arguments (" + ", ".join(pos) + "), the rest by keyword. A numpy "
            "array or torch tensor given for a tensor becomes a graph input of its shape and "
            "dtype; None leaves an optional input out.")
    if any(n == "norm_forward_phase" for n, _ in types):
        form += " norm_forward_phase may also come first, positionally."
    lines += textwrap.wrap(form, 92)
    lines += ["", "Parameters:"]
    lines += [f"    {n}: {t}" if t else f"    {n}" for n, t in types]
    if ret:
        lines += ["", f"Returns: {ret}"]
    return "\n".join(lines)


def attach(op: Any, fe_name: str, native_name: str, native: Optional[Any], pos: tuple,
           renames: dict, fixed: dict) -> None:
    """Gives an op method made by ops._make_op its signature and docstring."""
    if native is None:
        op.__doc__ = f"{fe_name}({', '.join(pos)}, ...)"
        return
    sig, types, ret, doc = op_signature(fe_name, native, pos, renames, fixed)
    op.__signature__ = sig
    op.__doc__ = op_docstring(fe_name, native_name, pos, types, ret, doc)
